"""The views of the cards no step ran, made inside a sandbox: ``python -m builder.rehearse.inputs_guest REQUEST ANSWER``.

Started by :mod:`builder.rehearse.card_inputs` (:func:`builder.run.program.call_program`) over the built code and
weights and the public test, mounted where the kernel sees them. A view runs the user's code (a feature function, an
encode function, a pickled preprocessor, a factory): here, never in kkb's process. The request names the code,
weights and data folders as the program sees them, the rows and the cards; the answer is ``{"views": {card: view}}``
(:func:`builder.kkb_runtime.cards.views.card_view`: ``{"rows": [...]}`` or ``{"error": "..."}``). Each card's view is
one recorded call (:func:`builder.run.calls.calling`): kkb names the one that does not return.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from builder.bundle.models import offline_environment, user_code_importable
from builder.kkb_runtime.cards.views import card_view
from builder.kkb_runtime.config_reader import load_config
from builder.run.calls import calling
from builder.run.program import read_request, write_answer


def views(request: dict[str, Any]) -> dict[str, Any]:
    code, weights, data = (Path(request[key]) for key in ("code", "weights", "data"))
    config = load_config(code)
    wanted, made = set(request["cards"]), {}
    with user_code_importable(code), offline_environment():
        for card in config.models:
            name = card.name
            if name in wanted:
                with calling("the view of its inputs", card=name):
                    made[name] = card_view(config, card, weights, data, int(request["rows"]))
    return {"views": made}


def main(argv: list[str]) -> int:
    os.dup2(2, 1)  # what the user's code prints stays with its stderr
    write_answer(Path(argv[1]), views(read_request(Path(argv[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
