"""Build-time checks against the public data (builder.bundle.preflight): widths, post-processing, test ids.

The cards' own checks (here: the image ids resolve to images) run in the build's sandboxed run; these unit tests run
the checks preflight hands it, in this process (an image card's check runs no user code)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builder.bundle.cards import BUILD_CARDS
from builder.bundle.preflight import check_against_public_data
from builder.errors import BundleError
from builder.kkb_runtime.submission import read_sample
from builder.project.spec import KernelSpec, parse_spec
from tests.support.files import build_file_tree


def kernel(tmp_path: Path, files: dict[str, Any] | None = None) -> Path:
    return build_file_tree(tmp_path / "k", {
        "data/sample_submission.csv": "image_id,label\na.jpg,0\nb.jpg,0\n",
        "data/test/a.jpg": b"x", "data/test/sub/b.jpg": b"y", **(files or {})})


def spec(num_classes: int = 5, **extra: Any) -> Any:
    raw = {
        "kernel": {"title": "preflight tests"}, "competition": {"slug": "kkb-pre", "data": "data"},
        "models": [{"name": "m", "arch": "test_resnet", "checkpoint": "w.pt", "num_classes": num_classes}],
        "steps": [{"name": "m", "run": "python -m kkb_runtime predict --model m --out {out}"}],
        "submission": {"id_column": "image_id", "prediction_columns": [f"p{i}" for i in range(5)]},
        "postprocess": [{"kind": "argmax", "into": "label"}],
    }
    for key, value in extra.items():
        raw[key] = value
    return parse_spec(raw)


def check(the_spec: KernelSpec, root: Path) -> None:
    """Preflight's own checks, then the cards' checks it hands the sandboxed run."""
    cards = {card.name: card for card in the_spec.models}
    sample = read_sample(root / "data" / "sample_submission.csv", the_spec.submission.id_column)
    for card_check in check_against_public_data(the_spec, root):
        card = cards[card_check.card]
        BUILD_CARDS[card.kind].check_public_data(the_spec, root, root / "data", card, list(card_check.columns), sample)


def test_a_consistent_kernel_passes(tmp_path: Path) -> None:
    check(spec(), kernel(tmp_path))


@pytest.mark.parametrize(
    ("the_spec", "files", "message"),
    [
        pytest.param(spec(num_classes=4), {}, "kernel.toml: models.m.num_classes: the model outputs 4 values per image, "
                     "step 'm' must write 5 (prediction_columns: p0, p1, p2, p3, p4)", id="width"),
        pytest.param(spec(postprocess=[{"kind": "argmax", "into": "class"}]), {},
                     "kernel.toml: submission: the prediction columns (p0, p1, p2, p3, p4) after argmax are class, "
                     "but sample_submission.csv holds label", id="postprocess-columns"),
        pytest.param(spec(), {"data/sample_submission.csv": "image_id,label\na.jpg,0\nc.jpg,0\n"},
                     "kernel.toml: the public test's ids do not resolve to images: 1 of 2 ids have no image in", id="ids"),
    ],
)
def test_refusals_name_the_file_and_key(tmp_path: Path, the_spec: Any, files: dict[str, Any], message: str) -> None:
    root = kernel(tmp_path, files)
    with pytest.raises(BundleError) as caught:
        check(the_spec, root)
    assert caught.value.message.startswith(f"{root}/{message}")
    assert caught.value.hint
