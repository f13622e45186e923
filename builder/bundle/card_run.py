"""The build's checks of the user's code run exactly where the kernel runs: one short sandboxed run of the cards.

Every piece of user code the build runs (feature and encode functions, factories, pickles and model files, the
cards' checks on the public test) runs in one process per build (:mod:`builder.bundle.card_guest`), started in the
sandbox the dry run executes the notebook in (:func:`builder.run.sandbox.prepare_sandbox`, through
:func:`builder.run.process.run_in`): the same ``/kaggle/input`` layout (the current one; the legacy one when the dry
run asks for it), ``/kaggle/working`` as the working folder, the kernel's environment
(:func:`builder.run.sandbox.kernel_environment`, the function every sandboxed run takes it from), no network, and
kkb's variables as a step sees them. The kernel folder's code and weights files are mounted where Kaggle mounts the
code and weights datasets (hard links to the files themselves: nothing is copied where the sandbox binds folders);
the public data and each ``[[inputs]]`` stand-in where Kaggle mounts them. Nothing of the host but what is mounted
there and kkb's interpreter is needed inside, and the run writes nothing outside its own folder: it prepares the
cards' files there, and kkb moves the files the cards name into the weights being staged, nothing else.

Each call of user code is bounded (``call_seconds``): one that does not return ends the run, named
(``tabkernel.features:make did not return within 300 s``); a model file that crashes its loader (LightGBM aborts
on a truncated booster) is named with the signal. An exception of the user's code is the user's error, with the
user's file, line and code and where the check ran. Nothing is run again when nothing it reads changed: the run's
inputs (the cards, the files' content hashes, the public data's and stand-ins' listings, the library versions, the
layout) are its key, and the previous build's prepared files, cards and notes are reused under the same key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from builder import __version__, errors
from builder.bundle.cards import BUILD_CARDS
from builder.bundle.cards.unit import built_card
from builder.bundle.checkpoints import checkpoint_sources
from builder.bundle.files import HashCache, hash_file
from builder.bundle.preflight import CardCheck
from builder.errors import BundleError, KkbError, ModelError
from builder.kkb_runtime.card import BuiltCard
from builder.kkb_runtime.config import KernelConfig, config_text
from builder.kkb_runtime.config_reader import read_built
from builder.kkb_runtime.typed import ConfigMalformed, write
from builder.kkb_runtime.vocabulary import Layout
from builder.project.cards import ImageCard, ModelCard
from builder.project.jsonfile import read_object
from builder.project.layout import KERNEL_CONFIG, MODELS_RECORD
from builder.project.spec import SPEC_FILE, KernelSpec
from builder.run.calls import Call
from builder.run.process import ProgramRun, inside, run_in
from builder.run.sandbox import Mount, Sandbox, SandboxSpec, prepare_sandbox, remove_sandbox

CALL_SECONDS = 300.0  # one call of user code (a feature function on the public test, a model file's load)
CALL_SECONDS_VARIABLE = "KKB_BUILD_CALL_SECONDS"  # another bound for every build (a model that takes long to load)
RUN_SECONDS = 3600.0  # the whole run, kkb's own work between the calls included
RUNTIME_SOURCE = Path(__file__).resolve().parent.parent / "kkb_runtime"  # the kernel's runtime, as the code dataset has it
TAIL_LINES = 3  # of a crashed loader's own log, in the message
HOST_TMP = Path("/tmp")  # private inside the namespaces: nothing there is seen through a link
VERSIONS = ("torch", "timm", "albumentations", "safetensors", "transformers", "tokenizers", "lightgbm", "xgboost",
            "catboost", "scikit-learn", "pandas", "numpy", "joblib")


@dataclass(frozen=True)
class CardRunPlan:
    """What the build's run of the user's code reads and where the kernel would see it."""

    spec: KernelSpec
    config: KernelConfig  # kkb_kernel.json as the build writes it, but the cards (what find_input reads in the run)
    kernel_dir: Path  # absolute
    code_files: dict[str, Path]  # the code dataset's files (relative path -> source)
    weights_files: dict[str, Path]  # the weights dataset's files, checkpoints and card files included
    checks: tuple[CardCheck, ...]  # the cards' own checks against the public test
    code_target: str  # where Kaggle mounts the code dataset, under input/ (datasets/<owner>/<slug>-code)
    weights_target: str  # ... and the weights (a dataset, or a Model version)
    layout: Layout = Layout.CURRENT
    call_seconds: float = CALL_SECONDS


@dataclass(frozen=True)
class CardRun:
    cards: list[BuiltCard]  # each card as kkb_kernel.json holds it
    notes: tuple[str, ...]  # the cards' notes on what kkb maps (builder.bundle.cards.card_notes), files left out
    reused: bool  # nothing changed since the last build: nothing ran


def call_seconds(given: float | None = None) -> float:
    """The bound of one call of user code: ``given`` (``BuildSettings.call_seconds``), else
    ``$KKB_BUILD_CALL_SECONDS``, else :data:`CALL_SECONDS`; a positive number of seconds."""
    where, text = ("call_seconds", str(given)) if given is not None else (CALL_SECONDS_VARIABLE,
                                                                            os.environ.get(CALL_SECONDS_VARIABLE, ""))
    hint = f"give the seconds one call of your code may take (default {CALL_SECONDS:g})"
    try:
        value = float(text) if text else CALL_SECONDS
    except ValueError:
        raise BundleError(f"{where}={text!r} is not a number of seconds", hint=hint) from None
    if not 0 < value < float("inf"):
        raise BundleError(f"{where}={text!r} is not a positive number of seconds", hint=hint)
    return value


def run_cards(plan: CardRunPlan, stage: Path, previous: Path, cache: HashCache) -> CardRun:
    """The cards prepared into ``stage`` (the weights being staged), checked and noted, in the sandbox; or the
    previous build's (``previous``: its weights folder) when the key is the same. Writes the record beside ``stage``."""
    if not plan.spec.models:
        return CardRun([], (), reused=False)
    key = run_key(plan, cache)
    record = read_object(previous.parent / MODELS_RECORD)
    kept = _kept_cards(plan.spec, record.get("cards")) if record.get("key") == key else None
    reused = kept is not None and _relink(record, stage, previous)
    if kept is not None and reused:
        cards, notes = kept, tuple(record.get("notes") or ())
    else:
        cards, notes = _sandboxed(plan, stage)
    written = {fold.file: _stat(stage / fold.file) for card in cards for fold in card.built.checkpoints}  # every fold's
    recorded = [{"name": card.name, "built": write(card.built)} for card in cards]
    (stage.parent / MODELS_RECORD).write_text(json.dumps({"key": key, "cards": recorded, "files": written,
                                                          "notes": list(notes)}, sort_keys=True))
    return CardRun(cards, notes, reused=reused)


