"""``kkb image --refresh``: Kaggle's image description rebuilt from what Kaggle/docker-python publishes.

Kaggle/docker-python keeps ``installed_cpu_packages.txt`` (``pip freeze`` of the CPU image, branch ``list_packages``)
next to ``Dockerfile.tmpl`` (the Colab base and the image's Python). No freeze of the GPU image is published: it is
the same requirements on Colab's GPU runtime, so its description is the CPU freeze with the torch family's ``+cpu``
build label dropped (the CUDA label of the GPU build is not published: the current description's ``cuda`` is kept)
and the NVIDIA libraries named by pattern. The date is the freeze's commit date: the description says it, and a dry
run with a description older than 90 days says so.

Where it reads from (:func:`read_published`): a git repository of docker-python (a checkout, or the bare snapshot a
mirror keeps) at ``ref``; a folder holding the two files (dated by their modification time); or a raw-file base URL
(``https://raw.githubusercontent.com/Kaggle/docker-python/list_packages``, dated today). It keeps the import names
of the current description (module -> distribution, where they differ), adds those of the packages installed here,
writes the sources with the commit and its date, and the kernel's environment
(:mod:`builder.project.image_environment`). The result goes where kkb reads a description before the one it
ships (``builder.project.image_store``), or to ``--out`` (``builder/data/kaggle-image.json`` refreshes the packaged
one in a checkout).
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import date, datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from builder.errors import KkbError
from builder.project.image import load_image
from builder.project.image_environment import environment_section
from builder.project.image_store import captured_image_path, write_json

FREEZE = "installed_cpu_packages.txt"
DOCKERFILE = "Dockerfile.tmpl"
DEFAULT_REF = "list_packages"
FORMAT = 2
_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")
_PYTHON = re.compile(r"python(3\.\d+)/(?:dist|site)-packages")
_BASE = re.compile(r"^FROM (\S+/runtime:\S+)", re.MULTILINE)
# The torch family is built per accelerator: the CPU image's local label (+cpu) is not the GPU image's.
PER_ACCELERATOR = ("torch", "torchvision", "torchaudio")
# What only the GPU image has, by pattern (versions follow its torch build).
GPU_ONLY = ("nvidia-*", "triton")
# Well-known modules whose distribution has another name (kept even when not installed here).
KNOWN_IMPORT_NAMES = {
    "sklearn": "scikit-learn", "skimage": "scikit-image", "cv2": "opencv-python", "PIL": "pillow", "yaml": "pyyaml",
    "dateutil": "python-dateutil", "google.protobuf": "protobuf", "bs4": "beautifulsoup4", "attr": "attrs",
    "huggingface_hub": "huggingface-hub", "sentence_transformers": "sentence-transformers",
    "typing_extensions": "typing-extensions", "pydantic_core": "pydantic-core", "Crypto": "pycryptodome",
    "OpenSSL": "pyopenssl", "jwt": "pyjwt", "lightning": "lightning", "pytorch_lightning": "pytorch-lightning",
    "tensorflow_hub": "tensorflow-hub", "tf_keras": "tf-keras", "umap": "umap-learn", "Levenshtein": "levenshtein",
    "sentencepiece": "sentencepiece", "fitz": "pymupdf", "magic": "python-magic", "docx": "python-docx",
}


@dataclass(frozen=True)
class Published:
    """The two files docker-python publishes, and which version of them was read."""

    freeze: str
    dockerfile: str
    where: str    # "Kaggle/docker-python list_packages 1ebea3c", a folder, or a URL
    date: str     # the freeze's date (ISO)
    dated_by: str  # how the date is known: "its commit", "the files' modification time", "today (a URL has no date)"


@dataclass(frozen=True)
class RefreshResult:
    path: Path
    data: dict[str, Any]
    before: dict[str, str]  # the packages of the description it replaced (empty: none)

    @property
    def packages(self) -> dict[str, str]:
        return dict(self.data["packages"])

    def summary(self) -> str:
        after = self.packages
        changed = sorted(name for name in self.before if name in after and self.before[name] != after[name])
        return (f"{self.path}: {len(after)} packages (was {len(self.before)}), Python {self.data['python']}, as of "
                f"{self.data['captured']}; {len(set(after) - set(self.before))} added, "
                f"{len(set(self.before) - set(after))} gone, {len(changed)} changed version")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_freeze(text: str) -> dict[str, str]:
    """``pip freeze`` lines -> {canonical name: version}; editable, URL and comment lines are skipped."""
    packages: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match:
            packages[canonical(match.group(1))] = match.group(2)
    return packages


def gpu_packages(cpu: dict[str, str]) -> dict[str, str]:
    """The GPU image's description from the CPU freeze (see the module docstring)."""
    return {name: version.split("+")[0] if name in PER_ACCELERATOR else version for name, version in cpu.items()}


def import_names(packages: dict[str, str], current: dict[str, str]) -> dict[str, str]:
    """module -> distribution where they differ: the current file's, the known ones, and what is installed here."""
    names = {**current, **KNOWN_IMPORT_NAMES}
    for module, dists in metadata.packages_distributions().items():
        for dist in dists:
            key = canonical(dist)
            if key in packages and canonical(module) != key and not module.startswith("_"):
                names.setdefault(module, key)
    return {module: dist for module, dist in sorted(names.items()) if dist in packages}


