"""What each card feeds its model, for the first test rows: text tokens, tabular feature rows, image tensors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from builder.build import BuildResult, BuildSettings, build_kernel
from builder.bundle.models import offline_environment, user_code_importable
from builder.cli import main, optional_values
from builder.errors import EXIT_OK
from builder.kkb_runtime.cards import text as runtime_text
from builder.kkb_runtime.cards.views import card_view
from builder.kkb_runtime.config_reader import load_config
from builder.rehearse.card_inputs import card_inputs
from tests.test_no_silent_mapping import SKLEARN_CARD, _classifier, lgbm_kernel
from tests.test_no_silent_mapping import _kernel as tabular_kernel

torch = pytest.importorskip("torch")


def here(build: BuildResult, data: Path, rows: int, cards: list[str]) -> dict[str, dict[str, Any]]:
    """The views as the sandboxed program makes them (the same runtime function), in this test's process: what the
    views hold is the question here; the dry run's test below makes them in the sandbox."""
    config = load_config(build.code_dir)
    with user_code_importable(build.code_dir), offline_environment():
        return {card.name: card_view(config, card, build.weights_dir, data, rows) for card in config.models
                if card.name in cards}


def test_text_rows_are_decoded_tokens_with_segments_lengths_and_cuts(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from tests.test_text_parity import CARD, _kernel

    own = ('[[models]]\nname = "joined"\nkind = "text"\nmodel_dir = "weights/bert"\ncheckpoint = "weights/joined.pth"\n'
           'num_classes = 2\ntext_columns = ["title"]\ntext_pair_columns = ["body"]\nmax_len = 12\ntruncation = "head"\n')
    kernel = _kernel(tmp_path / "k", CARD + "\n" + own)
    config = transformers.AutoConfig.from_pretrained(kernel / "weights" / "bert", num_labels=2)
    torch.save(transformers.AutoModelForSequenceClassification.from_config(config).state_dict(), kernel / "weights" / "joined.pth")
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    quest, joined = card_inputs(build, kernel / "data", 2, make_views=here)
    table = pd.read_csv(kernel / "data" / "test.csv")
    assert (quest["card"], quest["kind"], len(quest["rows"])) == ("quest", "text", 2)
    first = quest["rows"][0]
    category = "[TECH]" if table["category"][0] == "tech" else "[LIFE]"
    assert first["tokens"].startswith(f"[CLS] {category} ") and first["padded_to"] == 24 and first["cut"] is None
    assert quest["lines"][1].startswith("  row 0: ") and "padded to 24" in quest["lines"][1]
    for index, row in enumerate(joined["rows"]):  # room for 12 - [CLS] [SEP] [SEP] = 9 tokens of the pair
        assert row["length"] <= 12 and row["tokens"].startswith("[CLS] ") and " ‖ " in row["tokens"]  # the pair's segment
        title, body = len(table["title"][index].split()), len(table["body"][index].split())  # a word is a token here
        keep = runtime_text.budgets(title, body, 9)
        expected = f"title {title} → {keep[0]} tokens; body {body} → {keep[1]} tokens (head)" if title + body > 9 else None
        assert (row["cut"], row["length"]) == (expected, 3 + sum(keep))
    assert any(row["cut"] for row in joined["rows"])


def test_tabular_rows_are_the_features_in_the_models_order(tmp_path: Path) -> None:
    kernel = lgbm_kernel(tmp_path / "k", ["x3", "x1", "x2"])
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    (entry,) = card_inputs(build, kernel / "data", 3, make_views=here)
    test = pd.read_csv(kernel / "data" / "test.csv")
    assert [f["name"] for f in entry["rows"][0]["features"]] == ["x1", "x2", "x3"]  # the model's order, not x3, x1, x2
    assert entry["rows"][1]["features"][0] == {"name": "x1", "dtype": "float64", "value": test["x1"][1]}
    assert entry["lines"][1] == "  row 0: " + ", ".join(f"{c}:float64={test[c][0]}" for c in ("x1", "x2", "x3"))


def test_image_rows_are_tensor_statistics(tmp_path: Path) -> None:
    timm = pytest.importorskip("timm")
    pytest.importorskip("albumentations")
    from PIL import Image

    kernel = tmp_path / "k"
    (kernel / "weights").mkdir(parents=True)
    torch.manual_seed(0)
    torch.save(timm.create_model("test_resnet", pretrained=False, num_classes=2).state_dict(), kernel / "weights" / "m.pth")
    data = kernel / "data"
    (data / "test").mkdir(parents=True)
    for index, value in enumerate((0, 128, 255)):
        Image.fromarray(np.full((20, 20, 3), value, dtype=np.uint8)).save(data / "test" / f"img{index}.png")
    (data / "sample_submission.csv").write_text("id,p0,p1\n" + "".join(f"img{i},0.5,0.5\n" for i in range(3)))
    (kernel / "kernel.toml").write_text(
        '[kernel]\ntitle = "kkb image inputs"\nowner = "tester"\naccelerator = "none"\n\n'
        '[competition]\nslug = "kkb-image-inputs"\ndata = "data"\n\n[code]\ninclude = []\n\n'
        '[[models]]\nname = "m"\narch = "test_resnet"\ncheckpoint = "weights/m.pth"\nnum_classes = 2\n'
        'input_size = [16, 16]\nmean = [0.5, 0.5, 0.5]\nstd = [0.25, 0.25, 0.25]\n')
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    (entry,) = card_inputs(build, data, 3, make_views=here)
    assert "error" not in entry, entry
    first, _, white = entry["rows"]
    assert (first["image"], first["shape"], first["dtype"]) == ("img0.png", [3, 16, 16], "float32")
    assert first["mean"] == [-2.0] * 3 and first["std"] == [0.0] * 3 and first["range"] == [-2.0, -2.0]
    assert white["mean"] == [2.0] * 3
    assert entry["lines"][1] == ("  row 0: img0.png: tensor (3, 16, 16) float32, mean [-2.0, -2.0, -2.0], "
                                 "std [0.0, 0.0, 0.0], range [-2.0, -2.0]")


@pytest.mark.slow
@pytest.mark.loopback
def test_dry_run_show_inputs_prints_the_rows_and_the_report_always_has_them(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sklearn")
    kernel = tabular_kernel(tmp_path / "k", SKLEARN_CARD)
    _classifier(kernel / "weights" / "logreg.joblib", ["high", "low", "mid"])
    base = ["dry-run", str(kernel), "--out", str(tmp_path / "build"), "--scenario", "commit"]
    assert main([*base, "--show-inputs", "2"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "inputs (what each card feeds its model)" in out and "logreg (sklearn)" in out
    assert "row 1: x1:float64=" in out and "row 2:" not in out
    assert main(base) == EXIT_OK
    assert "inputs (what each card feeds its model)" not in capsys.readouterr().out
    assert main([*base, "--show-inputs", "--scenario", "commit"]) == EXIT_OK  # alone: the default 3 rows
    assert "row 2: x1:float64=" in capsys.readouterr().out
    assert optional_values(["dry-run", "k", "--show-inputs"]) == ["dry-run", "k", "--show-inputs", "3"]
    assert optional_values(["dry-run", "--show-inputs", "5", "k"]) == ["dry-run", "--show-inputs", "5", "k"]
    saved = json.loads((tmp_path / "build" / "dryrun" / "report.json").read_text())
    assert [len(entry["rows"]) for entry in saved["inputs"]] == [3]  # the default, printed or not
    assert saved["scenarios"][0]["steps"] == []  # the fast commit ran no step: the view was made in a sandbox of its own
    assert main([*base[:-2], "--scenario", "rerun"]) == EXIT_OK
    rerun = json.loads((tmp_path / "build" / "dryrun" / "report.json").read_text())
    (step,) = rerun["scenarios"][0]["steps"]  # made by the card's own step, in the sandbox
    assert step["inputs"]["card"] == "logreg" and step["inputs"]["rows"] == rerun["inputs"][0]["rows"] == saved["inputs"][0]["rows"]