def built_cards(spec: KernelSpec, answered: object) -> list[BuiltCard]:
    """The cards as ``kkb_kernel.json`` holds them, from what the run answered for each (``{"name", "built"}``): each
    card's record read by the kernel's reader as its kind's, with the kernel's card of the spec's and its origins."""
    records = {str(entry.get("name")): entry.get("built") for entry in answered if isinstance(entry, dict)} \
        if isinstance(answered, list) else {}
    cards = []
    for card in spec.models:
        record = records.get(card.name)
        if not isinstance(record, dict):
            raise ConfigMalformed(f"card '{card.name}': the build's run of your code answered no record of it")
        cards.append(built_card(BUILD_CARDS[card.kind], card, read_built(card.kind, record, card.name)))
    return cards


def _kept_cards(spec: KernelSpec, answered: object) -> list[BuiltCard] | None:
    """The last build's cards under the same key, or None when this kkb does not read them (another kkb wrote them)."""
    try:
        return built_cards(spec, answered)
    except ConfigMalformed:
        return None


# --- the key: everything the run reads ----------------------------------------------------------------------------


def run_key(plan: CardRunPlan, cache: HashCache) -> str:
    spec = plan.spec
    sources = _view_files(plan)
    sources.update({path: plan.kernel_dir / path for card in spec.models for path in checkpoint_sources(card, plan.kernel_dir)})
    data = spec.competition.data_dir(plan.kernel_dir)
    inputs: dict[str, Any] = {
        "kkb": __version__,
        "spec": spec.model_dump(mode="json", include={"models", "competition", "submission", "steps", "inputs"}),
        "files": {rel: _sha256(path, cache) for rel, path in sorted(sources.items()) if path.is_file()},
        "checks": [dataclasses.asdict(check) for check in plan.checks],
        "data": _listing(data) if data is not None else None,
        "stand_ins": {item.mount_target: _listing(_stand_in(plan, item.path)) for item in spec.inputs if item.path},
        "places": [plan.code_target, plan.weights_target, str(plan.layout), plan.call_seconds],
        "versions": {package: _version(package) for package in VERSIONS},
    }
    return "sha256:" + hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def _pipelines(card: ModelCard) -> tuple[str | None, ...]:
    """An image card's pipeline files (its own, its random TTA's): what its prepared card depends on besides checkpoints."""
    if not isinstance(card, ImageCard):
        return ()
    return card.transforms, card.tta_random.transforms if card.tta_random else None


