"""Build-time image cards with an albumentations pipeline (``transforms``): a user's own transform checked and
embedded, the pipeline's Normalize as what the card records, the refusals."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("timm")

from builder.errors import ModelError
from builder.kkb_runtime.cards.image import transforms as pipelines
from tests.support.files import build_file_tree
from tests.test_models import fresh_state, prepare, save, spec_for


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    return fresh_state()


CUSTOM_TRANSFORM = '''
import numpy as np
from albumentations.core.transforms_interface import ImageOnlyTransform


class Invert(ImageOnlyTransform):
    """A user's own transform, with an init argument that must survive serialisation."""

    def __init__(self, level: int = 255, p: float = 1.0):
        super().__init__(p=p)
        self.level = level

    def apply(self, img, **params):
        return (self.level - img.astype(np.int16)).clip(0, 255).astype(np.uint8)

    def get_transform_init_args_names(self):
        return ("level",)
'''


def custom_transform_kernel(root: Path, state: dict[str, Any], normalize: bool = False) -> tuple[Path, str]:
    """A kernel folder with a package holding a custom transform, and its pipeline saved with A.to_dict."""
    package = f"usertx_{uuid.uuid4().hex[:8]}"  # a fresh name: albumentations' registry is process-wide
    kernel = build_file_tree(root / "kernel", {f"{package}/__init__.py": "", f"{package}/transforms.py": CUSTOM_TRANSFORM})
    save(kernel, state)
    A = pipelines.albumentations()
    sys.path.insert(0, str(kernel))
    try:
        module = __import__(f"{package}.transforms", fromlist=["Invert"])
        steps = [A.Resize(40, 40, p=1.0), module.Invert(level=200, p=1.0)]
        if normalize:
            steps.append(A.Normalize(mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), p=1.0))
        (kernel / "transforms.json").write_text(json.dumps(A.to_dict(A.Compose(steps))))
    finally:
        sys.path.remove(str(kernel))
        for name in [name for name in sys.modules if name.split(".")[0] == package]:
            del sys.modules[name]
    return kernel, package


def test_a_pipeline_with_a_custom_transform_is_checked_and_embedded(tmp_path: Path, state: dict[str, Any]) -> None:
    kernel, package = custom_transform_kernel(tmp_path, state)
    (card,), _ = prepare(kernel, spec_for(transforms="transforms.json"))
    assert card["transforms"] == json.loads((kernel / "transforms.json").read_text())
    assert card["custom_transforms"] == [f"{package}.transforms.Invert"]
    assert card["normalize_in_pipeline"] is False
    assert not [name for name in sys.modules if name.startswith(package)]  # the build forgets the user's modules
    assert str(kernel.resolve()) not in sys.path


def test_a_pipeline_normalize_is_what_the_card_records(tmp_path: Path, state: dict[str, Any]) -> None:
    kernel, _ = custom_transform_kernel(tmp_path, state, normalize=True)
    (card,), _ = prepare(kernel, spec_for(transforms="transforms.json"))
    assert card["normalize_in_pipeline"] is True
    assert (card["mean"], card["std"]) == ([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])
    with pytest.raises(ModelError) as caught:
        prepare(kernel, spec_for(transforms="transforms.json", mean=[0.4, 0.4, 0.4]), tmp_path / "stage2")
    assert caught.value.message == ("[[models]] 'net': mean = [0.4, 0.4, 0.4] but the pipeline's Normalize has "
                                    "mean = [0.5, 0.5, 0.5]")


def test_a_custom_transform_missing_from_the_kernel_is_refused(tmp_path: Path, state: dict[str, Any]) -> None:
    kernel, package = custom_transform_kernel(tmp_path, state)
    (kernel / package / "transforms.py").unlink()
    with pytest.raises(ModelError) as caught:
        prepare(kernel, spec_for(transforms="transforms.json"))
    assert caught.value.message.startswith(
        f"[[models]] 'net': transforms.json: custom transform {package}.transforms.Invert: "
        f"cannot import module '{package}.transforms'")
    assert "code bundle" in (caught.value.hint or "")


def test_a_transform_defined_in_a_script_is_refused(tmp_path: Path, state: dict[str, Any]) -> None:
    pipeline = {"__version__": "2.0.8", "transform": {"__class_fullname__": "Compose", "p": 1.0, "transforms": [
        {"__class_fullname__": "__main__.Invert", "p": 1.0}]}}
    kernel = build_file_tree(tmp_path / "kernel", {"transforms.json": json.dumps(pipeline)})
    save(kernel, state)
    with pytest.raises(ModelError, match=r"custom transform Invert was defined in a script \(__main__\)"):
        prepare(kernel, spec_for(transforms="transforms.json"))


def test_a_file_that_is_not_a_pipeline_is_refused(tmp_path: Path, state: dict[str, Any]) -> None:
    kernel = build_file_tree(tmp_path / "kernel", {"transforms.json": json.dumps({"resize": 48})})
    save(kernel, state)
    with pytest.raises(ModelError, match=r"not an albumentations pipeline"):
        prepare(kernel, spec_for(transforms="transforms.json"))
