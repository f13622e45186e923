"""Defaults that keep the notebook's numbers: a text card runs float32 unless ``amp = true`` (a notebook's plain
``model(**batch)``), the settings an encode function replaces are shown as unused, and a rounding warning names the
metric file's own rounding as the cause where the file rounds its inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builder.bundle.cards.settings import resolved_settings
from builder.kkb_runtime.metrics import PartScores
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.spec import parse_spec
from builder.rehearse.rounding_score import RoundingEffect, metric_roundings, with_metric_rounding
from tests.support.cards import built_card, kernel_card

TEXT = {"name": "q", "kind": "text", "model_dir": "weights/bert", "checkpoint": "weights/q.pth", "num_classes": 2,
        "text_columns": ["title"]}


def test_a_text_card_without_amp_runs_float32_logits_on_cuda() -> None:
    from builder.kkb_runtime.cards import text
    from builder.kkb_runtime.cards.common.device import DeviceChoice

    cuda = DeviceChoice("cuda", "the run's GPU")
    card = kernel_card(TEXT)
    assert isinstance(card, text.TextCard) and card.amp is False
    assert text.autocast_dtype(card, cuda) is None  # the float32 path, as the notebook's forward
    assert text.autocast_dtype(kernel_card({**TEXT, "amp": True}), cuda) == "float16"  # type: ignore[arg-type]
    assert text.autocast_dtype(kernel_card({**TEXT, "amp": True}), DeviceChoice("cpu", "cpu")) is None  # type: ignore[arg-type]
    image = {"name": "i", "arch": "resnet18", "checkpoint": "weights/i.pth", "num_classes": 2}
    assert kernel_card(image).amp is True  # type: ignore[attr-defined]  # an image card keeps its own default


def test_a_text_cards_forward_keeps_float32_on_cuda_settings() -> None:
    torch = pytest.importorskip("torch")
    from builder.kkb_runtime.cards import text
    from builder.kkb_runtime.cards.common.device import DeviceChoice

    seen: list[Any] = []

    class Logits(torch.nn.Module):  # type: ignore[name-defined]
        def forward(self, input_ids: Any, attention_mask: Any = None) -> Any:
            seen.append(torch.is_autocast_enabled("cuda") if hasattr(torch, "is_autocast_enabled") else False)
            return torch.tensor([[0.25, 0.75]], dtype=torch.float32)

    card = kernel_card(TEXT)
    assert isinstance(card, text.TextCard)
    forward = text.make_forward(Logits(), card, DeviceChoice("cuda", "the run's GPU"), torch.device("cpu"))
    out = forward({"input_ids": torch.zeros((1, 2), dtype=torch.long)})
    assert out.dtype == torch.float32 and seen == [False]


def test_settings_an_encode_function_replaces_are_shown_as_unused(capsys: pytest.CaptureFixture[str]) -> None:
    from builder.cli.views import _show_card_settings

    keys = {**TEXT, "encode_function": "quest.port:encode"}
    del keys["text_columns"]
    loaded = parse_spec({"kernel": {"title": "unused keys"}, "competition": {"slug": "kkb-unused"}, "models": [keys]})
    (card,) = loaded.models
    assert card.kind == CardKind.TEXT
    shown = resolved_settings([built_card(keys, _text_built())], loaded.models)
    unused = {setting.key for setting in shown if setting.unused}
    assert unused == {"text_columns", "text_pair_columns", "separator", "truncation", "head_tokens", "column_max_len",
                      "max_len"}
    _show_card_settings(shown)
    printed = capsys.readouterr().out
    assert "unused (encode_function quest.port:encode does the tokenization): " in printed
    assert "separator =" not in printed and "truncation =" not in printed


def _text_built() -> Any:
    from builder.kkb_runtime.cards.text import TextBuilt
    from tests.support.cards import fold

    return TextBuilt(checkpoint="q.safetensors", checkpoints=(fold("q.safetensors"),), built_with={}, checkpoint_key=None,
                     checkpoint_sha256="0" * 64, checkpoint_source="weights/q.pth", source_key=None, dtype="float32",
                     num_params=1, tokenizer_class="BertTokenizerFast")


METRIC = '''import numpy as np


def score(solution, submission, row_id_column_name):
    predicted = submission["p"].round(6)
    truth = np.round(solution["p"], 6)
    return float(((predicted - truth) ** 2).mean())
'''


def test_a_metric_file_that_rounds_its_inputs_is_named_as_the_cause(tmp_path: Path) -> None:
    metric = tmp_path / "metric.py"
    metric.write_text(METRIC)
    assert metric_roundings(metric) == ["metric.py:5: submission['p'].round(6)", "metric.py:6: np.round(solution['p'], 6)"]
    effect = RoundingEffect(PartScores(0.1, 0.1, False), PartScores(0.2, 0.2, False), (("p", 8, "decimals"),))
    warning = effect.warning("RMSE")
    assert warning is not None and "set [submission] decimals = 8" in warning
    (named,) = with_metric_rounding([warning], metric)
    assert named.startswith(warning) and named.endswith(
        "; the metric file rounds numbers itself (metric.py:5: submission['p'].round(6); metric.py:6: "
        "np.round(solution['p'], 6)): the score sees its rounding, so more [submission] decimals cannot keep what it cuts")
    plain = tmp_path / "plain.py"
    plain.write_text("def score(solution, submission, row_id_column_name):\n    return 0.0\n")
    assert with_metric_rounding([warning], plain) == [warning]
