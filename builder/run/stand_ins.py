"""The dry run's stand-ins for ``[[inputs]]``: local folders mounted where Kaggle mounts the real inputs.

An input kkb does not build (someone's dataset, a Kaggle Model version, a notebook's output) cannot be
fetched in a dry run: nothing leaves the machine. Each ``[[inputs]]`` therefore names a local folder
(``path``) holding a copy, and the sandbox mounts it at the input's Kaggle path (the current layout
here; ``builder.run.sandbox.mount_path`` maps it to the legacy one). A missing stand-in is
refused before anything runs, naming the input and the key to set.
"""

from __future__ import annotations

from pathlib import Path

from builder.errors import DryRunError
from builder.kkb_runtime.references import StandInConfig
from builder.kkb_runtime.scale import ScaledData
from builder.kkb_runtime.vocabulary import SubmissionKind
from builder.project.spec import SPEC_FILE, KernelSpec
from builder.project.spec_inputs import InputSection
from builder.run.batch_stand_in import replicate_batches
from builder.run.sandbox import Mount, scale_competition_data

MAX_SCALED_ROWS = 20_000_000  # a replicated test larger than this is refused (the projection fits two smaller sizes)


def stand_in_dir(item: InputSection, kernel_dir: Path) -> Path | None:
    """``path`` resolved: ``~`` expanded, a relative path taken from the kernel folder."""
    return item.stand_in(kernel_dir)


def input_mounts(spec: KernelSpec, kernel_dir: Path) -> list[Mount]:
    """One mount per ``[[inputs]]``; refuses an input whose stand-in is not set or not a folder."""
    mounts = []
    for index, item in enumerate(spec.inputs):
        key = f"{Path(kernel_dir) / SPEC_FILE}: inputs[{index}].path"
        folder = stand_in_dir(item, kernel_dir)
        if folder is None:
            raise DryRunError(f"{key}: {item.kind} '{item.ref}' has no local stand-in, so the dry run cannot mount it",
                              hint=f"set inputs[{index}].path to a folder holding a copy of it "
                                   f"(e.g. from kaggle {_download_command(item)})")
        if not folder.is_dir():
            raise DryRunError(f"{key}: the stand-in {folder} for {item.kind} '{item.ref}' is not a folder",
                              hint=f"create it with a copy of the input (e.g. kaggle {_download_command(item)}), "
                                   f"or fix inputs[{index}].path")
        mounts.append(Mount(folder, item.mount_target))
    return mounts


def _download_command(item: InputSection) -> str:
    if item.kind == "model":
        return f"models instances versions download {item.ref} --untar"
    if item.kind == "notebook":
        return f"kernels output {item.ref}"
    return f"datasets download {item.ref} --unzip"


def _check_size(spec: KernelSpec, source: Path, factor: int) -> None:
    """A replicated test past :data:`MAX_SCALED_ROWS` rows is refused before anything is read or written: it would fill
    the memory (or the disk) long before it helps a projection, which needs the hidden test's size at most."""
    sample = source / spec.competition.sample_submission
    try:
        with sample.open("rb") as handle:
            rows = max(sum(1 for _ in handle) - 1, 1)
    except OSError:
        return  # the scaling names a missing sample itself
    if rows * factor <= MAX_SCALED_ROWS:
        return
    hidden = spec.competition.hidden_rows
    enough = f"--rerun-scale {max(1, -(-hidden // rows))} reaches [competition] hidden_rows ({hidden})" if hidden else (
        "a factor that reaches the hidden test's rows is enough")
    raise DryRunError(f"--rerun-scale {factor}: {rows} test rows x {factor} = {rows * factor} rows, more than kkb "
                      f"replicates ({MAX_SCALED_ROWS})", hint=enough)


def replicated_test(spec: KernelSpec, source: Path, dest: Path, factor: int, kernel_dir: Path | None = None) -> ScaledData:
    """The public test replicated ``factor`` times with the data its rows reference (``--rerun-scale``, the
    projection's second size), as ``[competition]`` and ``[competition.stand_in]`` describe it; an evaluation-API
    test along the gateway's batches (:mod:`builder.run.batch_stand_in`)."""
    _check_size(spec, source, factor)
    if spec.submission.kind is SubmissionKind.EVALUATION_API:
        return replicate_batches(spec, source, dest, factor, kernel_dir)
    stated = spec.competition.stand_in
    return scale_competition_data(source, dest, factor, id_column=spec.submission.id_column,
                                  sample_submission=spec.competition.sample_submission, test=spec.competition.test,
                                  stand_in=StandInConfig(keys=tuple(stated.keys), tables=tuple(stated.tables),
                                                         files=tuple(stated.files), id=stated.id))
