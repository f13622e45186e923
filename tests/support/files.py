"""Where the repository is, tmp_path file trees written from a dict, and the repository's scripts as modules."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

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


def refresh_image_script() -> ModuleType:
    """``builder/data/refresh_image.py``: a script beside the data it writes, not a module of the package."""
    spec = importlib.util.spec_from_file_location("refresh_image", REPO / "builder" / "data" / "refresh_image.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
