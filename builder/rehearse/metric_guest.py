"""The competition's metric file scored inside its own sandbox: ``python -m builder.rehearse.metric_guest REQUEST ANSWER``.

Started by :mod:`builder.rehearse.metric_sandbox` (:func:`builder.run.program.call_program`). The request names the
metric file and its function, and the files it scores (``submission``, ``answers``, optionally ``public_ids`` and
``unrounded``, the run's predictions before rounding), the id column, the targets, the keyword arguments and the run's
rounding records. The answer is :func:`builder.rehearse.metric_report.file_scores`': ``{"expected", "failures",
"warnings"}``. Each call of the metric is recorded (:func:`builder.run.calls.calling`), so kkb names the one that does
not return. Whatever the metric does to end the program on its own (``sys.exit``, ``KeyboardInterrupt``), the answer
says it; what it prints goes to the program's stderr, never into the answer.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from builder.kkb_runtime.metric_file import MetricFile
from builder.project.public_ids import read_public_ids
from builder.rehearse.metric_report import file_scores
from builder.run.calls import calling
from builder.run.program import read_request, write_answer


def score(request: dict[str, Any]) -> dict[str, Any]:
    """The request's scores, failures and warnings (see the module)."""
    import pandas as pd
    file, files = Path(request["file"]), {key: Path(value) for key, value in request["files"].items()}
    id_column, targets = str(request["id_column"]), [str(target) for target in request["targets"]]
    reference = MetricFile(file.name, str(request["function"]))
    submission = files["submission"]
    frame = (pd.read_parquet(submission) if submission.suffix == ".parquet"
             else pd.read_csv(submission, dtype={id_column: str}))
    if id_column in frame.columns:
        frame[id_column] = frame[id_column].astype(str)
    truth = pd.read_csv(files["answers"], dtype={id_column: str})
    ids = read_public_ids(files["public_ids"], id_column) if "public_ids" in files else None

    @contextmanager
    def call(what: str) -> Iterator[None]:
        scoring = f"{file.name}:{reference.function}"
        with calling(what, function=scoring if what.startswith("scoring") else file.name, file=file.name):
            yield

    return file_scores(reference, file.parent, frame, truth, id_column, targets, dict(request.get("arguments") or {}),
                       ids, files.get("unrounded"), tuple(request.get("rounding") or ()), str(request.get("label") or ""),
                       call)


def answer_of(request: dict[str, Any]) -> dict[str, Any]:
    """:func:`score`'s answer; the metric ending the program its own way is the metric's failure, said."""
    try:
        return score(request)
    except SystemExit as exc:
        said = f"the metric file {Path(request['file']).name} called sys.exit({exc.code!r}) while scoring"
    except BaseException as exc:  # KeyboardInterrupt, GeneratorExit, ... raised by the metric: never kkb's crash
        said = f"the metric file {Path(request['file']).name} raised {type(exc).__name__} while scoring" + (
            f": {exc}" if str(exc) else "")
    said += ": the competition's metric, not the submission"
    return {"expected": {"error": said, "metric_failed": True}, "failures": [], "warnings": [said]}


def main(argv: list[str]) -> int:
    os.dup2(2, 1)  # the metric's prints go with its stderr: nothing it prints can pass for kkb's output
    request = read_request(Path(argv[0]))
    write_answer(Path(argv[1]), answer_of(request))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
