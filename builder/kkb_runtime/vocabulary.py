"""kkb's vocabulary: every kind that varies, in one place.

This module is on the shared leaf: the kernel runtime imports it (it ships in the code dataset) and so
may every stage of ``builder`` (``builder`` may import ``builder.kkb_runtime``; the runtime imports
nothing of ``builder``). Each enum is the one home of its kind: ``kernel.toml``'s fields are typed with
it, and every stage that behaves differently per member keeps one registry keyed by it
(``tests/test_vocabulary.py`` checks that each registry covers every member, and names the stage that
missed one). Adding a kind is one member here plus one entry per registry.

Standard library only: this file is imported by the fast-commit path.
"""

from __future__ import annotations

import enum


class StrEnum(str, enum.Enum):
    """A string-valued enum that prints and serialises as its value (``enum.StrEnum`` is Python 3.11+;
    kkb supports 3.10). Members compare equal to their value, so JSON read back in the kernel matches."""

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(str(member.value) for member in cls)


class Verdict(StrEnum):
    """What Kaggle says about a run, in Kaggle's words, plus kkb's ``Not Rehearsed``."""

    OK = "OK"
    CSV_NOT_FOUND = "Submission CSV Not Found"
    THREW = "Notebook Threw Exception"
    SCORING_ERROR = "Submission Scoring Error"
    TIMEOUT = "Notebook Timeout"
    COMPUTE = "Notebook Exceeded Allowed Compute"
    # kkb's own: the run failed for a reason that says nothing about what Kaggle would do.
    NOT_REHEARSED = "Not Rehearsed"
    # Kaggle's own infrastructure failed (never a dry-run verdict; the local Kaggle's faults can inject it).
    KAGGLE_ERROR = "Kaggle Error"


class SubmissionKind(StrEnum):
    """How the kernel hands its predictions to Kaggle."""

    CSV = "csv"  # a submission file in /kaggle/working
    EVALUATION_API = "evaluation-api"  # kaggle_evaluation's inference server, driven by the competition's gateway


class KernelForm(StrEnum):
    """How Kaggle runs the kernel's code: ``[kernel] type``, ``kernel_type`` in kernel-metadata.json (fixed once the
    kernel exists on Kaggle)."""

    NOTEBOOK = "notebook"  # an .ipynb, its cells run in order; an exception is judged by the file the run left
    SCRIPT = "script"  # /kaggle/src/script.py run by python from /kaggle/working; an exception fails the run


class PostprocessKind(StrEnum):
    """A ``[[postprocess]]`` stage, run after combine."""

    ARGMAX = "argmax"
    THRESHOLD = "threshold"
    CLIP = "clip"
    FUNCTION = "function"


class CombineKind(StrEnum):
    """How the steps' predictions are ensembled."""

    MEAN = "mean"
    WEIGHTED_MEAN = "weighted_mean"
    WEIGHTED_SUM = "weighted_sum"  # a notebook's blend line: Σ weight × prediction, the weights as written
    RANK_MEAN = "rank_mean"


class Metric(StrEnum):
    """A competition metric kkb knows: its score (one implementation, shared by the dry run and the local
    Kaggle's scorer) and its pre-scoring checks. ``map@k`` is written with its k (``map@5``); a metric that is
    not a member (``python:<file>``, a name kkb does not know) is scored or checked by no rule of kkb's."""

    SPEARMAN = "spearman"  # mean column-wise Spearman (Google QUEST)
    PEARSON = "pearson"  # mean column-wise Pearson
    AUC = "auc"  # ROC AUC per column, macro average
    LOGLOSS = "logloss"  # binary or multi-class log loss
    WEIGHTED_LOGLOSS = "weighted_logloss"  # class-balanced multi-class log loss (PLAsTiCC)
    MULTILABEL_LOGLOSS = "multilabel_logloss"  # mean binary log loss over 0/1 columns (Mechanisms of Action)
    RMSE = "rmse"
    RMSLE = "rmsle"
    MAE = "mae"
    RMSPE = "rmspe"  # root mean squared percentage error (Rossmann, Optiver)
    MAPE = "mape"  # mean absolute percentage error, as a fraction
    SMAPE = "smape"  # symmetric MAPE, in percent (Web Traffic)
    R2 = "r2"
    ACCURACY = "accuracy"
    F1 = "f1"  # binary F1 of the label 1
    FBETA = "fbeta@beta"  # binary F-beta, written with its beta (fbeta@2, fbeta@0.5)
    MICRO_F1 = "micro_f1"
    MACRO_F1 = "macro_f1"
    MCC = "mcc"  # Matthews correlation coefficient
    MAP_AT_K = "map@k"
    NDCG_AT_K = "ndcg@k"  # written with its k (ndcg@5)
    QWK = "qwk"  # quadratic weighted kappa


class CardKind(StrEnum):
    """What a ``[[models]]`` card builds and runs."""

    IMAGE = "image"  # timm architecture or the user's factory over image tensors
    TEXT = "text"  # transformers model (local config + weights, or the user's factory) over token ids
    GBDT = "gbdt"  # LightGBM / XGBoost / CatBoost boosters over a feature table
    SKLEARN = "sklearn"  # scikit-learn estimators or pipelines (joblib, an explicit opt-in)
    TORCH = "torch"  # the user's nn.Module (a factory) over float32 tensors of a feature table


class Scenario(StrEnum):
    """The two runs Kaggle makes of a code-competition kernel."""

    COMMIT = "commit"  # the save-and-run: public test, no scoring
    RERUN = "rerun"  # the scoring rerun on the hidden test (KAGGLE_IS_COMPETITION_RERUN set)


class Layout(StrEnum):
    """Where Kaggle mounts inputs."""

    CURRENT = "current"  # /kaggle/input/{competitions,datasets,models,notebooks}/...
    LEGACY = "legacy"  # /kaggle/input/<slug>


class Isolation(StrEnum):
    """How the dry run's sandbox gives the kernel Kaggle's paths and no network."""

    BWRAP = "bwrap"  # bubblewrap: user + mount + net namespaces
    NAMESPACE = "namespace"  # kkb's own launcher: the same namespaces, no bubblewrap
    PYTHON = "python"  # portable: no namespaces; a Python-level network guard and copied paths


class RootFilesystem(StrEnum):
    """How the sandbox's root (the container's file system) is made writable, changes discarded after the run."""

    OVERLAY = "overlay"  # overlayfs in the user namespace (current kernels)
    FUSE_OVERLAY = "fuse-overlayfs"  # fuse-overlayfs when installed
    BWRAP_OVERLAY = "bwrap-overlay"  # bubblewrap's --overlay
    READ_ONLY = "read-only"  # fallback: only /kaggle/working, /kaggle/temp and /tmp writable


class MemoryAccounting(StrEnum):
    """How the run's memory is counted against the machine shape's RAM."""

    CGROUP = "cgroup"  # a delegated cgroup v2 memory controller (memory.max, as Kaggle's container)
    PSS = "pss"  # the sum of proportional set sizes over the run's process tree, sampled
    NONE = "none"  # no limit (the portable mode where /proc cannot be read)


__all__ = [
    "CardKind", "CombineKind", "Isolation", "KernelForm", "Layout", "MemoryAccounting", "Metric", "PostprocessKind",
    "RootFilesystem", "Scenario", "StrEnum", "SubmissionKind", "Verdict",
]
