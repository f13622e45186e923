"""Build-time checkpoints of the network cards (image, text, torch): normalise each and prove it loads, before
anything is uploaded.

For each checkpoint file a card names, :func:`prepare_source` reads the training checkpoint (``state_dict``/``model``/
``ema`` entries, ``module.`` and ``_orig_mod.`` prefixes; a file of several folds, ``{fold: state_dict}`` or a list,
each fold apart), remaps its keys as the card says, fits it strictly to the network the kind built (refusing the build
with the missing/unexpected keys and shape mismatches named), writes a clean state dict (optionally fp16, as
safetensors) into the weights stage and loads it back: a :class:`~builder.kkb_runtime.card.NetworkFold` each, what
``kkb_kernel.json`` records. The kinds' own preparation (the network, its checks) is in ``builder.bundle.cards``.

The loading code is the kernel's own (``builder.kkb_runtime.cards.common.models``), called with the kernel's card, so
what loads here loads there. ``key`` is the card's ``checkpoint_key`` (the entry of the training checkpoint that holds
the weights): the files written are plain state dicts, so the kernel's card has none.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from builder.errors import ModelError
from builder.kkb_runtime.card import LeftOut, NetworkCard, NetworkFold
from builder.kkb_runtime.cards.common import checkpoints
from builder.kkb_runtime.cards.common import models as runtime


def prepare_source(card: NetworkCard, key: str | None, model: Any, kernel_dir: Path, source: str, weights_stage: Path,
                   written: dict[str, str]) -> list[NetworkFold]:
    """One checkpoint file: one fold, or several in one file (``{fold: state_dict}`` or a list), each written
    as a file of its own (``name.fold<K>.safetensors``)."""
    raw = _read_raw(card, key, kernel_dir, source)
    try:
        folds = checkpoints.fold_states(raw)
    except checkpoints.FoldsMalformed as exc:
        raise ModelError(f"[[models]] '{card.name}': {source}: {exc}",
                         hint=f"save the folds as {{0: model.state_dict(), 1: ...}} or a list of state dicts; "
                              f"fold key '{exc.key}' is the one to fix (or give each fold its own file)") from None
    if folds is None:
        state, source_key = read_training_checkpoint(card, key, kernel_dir, source, raw)
        return [_prepare_state(card, model, state, source, source_key, weights_stage, written)]
    out = []
    for fold, value in folds:
        try:
            state, source_key = runtime.clean_state_dict(value, key)
        except runtime.ModelLoadError as exc:
            raise ModelError(f"[[models]] '{card.name}': {source}: fold {fold}: {checkpoints.plain(str(exc))}",
                             hint=f"fold {fold} must hold the weights (a state dict, or checkpoint_key's entry); "
                                  "set checkpoint_key if every fold keeps them under one key") from None
        fold_source = PurePosixPath(source).with_suffix(f".fold{fold}{PurePosixPath(source).suffix}").as_posix()
        out.append(_prepare_state(card, model, state, fold_source, source_key, weights_stage, written, f"{source}#{fold}"))
    return out


def _read_raw(card: NetworkCard, key: str | None, kernel_dir: Path, source: str) -> Any:
    """The file as torch or safetensors reads it; a failure is reported as read_training_checkpoint reports it."""
    try:
        return runtime.read_checkpoint(kernel_dir / source, card.allow_pickle)
    except Exception:
        read_training_checkpoint(card, key, kernel_dir, source)  # raises the ModelError naming what is wrong
        raise


def _prepare_state(card: NetworkCard, model: Any, state: dict[str, Any], source: str, source_key: str | None,
                   weights_stage: Path, written: dict[str, str], label: str | None = None) -> NetworkFold:
    """One fold: remap, fit strictly (or list what was left out), write, and load back. ``label``: how messages name
    the checkpoint and the fold records it (``file.pth#3``: fold 3 of a file of folds)."""
    state = checkpoints.remap_keys(state, card)
    state, prefix, left_out = fit_checkpoint(card, model, state, label or source)
    if card.half:
        state = to_half(card, state)
    relative = write_checkpoint(card, state, weights_stage, written, source)
    verify_written(card, model, weights_stage / relative)
    return NetworkFold(file=relative, sha256=written[relative], source=label or source, source_key=source_key,
                       stripped_prefix=prefix, left_out=left_out,
                       # the card's opt-in, recorded where the build's output shows it (kkb_kernel.json)
                       loaded_with="torch.load(weights_only=False) (allow_pickle = true)" if card.allow_pickle and
                       not source.endswith(".safetensors") else "weights_only")


# --- checkpoint -----------------------------------------------------------------------------------

def read_training_checkpoint(card: NetworkCard, key: str | None, kernel_dir: Path, source: str,
                             raw: Any = None) -> tuple[dict[str, Any], str | None]:
    """The weights of the training checkpoint ``source`` (``key``: the entry that holds them; None: timm's order), as a
    clean state dict, and the entry they came from; a file that is no checkpoint is named as such."""
    path = kernel_dir / source
    if not path.is_file():
        raise ModelError(f"[[models]] '{card.name}': checkpoint {source} not found in {kernel_dir}",
                         hint="checkpoint is a path relative to the kernel folder; train or copy the file there first")
    if path.stat().st_size == 0:
        raise ModelError(f"[[models]] '{card.name}': checkpoint {source} is empty (0 bytes)",
                         hint="the file was truncated or never written: save or copy the checkpoint again")
    try:
        checkpoint = raw if raw is not None else runtime.read_checkpoint(path, card.allow_pickle)
        return runtime.clean_state_dict(checkpoint, key)
    except Exception as exc:
        if not _looks_like_checkpoint(path):
            raise ModelError(f"[[models]] '{card.name}': {source} is not a checkpoint "
                             "(neither a torch.save file nor safetensors)",
                             hint="point checkpoint at the file torch.save or safetensors wrote") from None
        if isinstance(exc, runtime.ModelLoadError):
            raise ModelError(f"[[models]] '{card.name}': {source}: {checkpoints.plain(str(exc))}",
                             hint=_read_hint(str(exc), card)) from None
        raise ModelError(f"[[models]] '{card.name}': {source} cannot be read: {type(exc).__name__}: {checkpoints.plain(str(exc))}",
                         hint=_read_hint(str(exc), card)) from None


# torch.save writes a zip (torch >= 1.6) or, the legacy format, a pickle (protocol 2+ starts with 0x80);
# safetensors starts with the 8-byte length of its JSON header, whose first character is "{".
def _looks_like_checkpoint(path: Path) -> bool:
    with path.open("rb") as handle:
        head = handle.read(9)
    if head.startswith(b"PK\x03\x04") or head[:1] == b"\x80":
        return True
    return len(head) == 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < path.stat().st_size


def _read_hint(message: str, card: NetworkCard) -> str:
    if "No module named" in message:
        return ("the checkpoint names a class of a module the build cannot import: put the module under [code] "
                "include (the build imports the kernel's own code, as the kernel does), or re-save only the "
                "weights: torch.save(model.state_dict(), path)")
    if "weights_only" in message:
        return ("re-save only the weights: torch.save(model.state_dict(), path) (tensors, numbers and numpy arrays load "
                f"as they are); or, if you trust the file, set allow_pickle = true in [[models]] '{card.name}' "
                "(the build records it)")
    if "no key" in message:
        return "set checkpoint_key in [[models]] to the entry that holds the weights, or remove it to let kkb pick"
    return "save the checkpoint with torch.save(model.state_dict(), path) or safetensors"


# What runtime.offline() sets. The build sets them only while it builds a model: a dry run that follows in the
# same process must hand its sandbox the environment Kaggle gives, and Kaggle sets none of them.
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "NO_ALBUMENTATIONS_UPDATE")


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in OFFLINE_VARIABLES}
    runtime.offline()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


