"""The build → kernel seam of a card: every key resolved at build, read in the kernel into one typed object per kind
with no default of its own, and what ``kkb build`` shows is what runs."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from builder.bundle.cards.settings import resolved_settings
from builder.kkb_runtime import card as runtime_card
from builder.kkb_runtime.cards import RUNTIME_CARDS
from builder.kkb_runtime.cards.text import TextBuilt
from builder.kkb_runtime.config_reader import read_card
from builder.kkb_runtime.typed import LOCAL, ConfigMalformed, write
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards import CARD_MODELS
from builder.project.spec import parse_spec
from tests.support.cards import built_card, fold

RUNTIME = Path(runtime_card.__file__).resolve().parent
TEXT = {"name": "q", "kind": "text", "model_dir": "weights/bert", "checkpoint": "weights/q.pth", "num_classes": 2,
        "text_columns": ["title"]}


def text_built(file: str = "q.safetensors") -> TextBuilt:
    """What the build records for a text card (placeholders where the seam does not look)."""
    return TextBuilt(checkpoint=file, checkpoints=(fold(file),), built_with={"torch": "2.8.0"}, checkpoint_key=None,
                     checkpoint_sha256="0" * 64, checkpoint_source="weights/q.pth", source_key=None, dtype="float32",
                     num_params=10, tokenizer_class="BertTokenizerFast")


@pytest.mark.parametrize("kind", list(CardKind))
def test_the_kernels_card_has_no_default_for_any_key(kind: CardKind) -> None:
    unit = RUNTIME_CARDS[kind]
    defaulted = [f"{part.__name__}.{field.name}" for part in (unit.card, unit.built) for field in dataclasses.fields(part)
                 if (field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING)
                 and not field.metadata.get(LOCAL)]
    assert not defaulted, f"kkb_runtime's {kind} card has defaults for {', '.join(defaulted)}: the build resolves them"


@pytest.mark.parametrize("kind", list(CardKind))
def test_the_kernel_reads_every_key_the_spec_takes_and_no_other(kind: CardKind) -> None:
    unit = RUNTIME_CARDS[kind]
    assert runtime_card.card_keys(unit.card, unit.built) == sorted(CARD_MODELS[kind].model_fields)
    card_fields = {field.name for field in dataclasses.fields(unit.card)}
    records = {field.name for field in dataclasses.fields(unit.built)}
    assert not card_fields & records, "a key is both the card's and its record's"
    assert not (records - set(runtime_card.resolved_keys(unit.built))) & set(CARD_MODELS[kind].model_fields), \
        "a record's field has a key's name but is not marked resolved"


MAPPINGS = ("Mapping[", "dict[", "MutableMapping[", "Any")


def _is_card(name: str) -> bool:
    return name == "card" or name.endswith("_card")


def _named(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def card_mappings(source: str) -> list[str]:
    """Where ``source`` types a card as a mapping (a parameter or an attribute named ``card`` or ``*_card``) or reads
    one by a string key (``card["max_len"]``, ``card.get("max_len")``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            found += [f"{node.lineno}: parameter {arg.arg}: {ast.unparse(arg.annotation)}" for arg in arguments
                      if _is_card(arg.arg) and arg.annotation is not None and ast.unparse(arg.annotation).startswith(MAPPINGS)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, (ast.Name, ast.Attribute)):
            name = _named(node.target)
            if name and _is_card(name) and ast.unparse(node.annotation).startswith(MAPPINGS):
                found.append(f"{node.lineno}: attribute {name}: {ast.unparse(node.annotation)}")
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            name = _named(node.value)
            if name and _is_card(name):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and (name := _named(node.func.value)) and _is_card(name)):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_card_in_the_kernel_runtime_is_a_mapping_read_by_string_keys() -> None:
    found = [f"{path.relative_to(RUNTIME.parent)}:{where}" for path in sorted(RUNTIME.rglob("*.py"))
             for where in card_mappings(path.read_text(encoding="utf-8"))]
    assert not found, "a card of the kernel runtime is typed as a mapping or read by a string key: " + "; ".join(found)


