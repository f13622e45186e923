"""Build-time model cards: normalise each checkpoint and prove it loads, before anything is uploaded.

For each ``[[models]]`` card, :func:`prepare_models`

1. reads the training checkpoint (``state_dict``/``model``/``ema`` entries, ``module.`` and
   ``_orig_mod.`` prefixes) and keeps a clean state dict, optionally in fp16, as safetensors;
2. rebuilds ``timm.create_model(arch, pretrained=False, ...)`` on the CPU and loads it strictly,
   refusing the build with the missing/unexpected keys and shape mismatches named;
3. records what the kernel needs: the normalisation from timm's pretrained config (card values
   win) and the albumentations pipeline, checked to deserialise and run, custom transforms included.

The loading code is the kernel's own (``builder.kkb_runtime.cards.common.models``), so what loads here loads there.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import sys
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from builder.bundle.checkpoints import checkpoint_sources
from builder.errors import ModelError
from builder.kkb_runtime.cards.common import checkpoints
from builder.kkb_runtime.cards.common import models as runtime
from builder.kkb_runtime.cards.image import transforms as pipelines
from builder.project.cards import ImageCard, NetworkCard
from builder.project.spec import KernelSpec

RECORDED_VERSIONS = ("torch", "timm", "albumentations")


def prepare_models(spec: KernelSpec, kernel_dir: Path, weights_stage: Path) -> list[dict[str, Any]]:
    """Normalise every card's checkpoint into ``weights_stage`` and return the cards for ``kkb_kernel.json``."""
    written: dict[str, str] = {}  # output path -> sha256, so cards sharing a checkpoint do not clobber each other
    return [prepare_model(card, kernel_dir, weights_stage, written) for card in spec.models if isinstance(card, ImageCard)]


def prepare_model(card: ImageCard, kernel_dir: Path, weights_stage: Path, written: dict[str, str]) -> dict[str, Any]:
    """The user's code is importable for the whole card, as the code dataset is in the kernel: a factory lives
    there, and so do the classes an ``allow_pickle = true`` checkpoint names."""
    with user_code_importable(kernel_dir):
        return _prepare_model(card, kernel_dir, weights_stage, written)


def _prepare_model(card: ImageCard, kernel_dir: Path, weights_stage: Path, written: dict[str, str]) -> dict[str, Any]:
    model = build_model(card)
    normalisation = resolve_normalisation(card, model)
    check_output_width(card, model, normalisation)
    folds = [fold for source in checkpoint_sources(card, kernel_dir, must_exist=False)
             for fold in prepare_source(card, model, kernel_dir, source, weights_stage, written)]
    serialized = check_transforms(card, kernel_dir, normalisation)
    normalisation.update(_pipeline_normalisation(serialized))
    first = folds[0]
    return {
        **card.model_dump(mode="json"),
        **normalisation,
        "checkpoint": first["file"],
        "checkpoint_sha256": first["sha256"],
        "checkpoint_source": first["source"],
        "checkpoints": folds,  # one entry per fold, run one after another and averaged
        "checkpoint_key": None,  # the written files are plain state dicts
        "source_key": first["source_key"],
        "stripped_prefix": first["stripped_prefix"],
        "dtype": "float16" if card.half else "float32",
        "transforms": serialized,
        "transforms_source": card.transforms,
        "custom_transforms": pipelines.custom_classes(serialized) if serialized else [],
        "tta_random": check_random_tta(card, kernel_dir, normalisation),
        "num_params": sum(int(parameter.numel()) for parameter in model.parameters()),
        "built_with": {package: metadata.version(package) for package in RECORDED_VERSIONS},
    }


