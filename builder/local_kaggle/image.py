"""The image the local Kaggle plays: what each run's output says it ran on (``ServerSettings.image``).

A kkb kernel on Kaggle records the image it had (``kkb_image.json``, ``builder.kkb_runtime.image_capture``); in kkb's
sandbox it records nothing, because the sandbox is this machine. A local Kaggle given an image description declares
that image instead: when a run ends, the description (read then, so a test can move the image between runs) goes
into the run's output in the capture's shape. Tests of the drift guard use it with captured images as fixtures.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from builder.kkb_runtime.image_capture import CAPTURE_FILE, FORMAT


def declare_image(description: Path | None, output: Path) -> Path | None:
    """Write the declared image into a run's ``output`` as ``kkb_image.json``; None when there is none to declare."""
    if description is None or not Path(description).is_file():
        return None
    try:
        data = json.loads(Path(description).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("python"), str):
        return None
    capture = {
        "format": FORMAT, "python": data["python"], "python_full": str(data.get("python_full") or data["python"]),
        "cuda": data.get("cuda"), "gpu": data.get("gpu"), "platform": "local Kaggle",
        "docker_image": data.get("docker_image") or f"local Kaggle image {Path(description).name}",
        "packages": dict(data.get("packages") or {}),
        "captured": str(data.get("captured") or datetime.now(timezone.utc).replace(microsecond=0).isoformat()),
    }
    target = Path(output) / CAPTURE_FILE
    target.write_text(json.dumps(capture, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return target


__all__ = ["declare_image"]
