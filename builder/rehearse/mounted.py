"""The dry run's half of the mounted-inputs check: the run's ``kkb_mounted.json`` against the build.

On Kaggle the run may mount another version than the one pushed (``builder.remote.mounted`` stops a submission
then); in the sandbox the build's own folders are mounted, so the two agree by construction. The check runs anyway,
the same comparison (``builder.project.mounted``), and the report records it (``mounted``: equal, each input
compared), so a notebook whose record is broken is caught here first.
"""

from __future__ import annotations

from pathlib import Path

from builder.build import BuildResult
from builder.project.mounted import MOUNTED_FILE, Expected, MountedCheck, read_mounted


def mounted_check(working_dir: Path, build: BuildResult) -> MountedCheck:
    """What the run found mounted for the inputs kkb built, against the build (``ok`` None: it recorded nothing)."""
    expected = [Expected("code", build.code_dataset, build.code_hash)]
    weights = build.weights_dataset or build.weights_model
    if weights and build.weights_hash:
        expected.append(Expected("weights", weights, build.weights_hash))
    return MountedCheck.of(read_mounted(Path(working_dir) / MOUNTED_FILE), expected)


def mounted_warnings(check: MountedCheck) -> list[str]:
    """A warning per input the run found other than the build made."""
    return [f"the run did not read what kkb built: {difference}" for difference in check.differences]