def _listing(folder: Path | None) -> str | None:
    """The folder's files by name, size and modification time (what user code may read there), hashed."""
    if folder is None or not folder.is_dir():
        return None
    digest = hashlib.sha256()
    for root, folders, files in os.walk(folder, followlinks=True):
        folders.sort()
        for name in sorted(files):
            path = Path(root) / name
            try:
                info = path.stat()
            except OSError:
                continue
            digest.update(f"{path.relative_to(folder).as_posix()}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _stand_in(plan: CardRunPlan, path: str) -> Path:
    return plan.kernel_dir / Path(path).expanduser()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _sha256(path: Path, cache: HashCache) -> str:
    known = cache.lookup(path)
    if known is None:
        known = hash_file(path)
        cache.store(path, known)
    return known


def _take_prepared(prepared: Path, stage: Path, cards: list[BuiltCard]) -> tuple[str, ...]:
    """The cards' prepared files moved from the run's folder into the weights stage (which the run never could write),
    as regular files only; anything else the run of the user's code left there is not taken, and named in a note."""
    wanted = {fold.file for card in cards for fold in card.built.checkpoints}
    for name in sorted(wanted):
        source = prepared / name
        if source.is_symlink() or not source.is_file():
            raise BundleError(f"the build's run of your code did not leave {name} as a file in the weights it prepared",
                              hint="a card's preparation writes each fold's file; nothing else may replace it")
        (stage / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, stage / name)
    strays = sorted(path.relative_to(prepared).as_posix() for path in prepared.rglob("*")
                    if path.is_symlink() or path.is_file())
    if not strays:
        return ()
    shown = ", ".join(strays[:5]) + (", ..." if len(strays) > 5 else "")
    return (f"the build's run of your code left {len(strays)} file(s) beside the weights it prepared ({shown}): "
            "not taken, never uploaded",)


def _relink(record: dict[str, Any], stage: Path, previous: Path) -> bool:
    """The previous build's prepared files hard-linked into ``stage``; False when one was changed or removed."""
    files = record.get("files", {})
    if any(_stat(previous / relative) != tuple(stat) for relative, stat in files.items()):
        return False
    for relative in files:
        (stage / relative).parent.mkdir(parents=True, exist_ok=True)
        os.link(previous / relative, stage / relative)
    return True


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns


# --- the run --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Places:
    """Where the run's program sees the kernel's inputs, and how to say it."""

    box: Sandbox
    code: Path
    weights: Path
    data: Path | None
    plan: CardRunPlan

    def describe(self) -> str:
        """Where the check ran, in a hint: the kernel's places, and what differs from the kernel."""
        slug = self.plan.spec.competition.slug
        working = "/kaggle/working" if self.box.kaggle_paths else str(self.box.working_dir)
        legacy = (f" (the {self.plan.layout} layout: the legacy ../input/{slug} is rehearsed by kkb dry-run --legacy-layout)"
                  if self.plan.layout == Layout.CURRENT else f" (the {self.plan.layout} layout)")
        said = (f"the check ran where the kernel runs, in the dry run's sandbox ({self.box.isolation}): working folder "
                f"{working}, the public data at {self.data}{legacy}, your code at {self.code} (KKB_CODE_DIR), the weights "
                f"at {self.weights} (KKB_WEIGHTS_DIR) as the kernel folder holds them, before kkb normalises checkpoints")
        if not self.box.kaggle_paths:
            said += "; unlike Kaggle, no /kaggle paths exist in this portable sandbox (only $KKB_KAGGLE_ROOT)"
        return said

    def to_host(self, text: str) -> str:
        """A message of the run with the code mount named as the kernel folder it stands for, and the public data's
        mount as the data folder (the hint says where the check saw them)."""
        data = self.plan.spec.competition.data_dir(self.plan.kernel_dir)
        for inner, outer in ((self.code, self.plan.kernel_dir), (self.data, data)):
            if inner is not None and outer is not None:
                text = text.replace(f"{inner}{os.sep}", f"{outer}{os.sep}").replace(str(inner), str(outer))
        return text


def _sandboxed(plan: CardRunPlan, stage: Path) -> tuple[list[BuiltCard], tuple[str, ...]]:
    """The guest's answer (cards, notes), its prepared files moved into ``stage``, or its error raised here. The sandbox
    is laid out in the build's staging folder (removed before that is swapped into place), so a prepared file moves
    into the stage without a copy, and whatever folder holds the stage holds the sandbox root, which no launcher binds
    read-only (the host's import path under /tmp is bound so)."""
    work = Path(tempfile.mkdtemp(prefix=".run-", dir=stage.parent))
    try:
        view = _kernel_view(work / "kernel", plan)
        data = plan.spec.competition.data_dir(plan.kernel_dir)
        data = data if data is not None and data.is_dir() else None
        slug = plan.spec.competition.slug
        mounts = [Mount(view, plan.code_target), Mount(view, plan.weights_target)]
        if data is not None:
            mounts.append(Mount(data, f"competitions/{slug}"))
        mounts += [Mount(_stand_in(plan, item.path), item.mount_target) for item in plan.spec.inputs
                   if item.path and _stand_in(plan, item.path).is_dir()]
        box = prepare_sandbox(SandboxSpec(mounts=tuple(mounts), rerun=False, layout=plan.layout), work / "kaggle")
        places = _Places(box, inside(box, plan.code_target, plan.layout), inside(box, plan.weights_target, plan.layout),
                         inside(box, f"competitions/{slug}", plan.layout) if data is not None else None, plan)
        request, answer = box.private_dir / "card-run.json", box.private_dir / "card-answer.json"
        prepared = box.private_dir / "prepared"  # writable inside at its own path, as the sandbox root is
        prepared.mkdir()
        request.write_text(json.dumps({
            "spec": plan.spec.model_dump(mode="json", by_alias=True, exclude_unset=True), "kernel_dir": str(places.code),
            "data": str(places.data) if places.data else None, "stage": str(prepared),
            "checks": [dataclasses.asdict(check) for check in plan.checks], "notes": True}))
        run = run_in(box, ["-m", "builder.bundle.card_guest", str(request), str(answer)], env=_variables(places),
                     call_seconds=plan.call_seconds, run_seconds=RUN_SECONDS)
        result = _answer(run, read_object(answer), places)
        cards = built_cards(plan.spec, result["cards"])
        return cards, (*result["notes"], *_take_prepared(prepared, stage, cards))
    finally:
        remove_sandbox(work)


def _kernel_view(folder: Path, plan: CardRunPlan) -> Path:
    """The kernel folder's code and weights files at their relative paths, the runtime, and ``kkb_kernel.json`` but its
    cards (what ``find_input`` reads): the code and weights datasets as the kernel sees them."""
    for relative, source in _view_files(plan).items():
        _place(Path(source).resolve(), folder / relative)
    (folder / "kkb_runtime").symlink_to(RUNTIME_SOURCE, target_is_directory=True)
    (folder / KERNEL_CONFIG).write_text(config_text(plan.config), encoding="utf-8")
    return folder


def _view_files(plan: CardRunPlan) -> dict[str, Path]:
    """The code and weights datasets' files, and the pipeline files the build embeds in image cards."""
    pipelines = {path: plan.kernel_dir / path for card in plan.spec.models for path in _pipelines(card)
                 if path and ":" not in path and (plan.kernel_dir / path).is_file()}
    return {**pipelines, **plan.code_files, **plan.weights_files}


def _place(real: Path, link: Path) -> None:
    """A hard link (nothing copied, nothing of the host's folders needed inside the sandbox); across file systems a
    symbolic link, which the sandbox's read-only view of the host follows, but under /tmp, which is the sandbox's own
    there: a copy."""
    link.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(real, link)
        return
    except OSError:
        pass
    if real.is_relative_to(HOST_TMP):
        shutil.copy2(real, link)
    else:
        link.symlink_to(real)


def _variables(places: _Places) -> dict[str, str]:
    """kkb's variables as a step of the kernel sees them (``kkb_runtime.steps``), at the run's places."""
    env = {"KKB_CODE_DIR": str(places.code), "KKB_WEIGHTS_DIR": str(places.weights),
           "KKB_KERNEL_CONFIG": str(places.code / KERNEL_CONFIG), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(places.code), places.box.env.get("PYTHONPATH", "")]))}
    if places.data is not None:
        env["KKB_COMPETITION_DIR"] = str(places.data)
    return env