def prepare_source(card: NetworkCard, model: Any, kernel_dir: Path, source: str, weights_stage: Path,
                   written: dict[str, str]) -> list[dict[str, Any]]:
    """One checkpoint file: one fold, or several in one file (``{fold: state_dict}`` or a list), each written
    as a file of its own (``name.fold<K>.safetensors``)."""
    raw = _read_raw(card, kernel_dir, source)
    try:
        folds = checkpoints.fold_states(raw)
    except checkpoints.FoldsMalformed as exc:
        raise ModelError(f"[[models]] '{card.name}': {source}: {exc}",
                         hint=f"save the folds as {{0: model.state_dict(), 1: ...}} or a list of state dicts; "
                              f"fold key '{exc.key}' is the one to fix (or give each fold its own file)") from None
    if folds is None:
        return [prepare_checkpoint(card, model, kernel_dir, source, weights_stage, written, raw)]
    out = []
    for key, value in folds:
        try:
            state, source_key = runtime.clean_state_dict(value, card.checkpoint_key)
        except runtime.ModelLoadError as exc:
            raise ModelError(f"[[models]] '{card.name}': {source}: fold {key}: {checkpoints.plain(str(exc))}",
                             hint=f"fold {key} must hold the weights (a state dict, or checkpoint_key's entry); "
                                  "set checkpoint_key if every fold keeps them under one key") from None
        fold_source = PurePosixPath(source).with_suffix(f".fold{key}{PurePosixPath(source).suffix}").as_posix()
        out.append({**_prepare_state(card, model, state, fold_source, weights_stage, written, f"{source}#{key}"),
                    "source": f"{source}#{key}", "source_key": source_key})
    return out


def _read_raw(card: NetworkCard, kernel_dir: Path, source: str) -> Any:
    """The file as torch or safetensors reads it; a failure is reported as read_training_checkpoint reports it."""
    try:
        return runtime.read_checkpoint(kernel_dir / source, card.allow_pickle)
    except Exception:
        read_training_checkpoint(card, kernel_dir, source)  # raises the ModelError naming what is wrong
        raise


def prepare_checkpoint(card: NetworkCard, model: Any, kernel_dir: Path, source: str, weights_stage: Path,
                       written: dict[str, str], raw: Any = None) -> dict[str, Any]:
    """One fold: read, remap, fit strictly (or list what was left out), write, and load back."""
    state, source_key = read_training_checkpoint(card, kernel_dir, source, raw)
    return {**_prepare_state(card, model, state, source, weights_stage, written), "source_key": source_key}


def _prepare_state(card: NetworkCard, model: Any, state: dict[str, Any], source: str, weights_stage: Path,
                   written: dict[str, str], label: str | None = None) -> dict[str, Any]:
    """``label``: how messages name the checkpoint (``file.pth#3``: fold 3 of a file of folds)."""
    state = checkpoints.remap_keys(state, card.model_dump(mode="json"))
    state, prefix, left_out = fit_checkpoint(card, model, state, label or source)
    if card.half:
        state = to_half(card, state)
    relative = write_checkpoint(card, state, weights_stage, written, source)
    verify_written(card, model, weights_stage / relative)
    return {"file": relative, "sha256": written[relative], "source": source,
            "stripped_prefix": prefix, "left_out": left_out,
            # the card's opt-in, recorded where the build's output shows it (kkb_kernel.json)
            "loaded_with": "torch.load(weights_only=False) (allow_pickle = true)" if card.allow_pickle and
                           not source.endswith(".safetensors") else "weights_only"}


# --- checkpoint -----------------------------------------------------------------------------------

def read_training_checkpoint(card: NetworkCard, kernel_dir: Path, source: str | None = None,
                             raw: Any = None) -> tuple[dict[str, Any], str | None]:
    source = source or card.checkpoint_patterns[0]
    path = kernel_dir / source
    if not path.is_file():
        raise ModelError(f"[[models]] '{card.name}': checkpoint {source} not found in {kernel_dir}",
                         hint="checkpoint is a path relative to the kernel folder; train or copy the file there first")
    if path.stat().st_size == 0:
        raise ModelError(f"[[models]] '{card.name}': checkpoint {source} is empty (0 bytes)",
                         hint="the file was truncated or never written: save or copy the checkpoint again")
    try:
        checkpoint = raw if raw is not None else runtime.read_checkpoint(path, card.allow_pickle)
        return runtime.clean_state_dict(checkpoint, card.checkpoint_key)
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


