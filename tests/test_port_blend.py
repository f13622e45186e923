"""A blend of cards without ``[[steps]]``: each card's ``weight`` weighs the step kkb adds for it, ``combine`` sums
weight × prediction as a notebook's blend line does, and every ambiguity (a written step that runs a weighted card, a
step without a weight, a combine that ignores weights) is refused by name. The end-to-end ``--reference`` test of
``0.2 × gbdt + 0.4 × torch`` lives with the tabular port (``tests/test_port_tabular.py``)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from builder.bundle.cards.settings import blend_note
from builder.errors import SpecError
from builder.kkb_runtime.submission import combine_groups
from builder.project.spec import parse_spec

BASE = {"kernel": {"title": "blend tests"}, "competition": {"slug": "kkb-blend"}}
CARDS = [{"name": "lgbm", "kind": "gbdt", "library": "lightgbm", "checkpoint": "g.txt", "num_classes": 1, "weight": 0.2},
         {"name": "net", "kind": "gbdt", "library": "lightgbm", "checkpoint": "n.txt", "num_classes": 1, "weight": 0.4}]


def test_card_weights_blend_the_cards_as_written() -> None:
    spec = parse_spec({**BASE, "models": CARDS})
    assert [(step.name, step.weight) for step in spec.steps] == [("lgbm", 0.2), ("net", 0.4)]
    assert spec.submission.combine == "weighted_sum"
    assert blend_note(spec) == ("blend: submission = 0.2 × lgbm + 0.4 × net (combine = weighted_sum, from the cards' "
                                "weights)")
    frames = [pd.DataFrame({"id": ["a", "b"], "p": values}) for values in ([1.0, 2.0], [10.0, 20.0])]
    combined = combine_groups([(name, frame, ["p"]) for name, frame in zip(("lgbm", "net"), frames, strict=True)], "id",
                              ["p"], spec.submission.combine, [step.weight for step in spec.steps])
    assert combined["p"].tolist() == pytest.approx([0.2 * 1 + 0.4 * 10, 0.2 * 2 + 0.4 * 20])
    mean = parse_spec({**BASE, "models": CARDS, "submission": {"combine": "weighted_mean"}})
    assert blend_note(mean) == ("blend: submission = (0.2 × lgbm + 0.4 × net) / 0.6 (combine = weighted_mean, from the "
                                "cards' weights)")
    assert blend_note(parse_spec({**BASE, "models": [{**card, "weight": None} for card in CARDS]})) is None


@pytest.mark.parametrize(("extra", "message"), [
    pytest.param({"submission": {"combine": "mean"}}, "[submission] combine = 'mean' ignores weights, and the cards have "
                 "them (models.lgbm.weight = 0.2, models.net.weight = 0.4)", id="combine-ignores-weights"),
    pytest.param({"steps": [{"name": "g", "run": "python -m kkb_runtime predict --model lgbm --out {out}"}]},
                 "[[steps]] 'g' runs models.lgbm, which has weight = 0.2: a card's weight weighs the step kkb adds for "
                 "it, and this step has its own", id="two-weights"),
    pytest.param({"steps": [{"name": "rules", "run": "python rules.py"}]},
                 "a blend of cards (models.lgbm.weight = 0.2, models.net.weight = 0.4) weighs every step, and step(s) "
                 "rules have no weight", id="step-without-weight"),
])
def test_an_ambiguous_blend_is_refused_by_name(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec({**BASE, "models": CARDS, **extra})
    assert message in caught.value.message


def test_a_written_step_with_its_own_weight_joins_the_blend() -> None:
    spec = parse_spec({**BASE, "models": CARDS, "steps": [{"name": "rules", "run": "python rules.py", "weight": 0.4}]})
    assert [(step.name, step.weight) for step in spec.steps] == [("rules", 0.4), ("lgbm", 0.2), ("net", 0.4)]