def _answer(run: ProgramRun, answer: dict[str, Any], places: _Places) -> dict[str, Any]:
    if "error" in answer:
        raise _error(answer["error"], places)
    if "cards" in answer:
        return {"cards": answer["cards"] or [], "notes": [places.to_host(note) for note in answer.get("notes") or ()]}
    raise _no_answer(run, places)


def _error(error: dict[str, Any], places: _Places) -> KkbError:
    cls = getattr(errors, str(error.get("type")), None)
    kind = cls if isinstance(cls, type) and issubclass(cls, KkbError) else BundleError
    hint = places.to_host(str(error["hint"])) if error.get("hint") else None
    if error.get("user"):
        hint = f"{hint}; {places.describe()}" if hint else places.describe()
    return kind(places.to_host(str(error.get("message"))), hint=hint)


def _no_answer(run: ProgramRun, places: _Places) -> Exception:
    """The run ended without an answer: a call that did not return, a crash, an exit of the user's code; else kkb's."""
    spec_path = places.plan.kernel_dir / SPEC_FILE
    call = run.timed_out_call or run.open_call
    where = f"{spec_path}: models.{call.card}" if call is not None and call.card else str(spec_path)
    if run.timed_out_call is not None:
        limit = places.plan.call_seconds
        return BundleError(f"{where}: {run.timed_out_call.subject} did not return within {limit:g} s ({run.timed_out_call.what})",
                           hint=_bounded_hint(run.timed_out_call, limit, places))
    if run.timed_out:
        return BundleError(f"{spec_path}: the build's run of your code did not end within {RUN_SECONDS:g} s",
                           hint=places.describe())
    if call is None:
        return RuntimeError(f"the build's sandboxed run ended without an answer (exit {run.returncode}): "
                            f"{run.stderr.strip()[-1500:]}")
    said = _last_words(run.stderr)
    if run.signal and call.file:
        return ModelError(f"[[models]] '{call.card}': {places.plan.kernel_dir / call.file} crashed the loader ({run.signal}): "
                          f"the file is corrupt or truncated{said}", hint=call.hint)
    ended = f"crashed the process ({run.signal})" if run.signal else f"ended the process (exit code {run.returncode})"
    return BundleError(f"{where}: {call.subject} {ended} ({call.what}){said}",
                       hint=f"{call.hint + '; ' if call.hint else ''}{places.describe()}")


def _bounded_hint(call: Call, limit: float, places: _Places) -> str:
    own = f"{call.hint}; " if call.hint else ""
    return (f"{own}the build runs it once on the public test and ends a call of your code after {limit:g} s "
            f"({CALL_SECONDS_VARIABLE}=SECONDS, or kkb.BuildSettings(call_seconds=...)); {places.describe()}")


def _last_words(stderr: str) -> str:
    tail = [line.strip() for line in stderr.strip().splitlines() if line.strip()][-TAIL_LINES:]
    return f"; its last words: {' | '.join(tail)}" if tail else ""


__all__ = ["CALL_SECONDS", "CardRun", "CardRunPlan", "call_seconds", "run_cards", "run_key"]