def read_published(source: str, ref: str = DEFAULT_REF) -> Published:
    """The freeze and the Dockerfile from a git repository at ``ref``, a folder holding them, or a raw-file base URL."""
    if re.match(r"^https?://", source):
        return Published(_fetch(source, FREEZE), _fetch(source, DOCKERFILE), source, date.today().isoformat(),
                         "today (a URL says no date)")
    folder = Path(source).expanduser()
    files = [folder / FREEZE, folder / DOCKERFILE]
    if not folder.is_dir():
        raise KkbError(f"--refresh {source}: not a folder or an http(s) URL",
                       hint="point it at a clone of Kaggle/docker-python, or at "
                            "https://raw.githubusercontent.com/Kaggle/docker-python/list_packages")
    if _is_repository(folder):
        freeze, dockerfile = _git(folder, "show", f"{ref}:{FREEZE}"), _git(folder, "show", f"{ref}:{DOCKERFILE}")
        if freeze is None or dockerfile is None:
            raise KkbError(f"{folder}: {ref} has no {FREEZE} and {DOCKERFILE}",
                           hint=f"docker-python publishes its freeze on the branch {DEFAULT_REF}: pass --ref {DEFAULT_REF}")
        commit, day = (_git(folder, "log", "-1", "--format=%h %ad", "--date=short", ref, "--", FREEZE) or "? ?").split()[:2]
        return Published(freeze, dockerfile, f"Kaggle/docker-python {ref} {commit}", day, "its commit")
    if all(path.is_file() for path in files):  # the files themselves (a download, a recorded copy)
        modified = datetime.fromtimestamp(files[0].stat().st_mtime, tz=timezone.utc).date().isoformat()
        return Published(files[0].read_text(encoding="utf-8"), files[1].read_text(encoding="utf-8"), str(folder), modified,
                         "the files' modification time")
    missing = [path.name for path in files if not path.is_file()]
    raise KkbError(f"{folder}: no {' and no '.join(missing)} (and not a git repository)",
                   hint="point --refresh at a clone of Kaggle/docker-python, or a folder holding both files")


def _is_repository(folder: Path) -> bool:
    """A clone whose top is ``folder``, or a bare repository (a mirror's snapshot); not a folder inside some other."""
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top is not None and top.strip():
        return Path(top.strip()).resolve() == folder.resolve()
    return (_git(folder, "rev-parse", "--is-bare-repository") or "").strip() == "true"


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _fetch(base: str, name: str) -> str:
    url = f"{base.rstrip('/')}/{name}"
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            text: str = response.read().decode("utf-8")
            return text
    except (OSError, urllib.error.URLError, UnicodeDecodeError) as exc:
        raise KkbError(f"cannot read {url}: {exc}", hint="check the URL (a raw-file base of the list_packages branch), "
                                                         "or clone Kaggle/docker-python and pass the folder") from None


def description(published: Published, current: dict[str, Any]) -> dict[str, Any]:
    """The description (``format: 2``) of the published files; ``current``'s ``cuda``, patterns and names are kept."""
    cpu = parse_freeze(published.freeze)
    if not cpu:
        raise KkbError(f"{published.where}: {FREEZE} lists no package", hint="check that this is docker-python's freeze")
    python, base = _PYTHON.search(published.dockerfile), _BASE.search(published.dockerfile)
    packages = gpu_packages(cpu)
    return {
        "format": FORMAT,
        "name": "Kaggle Python image (gcr.io/kaggle-gpu-images/python; the CPU image has the same packages)",
        "captured": published.date,
        "python": python.group(1) if python else str(current.get("python", "3.12")),
        "cuda": current.get("cuda", ""),
        "sources": [
            f"{published.where} ({published.date}, dated by {published.dated_by}): {FREEZE}, the pip freeze of the CPU "
            f"image ({len(cpu)} packages)",
            f"{published.where}: {DOCKERFILE} (Python from PACKAGE_PATH; GPU base {base.group(1) if base else 'unknown'})",
            "GPU image: no freeze is published; the same requirements on Colab's GPU runtime, so the CPU freeze with "
            f"{', '.join(PER_ACCELERATOR)} without their +cpu build label and the NVIDIA CUDA libraries by pattern",
            f"refreshed by kkb image --refresh on {date.today().isoformat()}",
        ],
        "verified": True,
        "packages": dict(sorted(packages.items())),
        "cpu_builds": {name: cpu[name] for name in PER_ACCELERATOR if name in cpu},
        "preinstalled_patterns": sorted({*current.get("preinstalled_patterns", []), *GPU_ONLY}),
        "import_names": import_names(packages, dict(current.get("import_names") or {})),
        "environment": environment_section(published.dockerfile, f"{published.where}: {DOCKERFILE}"),
    }


def refresh_image(source: str, ref: str = DEFAULT_REF, out: Path | None = None) -> RefreshResult:
    """Rebuild the description from docker-python's published files into ``out`` (default: where kkb reads it first)."""
    target = Path(out) if out is not None else captured_image_path()
    in_use = load_image()
    current: dict[str, Any] = {"python": in_use.python, "cuda": in_use.cuda, "import_names": in_use.import_names,
                               "preinstalled_patterns": list(in_use.patterns)}
    data = description(read_published(source, ref), current)
    try:
        before = json.loads(target.read_text(encoding="utf-8")).get("packages", {}) if target.is_file() else {}
    except (OSError, ValueError):
        before = {}
    write_json(target, data, "the Kaggle image description", indent=2)  # the packaged file's layout, keys in order
    return RefreshResult(target, data, dict(before) if isinstance(before, dict) else {})


__all__ = ["DEFAULT_REF", "Published", "RefreshResult", "description", "gpu_packages", "parse_freeze", "read_published",
           "refresh_image"]