@pytest.mark.parametrize(("source", "found"), [
    ("def run(card: Mapping[str, Any]) -> None: ...", ["1: parameter card: Mapping[str, Any]"]),
    ("def run(spec_card: dict[str, Any]) -> None: ...", ["1: parameter spec_card: dict[str, Any]"]),
    ("class Job:\n    card: Mapping[str, Any]", ["2: attribute card: Mapping[str, Any]"]),
    ("size = int(card['max_len'])", ["1: card['max_len']"]),
    ("size = job.card.get('max_len', 512)", ["1: job.card.get('max_len', 512)"]),
    ("def run(card: TextCard) -> int:\n    return card.max_len", []),
])
def test_the_scan_finds_a_card_read_as_a_mapping(source: str, found: list[str]) -> None:
    assert card_mappings(source) == found


# Where the build may dump a spec model: into the kernel's typed card or config (read by the kernel's own reader), into
# the request and the key of its sandboxed run, and into the key of its public-data checks' record (no kernel helper
# reads those).
DUMPS = {("cards/unit.py", "kernel_card"), ("kernel_config.py", "section"), ("kernel_config.py", "kernel_config"),
         ("card_run.py", "run_key"), ("card_run.py", "_sandboxed"), ("preflight_record.py", "preflight_key")}


def test_the_build_hands_kernel_helpers_the_kernels_card_never_a_dump() -> None:
    bundle = RUNTIME.parents[0] / "bundle"
    found = []
    for path in sorted(bundle.rglob("*.py")):
        where = path.relative_to(bundle).as_posix()
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, ast.FunctionDef):
                continue
            if function.name == "_card":
                found.append(f"{where}:{function.lineno} def _card")
            dumps = [node for node in ast.walk(function) if isinstance(node, ast.Call)
                     and isinstance(node.func, ast.Attribute) and node.func.attr == "model_dump"]
            if dumps and (where, function.name) not in DUMPS and not where.startswith("wheels/"):
                found.append(f"{where}:{dumps[0].lineno} model_dump in {function.name}")
    assert not found, "the build turns a spec card into a dict for kernel code: " + "; ".join(found)


def test_a_card_the_build_did_not_resolve_is_refused_naming_the_key() -> None:
    written = write(built_card(TEXT, text_built()))
    assert isinstance(written, dict)
    del written["max_len"]
    with pytest.raises(ConfigMalformed, match="card 'q' in kkb_kernel.json lacks max_len: it was built by another kkb; "
                                              "build the kernel again"):
        read_card(written)
    typed = read_card(write(built_card(TEXT, text_built())))  # type: ignore[arg-type]
    assert isinstance(typed.card, RUNTIME_CARDS[CardKind.TEXT].card) and isinstance(typed.built, TextBuilt)
    assert (typed.card.max_len, typed.built.checkpoints[0].file) == (512, "q.safetensors")  # type: ignore[attr-defined]


def test_a_text_cards_activation_is_the_one_the_build_shows_and_the_kernel_runs() -> None:
    pytest.importorskip("torch")
    import torch

    from builder.kkb_runtime.cards import text
    from builder.kkb_runtime.cards.common.device import DeviceChoice

    loaded = parse_spec({"kernel": {"title": "seam tests"}, "competition": {"slug": "kkb-seam"}, "models": [TEXT]})
    written = built_card(TEXT, text_built())
    (shown,) = [setting for setting in resolved_settings([written], loaded.models) if setting.key == "activation"]
    assert (shown.value, shown.origin, read_card(write(written)).origins["activation"]) == (  # type: ignore[arg-type]
        '"softmax"', "default", "default")

    class Logits(torch.nn.Module):
        def forward(self, input_ids: Any, attention_mask: Any = None, token_type_ids: Any = None) -> Any:
            return torch.tensor([[1.0, 3.0]])

    forward = text.make_forward(Logits(), written.card, DeviceChoice("cpu", "test"), torch.device("cpu"))  # type: ignore[arg-type]
    ran = forward({"input_ids": torch.zeros((1, 2), dtype=torch.long)})
    torch.testing.assert_close(ran, torch.softmax(torch.tensor([[1.0, 3.0]]), dim=1))


def test_the_build_shows_what_the_user_did_not_set_and_where_it_came_from() -> None:
    cards = [{**TEXT, "name": "a"}, {"name": "b", "base": "a", "checkpoint": "weights/b.pth", "batch_size": 4}]
    loaded = parse_spec({"kernel": {"title": "seam tests"}, "competition": {"slug": "kkb-seam"}, "models": cards,
                         "model_defaults": {"max_len": 64}})
    written = [built_card(card.model_dump(), text_built()) for card in loaded.models]
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
