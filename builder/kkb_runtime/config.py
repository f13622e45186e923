"""``kkb_kernel.json``: what the build decided, read inside the kernel."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_FILE = "kkb_kernel.json"


@dataclass(frozen=True)
class KernelConfig:
    """The kernel-side view of ``kernel.toml`` plus what the build resolved (dataset ids, model cards)."""

    raw: dict[str, Any]
    path: Path
    code_dir: Path = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "code_dir", self.path.parent)

    @property
    def competition_slug(self) -> str:
        return str(self.raw["competition"]["slug"])

    @property
    def sample_submission(self) -> str:
        return str(self.raw["competition"]["sample_submission"])

    @property
    def code_dataset(self) -> str:
        return str(self.raw["datasets"]["code"])

    @property
    def weights_dataset(self) -> str | None:
        value = self.raw["datasets"].get("weights")
        return str(value) if value else None

    @property
    def steps(self) -> list[dict[str, Any]]:
        return list(self.raw.get("steps", []))

    @property
    def submission(self) -> dict[str, Any]:
        return dict(self.raw["submission"])

    @property
    def postprocess(self) -> list[dict[str, Any]]:
        return list(self.raw.get("postprocess") or [])

    @property
    def fast_commit(self) -> dict[str, Any]:
        return dict(self.raw["fast_commit"])

    @property
    def models(self) -> list[dict[str, Any]]:
        return list(self.raw.get("models", []))

    @property
    def inputs(self) -> list[dict[str, Any]]:
        """``[[inputs]]``: ``{"name", "kind", "ref", "mount"}`` each (``mount``: the current-layout path under input/)."""
        return list(self.raw.get("inputs", []))

    def model(self, name: str) -> dict[str, Any]:
        for card in self.models:
            if card["name"] == name:
                return card
        known = ", ".join(card["name"] for card in self.models) or "none"
        raise KeyError(f"no model named '{name}' in {self.path} (known: {known})")


def load_config(path: str | os.PathLike[str] | None = None) -> KernelConfig:
    """Read ``kkb_kernel.json`` from ``path``, else ``$KKB_KERNEL_CONFIG``, else next to this package."""
    if path is None:
        path = os.environ.get("KKB_KERNEL_CONFIG") or Path(__file__).resolve().parent.parent / CONFIG_FILE
    config_path = Path(path)
    if config_path.is_dir():
        config_path = config_path / CONFIG_FILE
    return KernelConfig(raw=json.loads(config_path.read_text(encoding="utf-8")), path=config_path)
