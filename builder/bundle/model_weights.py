"""``[weights] publish = "model"``: the weights folder as a Kaggle Model variation instead of a dataset.

The folder is the same (files, ``manifest.json`` with the content hash), only the metadata differs:
``model-metadata.json`` (the Model: owner, slug, title) and ``model-instance-metadata.json`` (the
variation: framework, slug, license), which the ``kaggle`` client reads and does not upload. The
weights id is ``owner/model/framework/variation``; the version number is Kaggle's, known only after a
push, which is why ``model_sources`` gets its entry at push time (``model_source``).
"""

from __future__ import annotations

import json
from pathlib import Path

from builder.project.layout import DATASET_METADATA
from builder.project.spec import KernelSpec

MODEL_METADATA = "model-metadata.json"
INSTANCE_METADATA = "model-instance-metadata.json"
# The dry run has no Kaggle version number: its stand-in for the weights mounts as version 1.
DRY_RUN_VERSION = 1


def publishes_model(spec: KernelSpec) -> bool:
    return spec.weights.publish == "model"


def weights_model_id(spec: KernelSpec, owner: str, default_slug: str) -> str:
    """``owner/model/framework/variation``: what the manifest names and ``model_sources`` attaches (plus a version)."""
    model = spec.weights.model or f"{owner}/{default_slug}"
    return f"{model}/{spec.weights.framework}/{spec.weights.variation}"


def model_source(model_id: str, version: int) -> str:
    return f"{model_id}/{version}"


def write_model_metadata(stage: Path, model_id: str, title: str, spec: KernelSpec) -> None:
    """Replace the dataset metadata of a staged weights folder by the Model's and the variation's."""
    owner, slug, framework, variation = model_id.split("/")
    (stage / DATASET_METADATA).unlink(missing_ok=True)
    model = {"ownerSlug": owner, "slug": slug, "title": title, "isPrivate": spec.kernel.private,
             "description": f"Weights of the kernel {spec.kernel.title}, published by kkb."}
    instance = {"ownerSlug": owner, "modelSlug": slug, "instanceSlug": variation, "framework": framework,
                "licenseName": spec.weights.license, "overview": "", "usage": ""}
    (stage / MODEL_METADATA).write_text(json.dumps(model, indent=1, sort_keys=True) + "\n")
    (stage / INSTANCE_METADATA).write_text(json.dumps(instance, indent=1, sort_keys=True) + "\n")