offline_environment = _offline  # for the other card kinds' build-time checks (builder.bundle.cards)


def fit_checkpoint(card: NetworkCard, model: Any, state: dict[str, Any],
                   source: str) -> tuple[dict[str, Any], str | None, LeftOut]:
    """The state dict matching the model, or a ModelError naming what does not match.

    With ``strict = false`` missing and unexpected keys are tolerated and returned (the build records
    them); the unexpected ones are not written. Shape mismatches are refused either way.
    """
    expected = model.state_dict()
    state, prefix = runtime.strip_common_prefix(state, list(expected))
    diff = runtime.diff_state_dicts(expected, state)
    if not diff.ok and (card.strict or diff.mismatched):
        raise ModelError(runtime.mismatch_message(card, source, diff), hint=_mismatch_hint(card, model, diff))
    left_out = LeftOut(missing=diff.missing, unexpected=diff.unexpected)
    return {name: value for name, value in state.items() if name not in diff.unexpected}, prefix, left_out


def _mismatch_hint(card: NetworkCard, model: Any, diff: runtime.StateDictDiff) -> str:
    classifier = str(getattr(model, "pretrained_cfg", {}).get("classifier") or "")
    for name, got, _ in diff.mismatched:
        if classifier and name.startswith(classifier) and got:
            return f"the checkpoint's classifier has {got[0]} outputs: set num_classes = {got[0]} in [[models]] '{card.name}'"
    tails = [{name.split(".", 1)[-1] for name in names} for names in (diff.missing, diff.unexpected)]
    if diff.missing and len(diff.missing) == len(diff.unexpected) and tails[0] == tails[1] and not diff.mismatched:
        return (f"the names differ, not the shapes: rename keys in [[models]] '{card.name}' with strip_prefix, "
                "key_rename = [[regex, replacement]] or add_prefix; strict = false only if the left-out keys do not matter")
    return (f"[[models]] '{card.name}' must describe the network the checkpoint was trained as: "
            "check arch, num_classes, in_chans and model_kwargs")


