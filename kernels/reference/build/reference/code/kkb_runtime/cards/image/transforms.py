"""The inference transforms: an albumentations pipeline that travels as ``A.to_dict`` JSON.

The build embeds the user's serialised pipeline in the model card; the kernel rebuilds it with
``A.from_dict``. A custom transform (an ``ImageOnlyTransform``/``DualTransform`` subclass in the
user's code) is serialised under its full class name, ``package.module.Class``; albumentations
only finds it if that module was imported first, so :func:`import_custom_transforms` imports it
from the code dataset (which is on ``PYTHONPATH`` in every step).

The normalisation comes from the card (recorded at build time from timm's pretrained config):
kkb appends ``Normalize(mean, std)`` unless the user's pipeline has its own.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .card import ImageBuilt

# cv2's interpolation flags (stable ints, so cv2 need not be imported to name them).
INTERPOLATIONS = {"nearest": 0, "bilinear": 1, "bicubic": 2, "area": 3, "lanczos": 4, "random": 1}
NORMALIZE = "Normalize"


class TransformsError(RuntimeError):
    """A serialised pipeline cannot be rebuilt (unknown or unimportable transform, bad arguments)."""


def albumentations() -> Any:
    """``import albumentations``, without its import-time PyPI version check (it would hang offline)."""
    os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
    import albumentations as A

    return A


def read_pipeline_file(path: Path) -> dict[str, Any]:
    """A file written with ``A.save(pipeline, path)`` or ``json.dump(A.to_dict(pipeline), f)``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TransformsError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("transform"), dict):
        raise TransformsError(f"{path}: not an albumentations pipeline (expected the output of A.to_dict: a 'transform' key)")
    return data


def walk(serialized: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every transform in a serialised pipeline, depth first (Compose, OneOf, ... and their children)."""
    stack = [serialized["transform"] if "transform" in serialized else serialized]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed([child for child in node.get("transforms", []) if isinstance(child, Mapping)]))


def custom_classes(serialized: Mapping[str, Any]) -> list[str]:
    """Full names of the transforms that do not come from albumentations itself."""
    names = [str(node.get("__class_fullname__", "")) for node in walk(serialized)]
    return sorted({name for name in names if "." in name and not name.startswith("albumentations.")})


def import_custom_transforms(serialized: Mapping[str, Any]) -> list[str]:
    """Import the module of each custom transform, so ``A.from_dict`` finds the class; returns the modules."""
    albumentations()
    from albumentations.core.serialization import SERIALIZABLE_REGISTRY

    modules = []
    for fullname in custom_classes(serialized):
        module, _, name = fullname.rpartition(".")
        if module == "__main__":
            raise TransformsError(
                f"custom transform {name} was defined in a script (__main__) when the pipeline was saved: "
                "define it in a module of your code bundle, import it from there, and save the pipeline again"
            )
        try:
            # Always import (a no-op when cached): a stale registry entry from another kernel's module of
            # the same name must not win over the module on this sys.path.
            importlib.import_module(module)
        except ImportError as exc:
            raise TransformsError(f"custom transform {fullname}: cannot import module '{module}' ({exc})") from None
        if fullname not in SERIALIZABLE_REGISTRY:
            raise TransformsError(f"custom transform {fullname}: module '{module}' has no albumentations transform named {name}")
        modules.append(module)
    return modules


def pipeline_from_dict(serialized: Mapping[str, Any]) -> Any:
    """``A.from_dict``, after importing the custom transforms it names."""
    A = albumentations()
    import_custom_transforms(serialized)
    try:
        return A.from_dict(dict(serialized))
    except (KeyError, TypeError, ValueError) as exc:
        raise TransformsError(f"the pipeline does not deserialise with albumentations {A.__version__}: {exc}") from None


def normalize_params(serialized: Mapping[str, Any]) -> dict[str, Any] | None:
    """The user's own ``Normalize`` (its mean/std), if the pipeline has one."""
    for node in walk(serialized):
        if str(node.get("__class_fullname__", "")).rpartition(".")[2] == NORMALIZE:
            return dict(node)
    return None


def default_transforms(input_size: Sequence[int], interpolation: str) -> list[Any]:
    """Without a user pipeline: resize to the card's input size with the card's interpolation."""
    A = albumentations()
    height, width = input_size
    return [A.Resize(height=int(height), width=int(width), interpolation=INTERPOLATIONS.get(interpolation, 1), p=1.0)]


TO_TENSOR = ("ToTensorV2", "ToTensor")


def pipeline_from_factory(reference: str) -> Any:
    """``transforms = "package.module:function"``: the function of the code dataset, called with no argument."""
    module, _, name = reference.partition(":")
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise TransformsError(f"transforms '{reference}': cannot import {name} from '{module}' ({exc})") from None
    pipeline = function()
    if not callable(pipeline) or not hasattr(pipeline, "transforms"):
        raise TransformsError(f"transforms '{reference}' returned {type(pipeline).__name__}, not an albumentations "
                              "pipeline (A.Compose)")
    return pipeline


def class_names(pipeline: Any) -> list[str]:
    """Every transform's class name in a pipeline object, depth first (Compose, OneOf, ... and their children)."""
    names, stack = [], [pipeline]
    while stack:
        node = stack.pop()
        names.append(type(node).__name__)
        stack.extend(reversed(list(getattr(node, "transforms", None) or [])))
    return names


def user_pipeline(serialized: Mapping[str, Any] | None, factory: str | None) -> Any | None:
    """A card's own pipeline: from its factory (evaluated here), else its serialised JSON, else None."""
    if factory:
        return pipeline_from_factory(factory)
    return pipeline_from_dict(serialized) if serialized else None


def inference_pipeline(own: Any | None, input_size: Sequence[int], interpolation: str, mean: Sequence[float],
                       std: Sequence[float]) -> Any:
    """The card's pipeline (``own``; None: kkb's resize), then its normalisation unless the pipeline normalises itself."""
    A = albumentations()
    steps = [own] if own is not None else default_transforms(input_size, interpolation)
    normalises = own is not None and NORMALIZE in class_names(own)
    if not normalises:
        if own is not None and set(TO_TENSOR) & set(class_names(own)):
            raise TransformsError("the pipeline converts to a tensor (ToTensorV2) without normalising first, and kkb "
                                  "cannot normalise after it: add A.Normalize(mean, std) before ToTensorV2, or remove "
                                  "ToTensorV2 and let kkb normalise with the card's mean/std")
        steps.append(A.Normalize(mean=tuple(mean), std=tuple(std), max_pixel_value=255.0, p=1.0))
    return A.Compose(steps)


def card_pipeline(built: ImageBuilt) -> Any:
    """A built image card's whole pipeline, as the kernel runs it on each image."""
    return inference_pipeline(user_pipeline(built.transforms, built.transforms_factory), built.input_size,
                              built.interpolation, built.mean, built.std)


__all__ = [
    "INTERPOLATIONS",
    "TransformsError",
    "albumentations",
    "card_pipeline",
    "custom_classes",
    "import_custom_transforms",
    "inference_pipeline",
    "normalize_params",
    "pipeline_from_dict",
    "pipeline_from_factory",
    "user_pipeline",
    "read_pipeline_file",
]
