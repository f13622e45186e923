"""The kernel's content hash, carried by the pushed kernel itself so that Kaggle can say "unchanged".

A push records what it pushed in the project's history (``.kkb/history.jsonl``), but a fresh clone or a
CI runner has no history: it must learn from Kaggle whether the current version already is this kernel.
The hash travels in the code Kaggle stores: a notebook's ``metadata.kkb.kernel_hash`` (the client sends
the notebook's JSON as it is, less its outputs), a script's last line ``# kkb kernel_hash: sha256:…``.
The hash never covers its own stamp: :func:`unstamped_bytes` is what is hashed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

from builder.notebook.render import notebook_text

SCRIPT_STAMP = "# kkb kernel_hash: "
_SCRIPT_STAMP_LINE = re.compile(r"\n# kkb kernel_hash: (sha256:[0-9a-f]{64})\n\Z")


def unstamped_bytes(path: Path) -> bytes:
    """The file's bytes without a kernel-hash stamp (a notebook always in nbformat's own serialisation)."""
    data = path.read_bytes()
    if path.suffix == ".ipynb":
        try:
            notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
        except (ValueError, UnicodeDecodeError, nbformat.reader.NotJSONError):
            return data
        provenance = notebook.metadata.get("kkb")
        if isinstance(provenance, dict):
            provenance.pop("kernel_hash", None)
        return notebook_text(notebook).encode("utf-8")  # always re-serialised: stamped or not, the same bytes
    if path.suffix == ".py":
        text = data.decode("utf-8", errors="surrogateescape")
        return _SCRIPT_STAMP_LINE.sub("\n", text).encode("utf-8", errors="surrogateescape")
    return data


def stamp(code_file: Path, kernel_hash: str) -> None:
    """Write ``kernel_hash`` into the kernel's code file (a notebook's metadata, a script's last line)."""
    if code_file.suffix == ".ipynb":
        notebook = nbformat.reads(code_file.read_text(encoding="utf-8"), as_version=4)
        notebook.metadata.setdefault("kkb", {})["kernel_hash"] = kernel_hash
        code_file.write_text(notebook_text(notebook), encoding="utf-8")
    elif code_file.suffix == ".py":
        text = unstamped_bytes(code_file).decode("utf-8", errors="surrogateescape")
        code_file.write_text(text.rstrip("\n") + f"\n{SCRIPT_STAMP}{kernel_hash}\n", encoding="utf-8",
                             errors="surrogateescape")


def stamped_hash(source: str | None) -> str | None:
    """The kernel hash in code as Kaggle serves it, or None (no kernel, an older kkb, or not said)."""
    if not source:
        return None
    try:
        notebook = json.loads(source)
    except ValueError:
        found = _SCRIPT_STAMP_LINE.search(source if source.endswith("\n") else source + "\n")
        return found.group(1) if found else None
    meta = notebook.get("metadata") if isinstance(notebook, dict) else None
    kkb = meta.get("kkb") if isinstance(meta, dict) else None
    value = kkb.get("kernel_hash") if isinstance(kkb, dict) else None
    return value if isinstance(value, str) and value.startswith("sha256:") else None
