"""Where the repository is, and tmp_path file trees written from a dict."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KERNELS = REPO / "kernels"


def build_file_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Write ``{relative path: content}`` under ``root`` and return ``root``."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root