def to_half(card: NetworkCard, state: Mapping[str, Any]) -> dict[str, Any]:
    """Floating tensors to fp16 (integer buffers such as num_batches_tracked stay as they are)."""
    import torch

    halved = {}
    for name, tensor in state.items():
        if tensor.is_floating_point():
            converted = tensor.to(torch.float16)
            if bool(torch.isinf(converted).any()) and not bool(torch.isinf(tensor).any()):
                raise ModelError(f"[[models]] '{card.name}': half = true overflows {name} (values beyond fp16's 65504)",
                                 hint="set half = false for this model")
            tensor = converted
        halved[name] = tensor
    return halved


def output_path(card: NetworkCard, taken: Mapping[str, str], source: str) -> str:
    suffix = ".safetensors" if card.safetensors else ".pt"
    path = PurePosixPath(source).with_suffix(suffix)
    if path.as_posix() in taken:  # another card wrote this name with other settings
        path = path.with_name(f"{path.stem}.{card.name}{suffix}")
    return path.as_posix()


def write_checkpoint(card: NetworkCard, state: Mapping[str, Any], stage: Path, written: dict[str, str],
                     source: str) -> str:
    """Write the clean state dict into the weights stage, replacing the copied original."""
    relative = output_path(card, written, source)
    target = stage / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    _save(state, partial, card)
    os.chmod(partial, 0o644)  # safetensors writes 0600; the dataset files should read like any other
    os.replace(partial, target)
    original = stage / source
    if original != target and original.is_file():
        original.unlink()
    written[relative] = _sha256(target)
    return relative


def _save(state: Mapping[str, Any], path: Path, card: NetworkCard) -> None:
    import torch

    if card.safetensors:
        from safetensors.torch import save_file

        # safetensors refuses tensors that share storage (tied weights): give each its own.
        # One metadata entry only: safetensors writes a map's entries in a per-process random order,
        # and byte-identical files are what lets an unchanged model skip the upload.
        save_file({name: tensor.detach().clone().contiguous() for name, tensor in state.items()}, str(path),
                  metadata={"format": "pt"})
    else:
        torch.save(dict(state), path)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_written(card: NetworkCard, model: Any, path: Path) -> None:
    """Load the file the kernel will read, the way the kernel reads it."""
    try:
        state, _ = runtime.clean_state_dict(runtime.read_checkpoint(path))
        runtime.load_into(model, state, card, path.name)
    except runtime.ModelLoadError as exc:
        raise ModelError(f"[[models]] '{card.name}': the normalised checkpoint does not load back: {exc}",
                         hint="this is a kkb bug; please report it with the card") from None


@contextlib.contextmanager
def user_code_importable(kernel_dir: Path) -> Iterator[None]:
    """The kernel folder on sys.path, as the code dataset is in the kernel; its modules forgotten afterwards."""
    root = str(kernel_dir.resolve())
    before = set(sys.modules)
    sys.path.insert(0, root)
    try:
        yield
    finally:
        sys.path.remove(root)
        for name in set(sys.modules) - before:
            module_file = getattr(sys.modules[name], "__file__", None) or ""
            if module_file.startswith(root + os.sep):
                del sys.modules[name]


__all__ = ["fit_checkpoint", "offline_environment", "prepare_source", "read_training_checkpoint", "to_half",
           "user_code_importable", "verify_written", "write_checkpoint"]
