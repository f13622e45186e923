"""Folders as ``kaggle kernels pull OWNER/SLUG -p DIR -m`` writes them, for ``kkb init --from``."""

from __future__ import annotations

import json
from pathlib import Path

# A notebook reading the competition, the owner's weights dataset and someone's package, as Kaggle kernels do.
CELLS = (
    "import pandas as pd\nimport timm\n",
    "model = timm.create_model('resnet18', pretrained=False, num_classes=1)\n"
    "weights = '/kaggle/input/my-inference-weights/model.pth'\n",
    "!pip install --no-index /kaggle/input/timm-pkg/timm.whl\n",
    "sample = pd.read_csv('/kaggle/input/kkb-minimal/sample_submission.csv')\n"
    "sample.to_csv('submission.csv', index=False)\n",
)
METADATA: dict[str, object] = {
    "id": "kkb-demo/my-inference", "title": "My Inference", "code_file": "my-inference.ipynb", "language": "python",
    "kernel_type": "notebook", "is_private": "true", "enable_gpu": "true", "enable_tpu": "false",
    "enable_internet": "false", "dataset_sources": ["kkb-demo/my-inference-weights", "someone/timm-pkg"],
    "competition_sources": ["kkb-minimal"], "kernel_sources": [], "model_sources": [],
}


def notebook_json(cells: tuple[str, ...] = CELLS) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "source": text.splitlines(keepends=True), "metadata": {},
                                  "outputs": [], "execution_count": None} for text in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def pulled_kernel(folder: Path, cells: tuple[str, ...] = CELLS, **metadata: object) -> Path:
    """``folder`` with kernel-metadata.json (``METADATA`` with ``metadata`` over it) and the notebook."""
    folder.mkdir(parents=True, exist_ok=True)
    meta = {**METADATA, **metadata}
    (folder / "kernel-metadata.json").write_text(json.dumps(meta, indent=1))
    (folder / str(meta["code_file"])).write_text(notebook_json(cells))
    return folder