def build_model(card: ImageCard) -> Any:
    with _offline():
        return _build_model(card)


def _build_model(card: ImageCard) -> Any:
    import timm

    if card.factory:
        return _build_with_factory(card)
    arch = str(card.arch)  # the spec requires arch where there is no factory
    if not timm.is_model(arch):
        close = difflib.get_close_matches(arch, timm.list_models(), n=3, cutoff=0.6)
        guess = f"did you mean {' or '.join(repr(name) for name in close)}? " if close else ""
        raise ModelError(f"[[models]] '{card.name}': timm {timm.__version__} has no architecture '{card.arch}'",
                         hint=f"{guess}list them with timm.list_models('{arch.split('_')[0]}*')")
    try:
        return runtime.create_model(_card_dict(card))
    except (TypeError, ValueError, RuntimeError, AssertionError) as exc:
        raise ModelError(f"[[models]] '{card.name}': timm.create_model failed for {runtime.describe_card(_card_dict(card))}: {exc}",
                         hint="check num_classes, in_chans and model_kwargs against the training config") from None


def _build_with_factory(card: ImageCard) -> Any:
    try:
        return runtime.create_model(_card_dict(card))
    except runtime.ModelLoadError as exc:
        raise ModelError(f"[[models]] '{card.name}': {exc}",
                         hint="factory names a function of the code dataset: 'package.module:function', "
                              "with the package under [code] include") from None
    except Exception as exc:
        text = checkpoints.plain(str(exc))
        downloads = any(word in text.lower() for word in ("offline", "hugging", "hf_hub", "connection", "download"))
        hint = ("build the model with pretrained=False (pass it in model_kwargs): the kernel has no internet, and "
                "the checkpoint holds every weight") if downloads else \
            f"check model_kwargs in [[models]] '{card.name}' against the factory's parameters"
        raise ModelError(f"[[models]] '{card.name}': {runtime.describe_card(_card_dict(card))} failed: "
                         f"{type(exc).__name__}: {text}", hint=hint) from None


def check_output_width(card: ImageCard, model: Any, normalisation: Mapping[str, Any]) -> None:
    """A factory's model, run once on zeros: its output width must be num_classes (timm's is by construction)."""
    if card.factory is None or card.features:
        return
    import torch

    height, width = normalisation["input_size"]
    with torch.no_grad():
        try:
            output = model.eval()(torch.zeros(2, card.in_chans, int(height), int(width)))
        except Exception as exc:
            raise ModelError(f"[[models]] '{card.name}': the model fails on a batch of 2x{card.in_chans}x{height}x{width}: "
                             f"{type(exc).__name__}: {checkpoints.plain(str(exc))}",
                             hint="check input_size and in_chans in the card") from None
    if not isinstance(output, torch.Tensor) or output.ndim != 2:
        shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise ModelError(f"[[models]] '{card.name}': the model returns {shape}, not a (batch, num_classes) tensor",
                         hint="make forward() return the logits as one 2-D tensor")
    if output.shape[1] != card.num_classes:
        raise ModelError(f"[[models]] '{card.name}': the model outputs {output.shape[1]} values per image, "
                         f"num_classes = {card.num_classes}",
                         hint=f"set num_classes = {output.shape[1]} or fix the factory's model_kwargs")


def _card_dict(card: NetworkCard) -> dict[str, Any]:
    return card.model_dump(mode="json")


def fit_checkpoint(card: NetworkCard, model: Any, state: dict[str, Any],
                   source: str | None = None) -> tuple[dict[str, Any], str | None, dict[str, list[str]]]:
    """The state dict matching the model, or a ModelError naming what does not match.

    With ``strict = false`` missing and unexpected keys are tolerated and returned (the build records
    them); the unexpected ones are not written. Shape mismatches are refused either way.
    """
    source = source or card.checkpoint_patterns[0]
    expected = model.state_dict()
    state, prefix = runtime.strip_common_prefix(state, list(expected))
    diff = runtime.diff_state_dicts(expected, state)
    if not diff.ok and (card.strict or diff.mismatched):
        raise ModelError(runtime.mismatch_message(_card_dict(card), source, diff), hint=_mismatch_hint(card, model, diff))
    left_out = {"missing": list(diff.missing), "unexpected": list(diff.unexpected)}
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


