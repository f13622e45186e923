"""The build → kernel seam of a card: every key resolved at build, read in the kernel into one typed object per kind
with no default of its own, and what ``kkb build`` shows is what runs."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from builder.bundle.cards.settings import resolved_settings, with_origins
from builder.kkb_runtime.cards.common import card as runtime_card
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards import CARD_MODELS
from builder.project.spec import parse_spec
from tests.support.cards import resolved_card

RUNTIME_CARDS = Path(runtime_card.__file__).resolve().parents[1]
TEXT = {"name": "q", "kind": "text", "model_dir": "weights/bert", "checkpoint": "weights/q.pth", "num_classes": 2,
        "text_columns": ["title"]}


@pytest.mark.parametrize("kind", list(CardKind))
def test_the_kernels_card_has_no_default_for_any_key(kind: CardKind) -> None:
    defaulted = [field.name for field in dataclasses.fields(runtime_card.CARD_TYPES[kind])
                 if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING]
    assert not defaulted, f"kkb_runtime's {kind} card has defaults for {', '.join(defaulted)}: the build resolves them"


@pytest.mark.parametrize("kind", list(CardKind))
def test_the_kernel_reads_every_key_the_spec_takes_and_no_other(kind: CardKind) -> None:
    assert runtime_card.keys_of(kind) == sorted(CARD_MODELS[kind].model_fields)


def _card_keys() -> set[str]:
    return {key for model in CARD_MODELS.values() for key in model.model_fields}


def test_no_runner_reads_a_card_key_with_a_default_of_its_own() -> None:
    keys, found = _card_keys(), []
    for path in sorted(RUNTIME_CARDS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and node.args[0].value in keys
                    and "card" in ast.unparse(node.func.value)):
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert not found, "the kernel defaults card keys: " + "; ".join(found)


def test_a_card_the_build_did_not_resolve_is_refused_naming_the_key() -> None:
    written = resolved_card(TEXT)
    del written["max_len"]
    with pytest.raises(runtime_card.CardMalformed, match="card 'q' in kkb_kernel.json lacks max_len: it was built by "
                                                         "another kkb"):
        runtime_card.read_card(written)
    typed = runtime_card.read_card(resolved_card(TEXT, checkpoints=[{"file": "q.safetensors"}]))
    assert isinstance(typed, runtime_card.TextCard)
    assert (typed.max_len, typed.built["checkpoints"]) == (512, [{"file": "q.safetensors"}])


def test_a_text_cards_activation_is_the_one_the_build_shows_and_the_kernel_runs() -> None:
    torch = pytest.importorskip("torch")
    from builder.kkb_runtime.cards import text
    from builder.kkb_runtime.cards.common.device import DeviceChoice

    loaded = parse_spec({"kernel": {"title": "seam tests"}, "competition": {"slug": "kkb-seam"}, "models": [TEXT]})
    written = with_origins([resolved_card(TEXT)], loaded.models)[0]
    (shown,) = [setting for setting in resolved_settings([written], loaded.models) if setting.key == "activation"]
    assert (shown.value, shown.origin, runtime_card.read_card(written).origins["activation"]) == (
        '"softmax"', "default", "default")

    class Logits(torch.nn.Module):
        def forward(self, input_ids: Any, attention_mask: Any = None, token_type_ids: Any = None) -> Any:
            return torch.tensor([[1.0, 3.0]])

    forward = text.make_forward(Logits(), written, DeviceChoice("cpu", "test"), torch.device("cpu"))
    ran = forward({"input_ids": torch.zeros((1, 2), dtype=torch.long)})
    torch.testing.assert_close(ran, torch.softmax(torch.tensor([[1.0, 3.0]]), dim=1))


def test_the_build_shows_what_the_user_did_not_set_and_where_it_came_from() -> None:
    cards = [{**TEXT, "name": "a"}, {"name": "b", "base": "a", "checkpoint": "weights/b.pth", "batch_size": 4}]
    loaded = parse_spec({"kernel": {"title": "seam tests"}, "competition": {"slug": "kkb-seam"}, "models": cards,
                         "model_defaults": {"max_len": 64}})
    written = [resolved_card({key: value for key, value in card.model_dump().items()}) for card in loaded.models]
    shown = {(setting.card, setting.key): (setting.value, setting.origin)
             for setting in resolved_settings(written, loaded.models)}
    assert shown[("a", "max_len")] == ("64", "[model_defaults]")
    assert shown[("b", "max_len")] == ("64", "[model_defaults]")
    assert shown[("b", "model_dir")] == ('"weights/bert"', "base 'a'")
    assert shown[("a", "activation")] == ('"softmax"', "default")
    assert ("b", "batch_size") not in shown and ("a", "name") not in shown  # set on the card: not repeated


def test_postprocess_stages_are_written_resolved_and_the_kernel_defaults_none() -> None:
    from builder.kkb_runtime import postprocess, rounding

    loaded = parse_spec({"kernel": {"title": "seam tests"}, "competition": {"slug": "kkb-seam"},
                         "steps": [{"name": "a", "run": "python a.py"}],
                         "postprocess": [{"kind": "argmax"}, {"kind": "threshold", "columns": ["p"]}]})
    assert [stage.resolved() for stage in loaded.postprocess] == [
        {"kind": "argmax", "round": True, "columns": [], "into": "label", "labels": None},
        {"kind": "threshold", "round": True, "columns": ["p"], "value": 0.5}]
    found = []
    for module in (postprocess, rounding):
        source = Path(str(module.__file__)).read_text()
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and len(node.args) == 2 and "stage" in ast.unparse(node.func.value)):
                found.append(ast.unparse(node))
            if isinstance(node, ast.BoolOp) and "stage" in ast.unparse(node) and "'label'" in ast.unparse(node):
                found.append(ast.unparse(node))
    assert not found, "the kernel defaults postprocess keys: " + "; ".join(found)


def test_kkb_build_prints_the_resolved_settings_grouped_by_card() -> None:
    from builder.bundle.cards.settings import ResolvedSetting
    from builder.cli.views import _show_card_settings, console

    settings = (ResolvedSetting("q", "activation", '"softmax"', "default"),
                ResolvedSetting("q", "max_len", "64", "[model_defaults]"),
                ResolvedSetting("q", "head_tokens", "null", "default"),
                ResolvedSetting("g", "method", '"auto"', "default"))
    with console.capture() as captured:
        _show_card_settings(settings)
    assert captured.get().splitlines() == [
        "  card     models.q: not set on the card, the kernel uses",
        '             activation = "softmax"  (default)',
        "             max_len    = 64  ([model_defaults])",
        "             unset: head_tokens",
        "  card     models.g: not set on the card, the kernel uses",
        '             method = "auto"  (default)',
    ]
