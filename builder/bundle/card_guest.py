"""The build's run of the user's code, inside the sandbox: ``python -m builder.bundle.card_guest REQUEST ANSWER``.

Started by :mod:`builder.bundle.card_run` in the dry run's sandbox, with the kernel's environment and working folder.
It does, for every card of the kernel in one process: the cards' own checks against the public test
(:class:`builder.bundle.preflight.CardCheck`: the feature functions, the first fold's prediction, the images' paths),
then each card's preparation into the weights stage (checkpoints normalised, models and pickles loaded, factories
called), then the cards' notes (:func:`builder.bundle.cards.card_notes`: what kkb maps, the encode functions' unknown
tokens). Each piece of user code runs inside :func:`builder.run.calls.calling`, so kkb names the one that hangs or
crashes. The answer is a JSON file: ``{"cards": [{"name", "built"}, ...] | null, "notes": [...]}`` (``built``: what the
build records for the card, as ``kkb_kernel.json`` holds it), or ``{"error":
{"type", "message", "hint", "user"}}`` for the error the build raises (``user``: made from an exception of the user's
code). Anything else is kkb's own failure: a traceback on stderr and exit 1.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

from builder.bundle.cards import BUILD_CARDS, card_notes, prepare_models
from builder.bundle.user_code import from_user_code
from builder.errors import KkbError
from builder.kkb_runtime.cards.common.models import ModelLoadError
from builder.kkb_runtime.cards.common.tables import TableError
from builder.kkb_runtime.submission import read_sample
from builder.kkb_runtime.typed import write
from builder.project.spec import SPEC_FILE, KernelSpec
from builder.run.calls import calling


def run(request: dict[str, Any]) -> dict[str, Any]:
    """The request's checks, preparations and notes (see the module); raises the build's error."""
    with warnings.catch_warnings():  # old spellings were said once, by the command that read kernel.toml
        warnings.simplefilter("ignore")
        spec = KernelSpec.model_validate(request["spec"])
    kernel_dir = Path(request["kernel_dir"])
    data = Path(request["data"]) if request.get("data") else None
    cards = {card.name: card for card in spec.models}
    if data is not None and request.get("checks"):
        sample = read_sample(data / spec.competition.sample_submission, spec.submission.id_column)
        for check in request["checks"]:
            card = cards[check["card"]]
            with calling("on the public test", card=card.name):
                BUILD_CARDS[card.kind].check_public_data(spec, kernel_dir, data, card, list(check["columns"]), sample)
    prepared = prepare_models(spec, kernel_dir, Path(request["stage"])) if request.get("stage") else None
    notes = card_notes(spec, kernel_dir, data) if request.get("notes") else []
    records = [{"name": card.name, "built": write(card.built)} for card in prepared] if prepared is not None else None
    return {"cards": records, "notes": notes}


def answer_of(request: dict[str, Any]) -> dict[str, Any]:
    """:func:`run`'s answer, or the error it raised as the answer's ``error``."""
    try:
        return run(request)
    except KkbError as exc:
        return {"error": {"type": type(exc).__name__, "message": exc.message, "hint": exc.hint, "user": from_user_code(exc)}}
    except (TableError, ModelLoadError) as exc:  # kkb's words about the data or a model, outside a card's own check
        where = Path(request["kernel_dir"]) / SPEC_FILE
        return {"error": {"type": "BundleError", "message": f"{where}: {exc}", "hint": None, "user": False}}


def main(argv: list[str]) -> int:
    request, answer = Path(argv[0]), Path(argv[1])
    result = answer_of(json.loads(request.read_text(encoding="utf-8")))
    partial = answer.with_name(answer.name + ".partial")
    partial.write_text(json.dumps(result), encoding="utf-8")
    partial.replace(answer)  # whole, or not there: a crash leaves no half answer
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
