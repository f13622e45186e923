"""Small JSON state files kkb keeps next to its builds (records, caches): read them forgivingly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; ``{}`` when the file is missing, unreadable, or not an object:
    a lost record only costs a rebuild, never a failed command."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
