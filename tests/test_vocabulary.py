"""Every kind that varies has one home (``builder.kkb_runtime.vocabulary``), and every stage that behaves
per member keeps one registry keyed by it that covers every member.

Adding a member to an enum makes the test of each registry that misses it fail, naming the stage to open.
A stage that does not handle a member on purpose says so with an explicit entry (a reason, None), never
by leaving it out. To add a registry: one line in ``REGISTRIES``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any

import pytest

from builder.bundle import cards as bundle_cards
from builder.bundle import preflight
from builder.errors import SpecError
from builder.kkb_runtime import cards as runtime_cards
from builder.kkb_runtime import metrics, postprocess, submission
from builder.kkb_runtime.vocabulary import (
    CardKind,
    CombineKind,
    Isolation,
    KernelForm,
    MemoryAccounting,
    Metric,
    PostprocessKind,
    RootFilesystem,
    SubmissionKind,
    Verdict,
)
from builder.local_kaggle import fault_schema, kernel_push
from builder.notebook import render
from builder.project import cards, spec, spec_errors
from builder.project.spec_values import SpecErrorType
from builder.rehearse import scenarios, verdict
from builder.remote import hints, rehearsal
from builder.run import forms, isolation, memory, overlay

# (the stage, as a maintainer would look for it; its registry; the enum it must cover)
REGISTRIES: list[tuple[str, Mapping[Any, Any], type[enum.Enum]]] = [
    ("project/spec.py SUBMISSION_KIND_NEEDS (what each kind needs of kernel.toml)", spec.SUBMISSION_KIND_NEEDS,
     SubmissionKind),
    ("notebook/render.py CELLS (the notebook's cells)", render.CELLS, SubmissionKind),
    ("bundle/preflight.py PREFLIGHTS (build-time checks)", preflight.PREFLIGHTS, SubmissionKind),
    ("rehearse/scenarios.py REHEARSALS (the dry run's scenario runner)", scenarios.REHEARSALS, SubmissionKind),
    ("remote/rehearsal.py ON_KAGGLE_REFUSALS (what --on-kaggle rehearses)", rehearsal.ON_KAGGLE_REFUSALS, SubmissionKind),
    ("kkb_runtime/postprocess.py STAGES (keys, apply, output columns)", postprocess.STAGES, PostprocessKind),
    ("kkb_runtime/submission.py COMBINERS (the kernel's combine)", submission.COMBINERS, CombineKind),
    ("remote/hints.py DRY_RUN_HINTS (what to do about Kaggle's verdict)", hints.DRY_RUN_HINTS, Verdict),
    ("project/spec_errors.py HINTS (the hint of each typed spec error)", spec_errors.HINTS, SpecErrorType),
    ("project/cards/kinds.py CARD_MODELS (each card kind's keys and checks)", cards.CARD_MODELS, CardKind),
    ("bundle/cards BUILD_CARDS (a card's extra, build-time preparation, files and public-data checks)",
     bundle_cards.BUILD_CARDS, CardKind),
    ("kkb_runtime/cards RUNTIME_CARDS (the kernel's card, record, runner and view of each kind)",
     runtime_cards.RUNTIME_CARDS, CardKind),
    ("kkb_runtime/metrics.py REGISTRY (score and pre-scoring checks)", metrics.REGISTRY, Metric),
    ("run/isolation.py DESCRIPTIONS (what each sandbox gives the kernel)", isolation.DESCRIPTIONS, Isolation),
    ("run/memory.py AVAILABLE (whether an accounting can run here)", memory.AVAILABLE, MemoryAccounting),
    ("run/memory.py ACCOUNTANTS (how the run's memory is counted)", memory.ACCOUNTANTS, MemoryAccounting),
    ("run/memory.py DESCRIPTIONS (the report's line)", memory.DESCRIPTIONS, MemoryAccounting),
    ("run/overlay.py AVAILABLE (whether a writable root can be made here)", overlay.AVAILABLE, RootFilesystem),
    ("run/overlay.py DESCRIPTIONS (the report's line)", overlay.DESCRIPTIONS, RootFilesystem),
    ("notebook/render.py FORMS (the kernel's code file: a notebook, or a script of the same cells)", render.FORMS, KernelForm),
    ("run/forms.py EXECUTORS (how the sandbox runs each form)", forms.EXECUTORS, KernelForm),
    ("rehearse/verdict.py FORM_JUDGING (where a failure happened, whether an exception fails the run)",
     verdict.FORM_JUDGING, KernelForm),
    ("local_kaggle/kernel_push.py CODE_CHECKS (what a push of each form must hold)", kernel_push.CODE_CHECKS, KernelForm),
]


@pytest.mark.parametrize(("stage", "registry", "kind"), REGISTRIES, ids=[stage.split(" ")[1] for stage, _, _ in REGISTRIES])
def test_registry_covers_every_member(stage: str, registry: Mapping[Any, Any], kind: type[enum.Enum]) -> None:
    missing = sorted(str(member.value) for member in kind if member not in registry)
    assert not missing, (f"{stage} has no entry for {kind.__name__} {', '.join(missing)}: add one there "
                         "(an explicit 'not handled: why' entry if the stage does not handle it)")
    strays = sorted(str(key) for key in registry if not isinstance(key, kind))
    assert not strays, f"{stage} has keys that are not {kind.__name__} members: {', '.join(strays)}"


def test_the_coverage_check_names_the_stage_that_missed_a_member() -> None:
    partial = {SubmissionKind.CSV: render.CSV_CELLS}
    with pytest.raises(AssertionError, match=r"stage X has no entry for SubmissionKind evaluation-api"):
        test_registry_covers_every_member("stage X", partial, SubmissionKind)


def test_spec_fields_are_typed_with_the_vocabulary() -> None:
    assert spec.SubmissionSection.model_fields["kind"].annotation is SubmissionKind
    assert spec.SubmissionSection.model_fields["combine"].annotation is CombineKind
    assert spec.PostprocessStage.model_fields["kind"].annotation is PostprocessKind
    assert spec.KernelSection.model_fields["type"].annotation is KernelForm
    parsed = spec.SubmissionSection.model_validate({"kind": "evaluation-api", "combine": "rank_mean"})
    assert parsed.kind is SubmissionKind.EVALUATION_API and parsed.combine is CombineKind.RANK_MEAN


def test_verdicts_derive_from_the_one_vocabulary() -> None:
    assert verdict.VERDICTS == tuple(member for member in Verdict if member is not Verdict.KAGGLE_ERROR)
    assert (verdict.OK, verdict.THREW, verdict.NOT_REHEARSED) == (Verdict.OK, Verdict.THREW, Verdict.NOT_REHEARSED)
    assert set(fault_schema.DESCRIPTIONS) == {member.value for member in Verdict} - {"OK", "Not Rehearsed"}
    # Reports and the wire keep Kaggle's plain words.
    assert json.dumps({"name": verdict.CSV_NOT_FOUND}) == '{"name": "Submission CSV Not Found"}'
    assert f"{verdict.TIMEOUT}: x" == "Notebook Timeout: x"


@pytest.mark.parametrize("kind", list(SpecErrorType))
def test_a_typed_spec_error_finds_its_hint_by_type_not_wording(kind: SpecErrorType) -> None:
    error: Any = {"type": kind.value, "loc": ("anywhere",), "msg": "any wording at all", "input": None}
    assert spec_errors.hint_for(error) == spec_errors.HINTS[kind]


@pytest.mark.parametrize("kind", list(PostprocessKind))
def test_the_spec_refuses_keys_the_runtime_table_does_not_take(kind: PostprocessKind) -> None:
    taken = postprocess.STAGES[kind].keys
    valid = {"columns": ["a"], "function": "package.module:function", "value": 0.5, "into": "label"}
    stray = next(key for key in valid if key not in taken)
    with pytest.raises(SpecError) as caught:
        spec.parse_spec({"kernel": {"title": "Vocabulary Test"}, "competition": {"slug": "vocab"},
                         "steps": [{"name": "a", "run": "python a.py"}],
                         "postprocess": [{"kind": kind.value, stray: valid[stray]}]})
    assert f"postprocess[0]: kind = '{kind.value}' takes {', '.join(sorted(taken))}, not {stray}" in caught.value.message