def output_path(card: NetworkCard, taken: Mapping[str, str], source: str | None = None) -> str:
    suffix = ".safetensors" if card.safetensors else ".pt"
    path = PurePosixPath(source or card.checkpoint_patterns[0]).with_suffix(suffix)
    if path.as_posix() in taken:  # another card wrote this name with other settings
        path = path.with_name(f"{path.stem}.{card.name}{suffix}")
    return path.as_posix()


def write_checkpoint(card: NetworkCard, state: Mapping[str, Any], stage: Path, written: dict[str, str],
                     source: str | None = None) -> str:
    """Write the clean state dict into the weights stage, replacing the copied original."""
    source = source or card.checkpoint_patterns[0]
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
        runtime.load_into(model, state, _card_dict(card), path.name)
    except runtime.ModelLoadError as exc:
        raise ModelError(f"[[models]] '{card.name}': the normalised checkpoint does not load back: {exc}",
                         hint="this is a kkb bug; please report it with the card") from None


# --- normalisation --------------------------------------------------------------------------------

def resolve_normalisation(card: ImageCard, model: Any) -> dict[str, Any]:
    """mean/std/input size/interpolation: the card's values, else timm's pretrained config (of the
    first timm module inside a factory's model)."""
    cfg = dict(getattr(model, "pretrained_cfg", None) or {})
    if not cfg and hasattr(model, "modules"):
        cfg = next((dict(module.pretrained_cfg) for module in model.modules() if getattr(module, "pretrained_cfg", None)), {})
    size = card.input_size or tuple(cfg.get("input_size", (3, 224, 224))[-2:])
    interpolation = card.interpolation or str(cfg.get("interpolation") or "bilinear")
    if interpolation not in pipelines.INTERPOLATIONS:
        raise ModelError(f"[[models]] '{card.name}': interpolation '{interpolation}' is not one of "
                         f"{', '.join(pipelines.INTERPOLATIONS)}", hint="use timm's names, e.g. bilinear or bicubic")
    return {
        "input_size": [int(size[0]), int(size[1])],
        "mean": _per_channel(card, "mean", card.mean or cfg.get("mean") or (0.485, 0.456, 0.406), card.mean is not None),
        "std": _per_channel(card, "std", card.std or cfg.get("std") or (0.229, 0.224, 0.225), card.std is not None),
        "interpolation": interpolation,
    }


def _per_channel(card: ImageCard, field: str, values: Any, from_card: bool) -> list[float]:
    numbers = [float(value) for value in values]
    if len(numbers) == card.in_chans:
        return numbers
    if len(numbers) == 1:
        return numbers * card.in_chans
    if not from_card and card.in_chans == 1:
        return [float(np.mean(values))]  # a grayscale model fine-tuned from an RGB config
    raise ModelError(f"[[models]] '{card.name}': {field} has {len(values)} values for in_chans = {card.in_chans}",
                     hint=f"set {field} in [[models]] '{card.name}' with one value per input channel")


# --- transforms -----------------------------------------------------------------------------------

