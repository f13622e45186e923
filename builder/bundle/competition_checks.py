"""Build-time checks of ``[competition]``'s metric and public ids: refused before anything is staged or run.

* ``metric`` naming a metric file: the file exists and defines its function, and every ``metric_args`` key is
  one of the function's keyword arguments (read from the source with ``ast``: the build runs no metric code);
  ``metric_args`` with a metric kkb computes itself is refused (nothing would read them);
* ``public_ids``: the file exists, holds one id column, and every id in it is an id of the public test (the public
  sample submission's): the competition's public ids are checked against the public test only, never against a
  hidden stand-in kkb found (a port's synthetic ``hidden/`` cannot refute them; the dry run notes one that lacks them).
"""

from __future__ import annotations

from pathlib import Path

from builder.errors import SpecError
from builder.kkb_runtime.metric_file import metric_file_reference, signature_of
from builder.kkb_runtime.metrics import parse_metric
from builder.kkb_runtime.submission import read_sample
from builder.project.metric_setting import resolve_metric
from builder.project.public_ids import check_public_ids
from builder.project.spec import SPEC_FILE, KernelSpec


def with_competition_metric(spec: KernelSpec, kernel_dir: Path) -> KernelSpec:
    """``spec`` with the metric the competition folder's ``competition.toml`` names, where ``kernel.toml`` names
    none and that one is a metric kkb knows (the notebook's checks and rounding follow it). A metric file there
    stays the competition folder's: the dry run and the local Kaggle read it from there."""
    if spec.competition.metric:
        return spec
    found = resolve_metric(None, {}, kernel_dir, spec.competition.data_dir(kernel_dir))
    if found.text is None or not parse_metric(found.text).known:
        return spec
    return spec.model_copy(update={"competition": spec.competition.model_copy(update={"metric": found.text})})


def check_competition(spec: KernelSpec, kernel_dir: Path) -> None:
    where = f"{kernel_dir / SPEC_FILE}: competition"
    _check_metric_file(spec, kernel_dir, where)
    if spec.competition.public_ids:
        _check_public_ids(spec, kernel_dir, f"{where}.public_ids")


def _check_metric_file(spec: KernelSpec, kernel_dir: Path, where: str) -> None:
    metric, arguments = spec.competition.metric, spec.competition.metric_args
    reference = metric_file_reference(metric)
    if reference is None:
        if arguments:
            raise SpecError(f"{where}.metric_args: set, but the metric '{metric}' is kkb's own and takes no arguments",
                            hint="metric_args are the keyword arguments of the competition's metric file (metric = \"metric.py\")")
        return
    file = kernel_dir / reference.path
    if not file.is_file():
        raise SpecError(f"{where}.metric: the metric file {file} does not exist",
                        hint="the path is relative to the kernel folder; download the competition's metric notebook as a .py file")
    try:
        found = signature_of(file, reference.function)
    except SyntaxError as exc:
        raise SpecError(f"{where}.metric: {file} is not valid Python (line {exc.lineno}: {exc.msg})") from None
    if found is None:
        raise SpecError(f"{where}.metric: {file.name} defines no function {reference.function}()",
                        hint="Kaggle's metric files define score(solution, submission, row_id_column_name, ...); "
                             "name another as \"metric.py:function\"")
    names, takes_any = found
    unknown = [key for key in arguments if key not in names]
    if unknown and not takes_any:
        raise SpecError(f"{where}.metric_args: {reference.function}() in {file.name} takes no argument "
                        f"{', '.join(repr(k) for k in unknown)}",
                        hint=f"its keyword arguments: {', '.join(names) or 'none'}")


def _check_public_ids(spec: KernelSpec, kernel_dir: Path, where: str) -> None:
    id_column = spec.submission.id_column
    sample = spec.competition.public_sample(kernel_dir)
    test_ids = None
    if sample is not None and sample.is_file():
        frame = read_sample(sample, id_column)
        test_ids = set(frame[id_column].astype(str)) if id_column in frame.columns else None
    check_public_ids(kernel_dir / str(spec.competition.public_ids), where, id_column, test_ids,
                     f"the public test ({sample})", whole=False)  # the public test may be the public part, whole


__all__ = ["check_competition", "with_competition_metric"]
