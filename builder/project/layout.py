"""The build folder, ``build/NAME/``: the one place that knows its entries' names.

```
build/NAME/
  code/            the code dataset            weights/        the weights dataset
  kernel/          kernel-metadata.json + the notebook
  dryrun/          the dry run's notebooks, logs and report.json
  rehearsal/       kkb dry-run --on-kaggle: the rehearsal kernel (kernel/) and its settings dataset (settings/)
  dryrun-kaggle/   ...and what that rehearsal left on Kaggle: report.json, the log, the submission
  wheels/          the wheelhouse dataset      wheels-kernel/  the helper kernel (--on-kaggle)
  .kkb-*.json      caches (hashes by size and mtime, prepared models)
```
"""

from __future__ import annotations

from pathlib import Path

BUILD_ROOT = Path("build")
CODE_DIR = "code"
WEIGHTS_DIR = "weights"
KERNEL_DIR = "kernel"
DRYRUN_DIR = "dryrun"
WHEELS_DIR = "wheels"               # the wheelhouse dataset
HELPER_DIR = "wheels-kernel"        # the helper kernel that builds the wheelhouse on Kaggle (--on-kaggle)
REHEARSAL_DIR = "rehearsal"         # kkb dry-run --on-kaggle: the rehearsal kernel and its settings dataset
ON_KAGGLE_DIR = "dryrun-kaggle"     # the rehearsal's output, downloaded from Kaggle
HASH_CACHE = ".kkb-hashes.json"
SCAN_RECORD = ".kkb-clean-scans.json"  # content found free of keys, for the secrets and patterns of its digest
MODELS_RECORD = ".kkb-models.json"  # what the last build's prepare_models returned, and for what inputs
PREFLIGHT_RECORD = ".kkb-preflight.json"  # what the last build's public-data checks passed with, and for what inputs
WHEEL_HASH_CACHE = ".kkb-wheel-hashes.json"

# Files inside the datasets and the kernel folder.
MANIFEST_FILE = "manifest.json"
DATASET_METADATA = "dataset-metadata.json"
KERNEL_METADATA = "kernel-metadata.json"
KERNEL_CONFIG = "kkb_kernel.json"    # in the code dataset: what the runtime needs inside the kernel
REPORT_FILE = "report.json"          # in dryrun/

# `kkb build` replaces build/NAME whole but keeps these: the wheelhouse is built by `kkb wheels` alone, the
# dry run's report is what `kkb dry-run` said (a push rebuilds; it must not delete it), and a rehearsal on
# Kaggle's output is what hours of GPU left behind.
CARRIED = (WHEELS_DIR, HELPER_DIR, WHEEL_HASH_CACHE, DRYRUN_DIR, ON_KAGGLE_DIR)
# Everything kkb writes there: a folder holding anything else is the user's, and never replaced.
BUILD_ENTRIES = frozenset({CODE_DIR, WEIGHTS_DIR, KERNEL_DIR, DRYRUN_DIR, REHEARSAL_DIR, HASH_CACHE, SCAN_RECORD, MODELS_RECORD,
                           PREFLIGHT_RECORD, *CARRIED})


def default_out_dir(kernel_dir: Path) -> Path:
    """``build/<kernel folder name>`` in the folder the command was started in, where every command looks by default
    (absolute: nothing below the command's door depends on the folder it works in)."""
    return Path.cwd() / BUILD_ROOT / Path(kernel_dir).resolve().name


def out_dir_of(kernel_dir: Path, out_dir: Path | None) -> Path:
    return Path(out_dir) if out_dir else default_out_dir(kernel_dir)