def check_transforms(card: ImageCard, kernel_dir: Path, normalisation: Mapping[str, Any]) -> dict[str, Any] | None:
    """The card's serialised pipeline, proven to deserialise and to run on an image (None: kkb's default)."""
    if card.transforms is None or ":" in card.transforms:  # a factory: builder.bundle.cards.image checks it
        return None
    path = kernel_dir / card.transforms
    if not path.is_file():
        raise ModelError(f"[[models]] '{card.name}': transforms file {card.transforms} not found in {kernel_dir}",
                         hint="save the inference pipeline with A.save(pipeline, path) or json.dump(A.to_dict(pipeline), f)")
    try:
        serialized = pipelines.read_pipeline_file(path)
        with user_code_importable(kernel_dir):
            pipeline = pipelines.inference_pipeline({**_card_dict(card), **normalisation, "transforms": serialized})
            _check_runs(card, pipeline, normalisation)
    except pipelines.TransformsError as exc:
        raise ModelError(f"[[models]] '{card.name}': {card.transforms}: {exc}",
                         hint="custom transforms must live in a module of the code bundle (importable from the kernel folder)") from None
    _check_normalize(card, serialized)
    return serialized


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


def _check_runs(card: ImageCard, pipeline: Any, normalisation: Mapping[str, Any]) -> None:
    height, width = normalisation["input_size"]
    # Twice the input size: a pipeline that crops must still find enough pixels.
    image = np.random.default_rng(0).integers(0, 256, (2 * height, 2 * width, card.in_chans), dtype=np.uint8)
    try:
        output = pipeline(image=image)["image"]
    except Exception as exc:
        raise pipelines.TransformsError(f"the pipeline fails on a {2 * height}x{2 * width} test image: "
                                        f"{type(exc).__name__}: {exc}") from None
    channels = output.shape[0] if type(output).__module__.startswith("torch") else output.shape[-1]
    if output.ndim != 3 or channels != card.in_chans:
        raise pipelines.TransformsError(f"the pipeline outputs an image of shape {tuple(output.shape)}, "
                                        f"not {card.in_chans} channel(s)")


def check_random_tta(card: ImageCard, kernel_dir: Path, normalisation: Mapping[str, Any]) -> dict[str, Any] | None:
    """The random TTA pipeline, proven to deserialise and run before the card's own, embedded in the card."""
    if card.tta_random is None:
        return None
    where = card.tta_random.transforms
    path = kernel_dir / where
    if not path.is_file():
        raise ModelError(f"[[models]] '{card.name}': tta_random.transforms file {where} not found in {kernel_dir}",
                         hint="save the augmentations with A.save(pipeline, path) or json.dump(A.to_dict(pipeline), f)")
    try:
        serialized = pipelines.read_pipeline_file(path)
        with user_code_importable(kernel_dir):
            augment = pipelines.pipeline_from_dict(serialized)
            _check_runs(card, augment, {"input_size": [max(8, int(side) // 2) for side in normalisation["input_size"]]})
    except pipelines.TransformsError as exc:
        raise ModelError(f"[[models]] '{card.name}': tta_random.transforms {where}: {exc}",
                         hint="custom transforms must live in a module of the code bundle") from None
    return {"transforms": serialized, "passes": card.tta_random.passes, "seed": card.tta_random.seed}


def _pipeline_normalisation(serialized: Mapping[str, Any] | None) -> dict[str, Any]:
    """When the user's pipeline normalises, the card records its values: the ones the kernel applies."""
    own = pipelines.normalize_params(serialized) if serialized else None
    if own is None:
        return {"normalize_in_pipeline": False}
    recorded: dict[str, Any] = {"normalize_in_pipeline": True}
    for field in ("mean", "std"):
        if isinstance(own.get(field), (list, tuple)):
            recorded[field] = [float(value) for value in own[field]]
    return recorded


def _check_normalize(card: ImageCard, serialized: Mapping[str, Any]) -> None:
    """A Normalize in the pipeline that contradicts the card's mean/std means two sources of truth."""
    own = pipelines.normalize_params(serialized)
    if own is None:
        return
    for field in ("mean", "std"):
        stated = getattr(card, field)
        if stated is not None and not np.allclose(np.ravel(own.get(field, ())), np.ravel(stated)):
            raise ModelError(f"[[models]] '{card.name}': {field} = {list(stated)} but the pipeline's Normalize "
                             f"has {field} = {own.get(field)}",
                             hint=f"remove {field} from the card or the Normalize from the pipeline: the kernel uses the pipeline's")


__all__ = ["prepare_models"]
