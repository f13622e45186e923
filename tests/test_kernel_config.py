"""``kkb_kernel.json``: one typed config, one reader that refuses what it does not know, one writer.

``tests/golden/kkb_kernel/`` holds the file as ``kkb build`` wrote it for example kernels (a card of every kind, folds
in one file, a torch card's preprocessors, an image card's embedded random TTA, an argmax stage, an evaluation API):
the reader reads each into the typed config and the writer writes it back byte for byte, so the file keeps its
format. A change of format (a new card key) rebuilds the example and copies its ``build/NAME/code/kkb_kernel.json``
here.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from builder.kkb_runtime.card import BuiltCard
from builder.kkb_runtime.cards.image.card import ImageBuilt, ImageCard
from builder.kkb_runtime.cards.tabular import GbdtCard, SklearnCard
from builder.kkb_runtime.cards.torch import TorchBuilt, TorchCard
from builder.kkb_runtime.config import ArgmaxStage, config_text
from builder.kkb_runtime.config_reader import load_config, read_config
from builder.kkb_runtime.typed import ConfigMalformed
from builder.kkb_runtime.vocabulary import CardKind, KernelForm
from tests.support.files import REPO

GOLDEN = REPO / "tests" / "golden" / "kkb_kernel"
WRITTEN = sorted(GOLDEN.glob("*.json"))


@pytest.mark.parametrize("path", WRITTEN, ids=[path.stem for path in WRITTEN])
def test_what_the_build_wrote_reads_and_writes_back_byte_for_byte(path: Path) -> None:
    assert config_text(load_config(path)) == path.read_text()


def test_every_section_and_card_is_typed() -> None:
    config = load_config(GOLDEN / "tabular-style.json")
    assert (config.kernel.type, config.submission.id_column, config.fast_commit.rows_below) == (KernelForm.NOTEBOOK, "id", 11)
    assert [type(card.card) for card in config.models] == [GbdtCard, SklearnCard, TorchCard]
    net = config.model("net")
    assert isinstance(net.card, TorchCard) and isinstance(net.built, TorchBuilt)
    assert net.card.feature_columns == ("x1_x2", "x*", "colour_*")
    assert net.built.checkpoints[0].preprocessors == ("weights/net_qt_map.pkl", "weights/net_scaler_map.pkl")
    assert net.origins["batch_size"] == "default" and net.kind == CardKind.TORCH
    leaves = load_config(GOLDEN / "cassava-style.json")
    resnet = leaves.model("resnet")
    assert isinstance(resnet.card, ImageCard) and isinstance(resnet.built, ImageBuilt)
    assert resnet.built.tta_random is not None and resnet.built.tta_random.passes == 2
    assert isinstance(leaves.postprocess[0], ArgmaxStage) and leaves.postprocess[0].into == "label"
    assert load_config(GOLDEN / "evalapi.json").evaluation_api is not None


def _raw(name: str = "tabular-style.json") -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((GOLDEN / name).read_text())
    return raw


def _without(raw: dict[str, Any], *path: str | int) -> dict[str, Any]:
    changed = copy.deepcopy(raw)
    *where, key = path
    holder: Any = changed
    for step in where:
        holder = holder[step]
    del holder[key]
    return changed


def _with(raw: dict[str, Any], value: Any, *path: str | int) -> dict[str, Any]:
    changed = copy.deepcopy(raw)
    *where, key = path
    holder: Any = changed
    for step in where:
        holder = holder[step]
    holder[key] = value
    return changed


AGAIN = ": it was built by another kkb; build the kernel again"


@pytest.mark.parametrize(("change", "message"), [
    pytest.param(lambda raw: _without(raw, "submission", "decimals"),
                 "submission in kkb_kernel.json lacks decimals" + AGAIN, id="section-key"),
    pytest.param(lambda raw: _without(raw, "models", 0, "library"),
                 "card 'lgbm' in kkb_kernel.json lacks library" + AGAIN, id="card-key"),
    pytest.param(lambda raw: _without(raw, "models", 2, "preprocessing"),
                 "card 'net' in kkb_kernel.json lacks preprocessing" + AGAIN, id="card-record"),
    pytest.param(lambda raw: _without(raw, "models", 1, "checkpoints", 0, "sha256"),
                 "card 'logreg'.checkpoints[0] in kkb_kernel.json lacks sha256" + AGAIN, id="fold-key"),
    pytest.param(lambda raw: _without(raw, "fast_commit"), "kkb_kernel.json lacks fast_commit" + AGAIN, id="section"),
    pytest.param(lambda raw: _with(raw, 5, "models", 0, "max_len"),
                 "card 'lgbm' in kkb_kernel.json has max_len, which this kkb does not read" + AGAIN, id="unknown-key"),
    pytest.param(lambda raw: _with(raw, "three", "models", 0, "num_classes"),
                 "card 'lgbm'.num_classes in kkb_kernel.json is 'three', not int" + AGAIN, id="type"),
    pytest.param(lambda raw: _with(raw, "audio", "models", 0, "kind"),
                 "card 'lgbm' in kkb_kernel.json has kind 'audio', not one of image, text, gbdt, sklearn, torch", id="kind"),
    pytest.param(lambda raw: _with(raw, "guess", "submission", "combine"),
                 "submission.combine in kkb_kernel.json is 'guess', not CombineKind" + AGAIN, id="enum"),
])
def test_the_reader_refuses_what_the_build_did_not_write_naming_it(change: Any, message: str) -> None:
    with pytest.raises(ConfigMalformed) as caught:
        read_config(change(_raw()))
    assert str(caught.value) == message


def test_a_stage_of_another_kind_is_read_as_that_kind_and_its_keys_are_checked() -> None:
    raw = _raw("cassava-style.json")
    with pytest.raises(ConfigMalformed, match=r"^postprocess\[0\] in kkb_kernel.json lacks value: it was built"):
        read_config(_with(raw, "threshold", "postprocess", 0, "kind"))


def test_a_card_reads_its_kinds_types_and_keeps_where_each_key_came_from() -> None:
    card = load_config(GOLDEN / "text-style.json").models[0]
    assert isinstance(card, BuiltCard) and card.kind == CardKind.TEXT
    assert card.card.name == card.name and set(card.origins) >= {"max_len", "text_columns"}


@pytest.mark.parametrize(("stated", "written"), [
    pytest.param({}, None, id="none"),
    pytest.param({"keys": ["stock_id"], "id": "{stock_id}-{time_id}"},
                 {"batch_key": None, "files": [], "id": "{stock_id}-{time_id}", "keys": ["stock_id"], "tables": []},
                 id="stated"),
])
def test_a_stand_in_is_written_whole_only_when_kernel_toml_states_one(stated: dict[str, Any], written: Any) -> None:
    from builder.bundle.kernel_config import Ids, kernel_config
    from builder.project.spec import parse_spec

    spec = parse_spec({"kernel": {"title": "stand-in config"}, "competition": {"slug": "kkb-stand-in", "stand_in": stated},
                       "steps": [{"name": "s", "run": "python s.py"}]})
    text = config_text(kernel_config(spec, Ids("me/stand-in-config", "me/stand-in-config-code", None)))
    assert json.loads(text)["competition"].get("stand_in") == written
    assert config_text(read_config(json.loads(text))) == text
