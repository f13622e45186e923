"""Kaggle's image as data: the shipped description, a user's replacement, pins that conflict, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.errors import SpecError
from builder.project.image import image_package_for_module, load_image, pin_conflicts, preinstalled_patterns
from builder.run.limits import parse_size


def test_the_shipped_image_is_dated_and_says_where_its_versions_come_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KKB_KAGGLE_IMAGE", raising=False)
    image = load_image()
    assert image.python == "3.12" and image.captured == "2026-06-17" and image.verified
    assert image.sources[0].startswith("Kaggle/docker-python list_packages 1ebea3c (2026-06-17, dated by its commit): "
                                      "installed_cpu_packages.txt")
    assert len(image.packages) > 800 and image.packages["pandas"] == "2.3.3" and image.has("ipywidgets")
    assert image.has("scikit-learn") and image.has("nvidia-cudnn-cu12") and image.has("nvidia-anything") and not image.has("kkb")
    assert {"torch", "timm", "albumentations", "numpy", "nvidia-*"} <= set(preinstalled_patterns(image))
    assert image_package_for_module("sklearn.linear_model", image) == ("scikit-learn", "1.6.1")
    assert image_package_for_module("cv2", image) == ("opencv-python", image.packages["opencv-python"])
    assert image_package_for_module("kkb_nowhere", image) is None


def test_a_user_replaces_the_image_through_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "image.json"
    path.write_text(json.dumps({"python": "3.11", "captured": "2026-11-01", "packages": {"Scikit_Learn": "1.7.2"}}))
    monkeypatch.setenv("KKB_KAGGLE_IMAGE", str(path))
    image = load_image()
    assert (image.python, image.packages) == ("3.11", {"scikit-learn": "1.7.2"})
    assert pin_conflicts(["scikit-learn==1.5.0", "scikit-learn>=1.7", "einops==0.8.0", "torch"]) == [
        "scikit-learn==1.5.0 conflicts with Kaggle's image, which has scikit-learn 1.7.2 (2026-11-01): "
        "the wheelhouse replaces the image's copy"]


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("{not json", "not a readable Kaggle image description", id="not-json"),
    pytest.param('{"packages": {}}', "a Kaggle image description needs 'python' and a 'packages' table", id="no-python"),
])
def test_a_broken_image_file_names_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "image.json"
    path.write_text(text)
    with pytest.raises(SpecError, match=message) as error:
        load_image(path)
    assert str(path) in error.value.message and "KKB_KAGGLE_IMAGE" in (error.value.hint or "")


@pytest.mark.parametrize(("text", "value"), [("16G", 16 * 2**30), ("512M", 512 * 2**20), ("1.5GiB", 3 * 2**29),
                                             ("2000000000", 2_000_000_000)])
def test_memory_sizes(text: str, value: int) -> None:
    assert parse_size(text) == value


def test_a_bad_memory_size_says_how_to_write_one() -> None:
    with pytest.raises(Exception, match="--memory: 'lots' is not a size") as error:
        parse_size("lots")
    assert error.value.hint == "e.g. 16G, 512M or a number of bytes"  # type: ignore[attr-defined]
