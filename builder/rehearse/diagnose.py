"""Why a dry run failed, when the reason is not Kaggle's verdict alone: memory, disk, input layout,
and the failures that say nothing about Kaggle ("not rehearsed here").

Each function reads an :class:`~builder.run.execute.ExecutionResult` (its error, traceback and log) and
returns a sentence, or None when the pattern does not apply. :mod:`builder.rehearse.verdict` decides the
verdict; this module only recognises what happened.

- **Out of memory**: the run ended by the sandbox's memory limit (its cgroup's OOM killer, or kkb's
  PSS watch: :mod:`builder.run.memory`), ``MemoryError``, numpy's "Unable to allocate",
  ``std::bad_alloc``, CUDA's out-of-memory, a step killed by SIGKILL (the OOM killer's signal), or a
  crash (SIGSEGV, SIGABRT, a dead kernel) while the run's memory was near the limit — on Kaggle all of
  these end the session.
- **Input layout**: a ``No such file or directory`` for a path under ``input/`` whose counterpart in
  the other layout (``competitions/<slug>`` vs ``<slug>``) exists: the reason names both paths.
- **Not rehearsed**: a ``No module named X`` where Kaggle's image has X and this environment lacks
  it, an ``ImportError`` that names such a package (tqdm's "IProgress not found. Please update jupyter and
  ipywidgets"), or a step that needs CUDA on a machine without a GPU while the machine shape has one. Kaggle
  might well run both; this machine cannot say.
- **Version skew** explains a failure only when the skewed package can: the run failed inside it with an
  error no version spares the kernel from (not a shape, dtype, missing-file, memory or blocked-network
  error: :data:`ANY_VERSION`), or the kernel's own frame failed on its API (``AttributeError``/``ImportError``
  naming one of its modules, a call whose signature changed) and the image's version has what it missed, or there
  is no evidence either way (:mod:`builder.rehearse.image_check`: a ``kkb env`` environment with the image's version
  is asked). Otherwise the verdict is Kaggle's, with the skew named beside it (:func:`skew_beside`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from builder.kkb_runtime.vocabulary import Layout
from builder.project.image import image_package_for_module, load_image
from builder.rehearse.image_check import ImageAnswer, image_has
from builder.run.execute import ExecutionResult
from builder.run.image_env import cache_root
from builder.run.limits import size_text
from builder.run.memory import near_limit
from builder.run.sandbox import blocked_network
from builder.run.skew import Skew, skew_in_failure

_MEMORY = re.compile(r"\bMemoryError\b|Unable to allocate|Cannot allocate memory|std::bad_alloc|"
                     r"CUDA out of memory|OutOfMemoryError")
_KILLED = re.compile(r"failed with exit code -9\b|exit code 137\b")
_CRASHED = re.compile(r"failed with exit code -(?:6|7|11)\b|exit code 13[49]\b|DeadKernelError|Kernel died")
_STEP_PEAK = re.compile(r"\[kkb\] step '([^']+)' peak memory: (\d+) bytes")
_MISSING_PATH = re.compile(r"No such file or directory: '([^']+)'|FileNotFoundError: \[Errno 2\][^\n]*?'([^']+)'")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_IMPORT_ERROR = re.compile(r"^(?:ImportError|ModuleNotFoundError): (.+)$", re.MULTILINE)
# Packages of the image named like English words an import error says anyway ("... not on the path"): never taken
# for the package an error names.
_PLAIN_WORDS = frozenset({"path", "future", "mock", "test", "pip", "setuptools", "wheel"})
_NEEDS_CUDA = re.compile(r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs are available|"
                         r"no CUDA-capable device|CUDA driver initialization failed|NVIDIA driver on your system is too old|"
                         r"Attempting to deserialize object on a CUDA device")
_LEGACY_PREFIXES = {"competitions": 1, "datasets": 2, "models": 2, "notebooks": 2}
_NETWORK = re.compile(r"Network is unreachable|Temporary failure in name resolution|Name or service not known|"
                      r"NameResolutionError|NewConnectionError|Failed to establish a new connection|MaxRetryError|"
                      r"Connection refused|ConnectionError|ConnectTimeout|LocalEntryNotFoundError|OfflineModeIsEnabled|"
                      r"couldn't connect to|Failed to resolve|gaierror|urlopen error")
# With an access in the sandbox's network log, a looser wording is enough (a library's own "check your connection").
_NETWORK_LOOSE = re.compile(r"connect|offline|internet|download|resolve|unreachable", re.IGNORECASE)
# Errors every version of a package raises for the kernel's own mistakes: a skew in the traceback does not explain them.
ANY_VERSION: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a shape mismatch", re.compile(
        r"size mismatch|shape mismatch|cannot be multiplied|not aligned|The size of tensor a|operands could not be "
        r"broadcast|index out of range in self|Expected input batch_size|must match the size of tensor|Sizes of tensors "
        r"must match|cannot reshape array|shape '\[[^\]]*\]' is invalid|Given groups=\d+, weight of size|"
        r"Length of values \(\d+\) does not match length of index")),
    ("a dtype mismatch", re.compile(
        r"expected scalar type|Expected object of scalar type|Input type \([^)]*\) and weight type|could not convert "
        r"string to float|invalid literal for int\(\)|to have the same dtype|found dtype \w+ but expected")),
    ("a missing file", re.compile(_MISSING_PATH.pattern + r"|FileNotFoundError|does not appear to have a file named|"
                                  r"is not a local folder and is not a valid model identifier")),
    ("memory", _MEMORY),
)
# The kernel's own frame failing on a package's API: a removed attribute or module, a changed signature.
_API = (re.compile(r"module '(?P<module>[\w.]+)' has no attribute '(?P<name>\w+)'"),
        re.compile(r"cannot import name '(?P<name>\w+)' from '(?P<module>[\w.]+)'"),
        re.compile(r"No module named '(?P<module>\w+\.[\w.]+)'"))
_SIGNATURE = re.compile(r"\w+\(\) (?:got an unexpected keyword argument '\w+'|takes (?:from \d+ to )?\d+ positional "
                        r"arguments? but \d+ (?:were|was) given|missing \d+ required (?:positional|keyword-only) argument)")
_SOURCE_LINE = re.compile(r'File "[^"]+", line \d+[^\n]*\n\s+(\S[^\n]*)')


def failure_text(result: ExecutionResult) -> str:
    """Everything the run said about its failure: error, traceback, the log's stderr."""
    stderr = "".join(entry.get("data", "") for entry in result.log if entry.get("stream_name") == "stderr")
    return "\n".join(part for part in (result.ename, result.evalue, result.traceback_tail, stderr) if part)


def out_of_memory(result: ExecutionResult) -> tuple[str, int] | None:
    """``(what ran out, its peak bytes)`` when the run died for memory, else None."""
    if result.ok or result.timed_out:
        return None
    text = failure_text(result)
    if result.memory_exceeded:
        where = f"step '{result.memory_step}'" if result.memory_step else (
            f"cell {result.failed_cell}" if result.failed_cell is not None else "the notebook")
        return f"{where} was ended by the memory limit ({result.memory_accounting})", result.peak_rss_bytes
    match = _MEMORY.search(text)
    crashed = _CRASHED.search(text) is not None and near_limit(result.peak_rss_bytes, result.memory_limit_bytes)
    if match is None and not _KILLED.search(text) and not crashed:
        return None
    if match is None:
        cause = ("killed by SIGKILL, the out-of-memory killer's signal" if _KILLED.search(text) else
                 f"crashed at {size_text(result.peak_rss_bytes)}, near the limit")
    else:
        cause = "MemoryError" if match.group(0) in ("Unable to allocate", "Cannot allocate memory") else match.group(0)
    peaks = _STEP_PEAK.findall(text)
    step = _step_name(text) or (peaks[-1][0] if peaks else None)
    peak = max([result.peak_rss_bytes, *(int(bytes_) for name, bytes_ in peaks if name == step)])
    where = f"step '{step}'" if step else (f"cell {result.failed_cell}" if result.failed_cell is not None else "the notebook")
    return f"{where} ran out of memory ({cause})", peak


def _step_name(text: str) -> str | None:
    match = re.search(r"step '([^']+)' failed", text)
    return match.group(1) if match else None


def layout_mismatch(result: ExecutionResult, layout: Layout = Layout.CURRENT) -> str | None:
    """A missing ``input/`` path whose counterpart in the other layout exists, in words, else None."""
    input_dir = Path(result.root) / "input"
    exists = _existence(result, input_dir)
    for match in _MISSING_PATH.finditer(failure_text(result)):
        missing = match.group(1) or match.group(2)
        relative = _under_input(missing, Path(result.root))
        if relative is None or exists(relative):
            continue
        other = _other_layout(relative, input_dir, exists)
        if other is None:
            continue
        which = Layout.LEGACY if other.parts[0] not in _LEGACY_PREFIXES else Layout.CURRENT
        rehearse = ", pass --legacy-layout to rehearse it" if which is Layout.LEGACY else ""
        return (f"it read /kaggle/input/{relative}, which does not exist in the {layout} input layout; "
                f"Kaggle has it at /kaggle/input/{other} (the {which} layout{rehearse})")
    return None


def _under_input(path: str, root: Path) -> PurePosixPath | None:
    for base in ("/kaggle/input/", f"{root}/input/"):
        if path.startswith(base):
            relative = PurePosixPath(path[len(base):])
            return relative if relative.parts else None
    return None


def _existence(result: ExecutionResult, input_dir: Path) -> Callable[[PurePosixPath], bool]:
    """Whether a path under ``input/`` existed for the kernel: through the mounts' host sources, since
    with namespaces the folders under ``input/`` are only empty mount points on the host."""
    def exists(relative: PurePosixPath) -> bool:
        path = input_dir / relative
        for source, target in result.mounts:
            if path == target or target in path.parents:
                return (Path(source) / path.relative_to(target)).exists()
        return path.exists()

    return exists


def _other_layout(relative: PurePosixPath, input_dir: Path, exists: Callable[[PurePosixPath], bool]) -> PurePosixPath | None:
    """The same file in the other layout, if it exists here: ``x/f`` ↔ ``competitions/x/f``, ``datasets/o/x/f``."""
    parts = relative.parts
    if parts[0] in _LEGACY_PREFIXES and len(parts) > _LEGACY_PREFIXES[parts[0]]:
        legacy = PurePosixPath(*parts[_LEGACY_PREFIXES[parts[0]]:])
        return legacy if exists(legacy) else None
    for prefix in ("competitions/*", "datasets/*/*", "models/*/*", "notebooks/*/*"):
        for hit in sorted(input_dir.glob(f"{prefix}")):
            candidate = PurePosixPath(hit.relative_to(input_dir).as_posix(), *parts[1:])
            if hit.name == parts[0] and exists(candidate):
                return candidate
    return None


def not_rehearsed(result: ExecutionResult, shape_has_gpu: bool) -> str | None:
    """Why this machine cannot tell what Kaggle would do, else None."""
    if result.ok:
        return None
    text = failure_text(result)
    where = f"step '{_step_name(text)}'" if _step_name(text) else (
        f"cell {result.failed_cell}" if result.failed_cell is not None else "the notebook")
    skewed = _skewed(result, text, where)
    if skewed is not None:
        return skewed
    missing = _missing_image_package(text, where)
    if missing is not None:
        return missing
    if result.isolation == "python":
        absolute = _absolute_kaggle_read(result, text)
        if absolute is not None:
            return (f"not rehearsed here: {where} reads {absolute}, an absolute /kaggle path, and this sandbox has none "
                    f"({result.isolation_note or 'python isolation'}); install bubblewrap or allow user namespaces to rehearse it")
    if shape_has_gpu and _NEEDS_CUDA.search(text) and not cuda_here():
        return (f"not rehearsed here: {where} needs CUDA and this machine has no GPU; the machine shape has one: "
                f"rehearse it on Kaggle's machines (kkb push, then kkb status)")
    return None


def _missing_image_package(text: str, where: str) -> str | None:
    """A package of Kaggle's image the run needed and this environment lacks, in words, else None."""
    for module in _NO_MODULE.findall(text):
        found = image_package_for_module(module)
        if found is not None and not _importable(module):
            return (f"not rehearsed: Kaggle's image has {found[0]} {found[1]} ({load_image().captured}); {where} imports "
                    f"'{module}', which is not installed here; install it here to rehearse ({_install_fix(*found)})")
    for message in _IMPORT_ERROR.findall(text):  # an import that names the package it lacks in its own words
        for word in re.findall(r"(?<![\w/.-])[A-Za-z_][\w-]*(?![\w/-])", message):
            found = image_package_for_module(word) if word.lower() not in _PLAIN_WORDS else None
            if found is not None and not _importable(word):
                return (f"not rehearsed: Kaggle's image has {found[0]} {found[1]} ({load_image().captured}); {where} "
                        f"needs it ({message.strip()}), and it is not installed here; install it here to rehearse "
                        f"({_install_fix(*found)})")
    return None


def _install_fix(distribution: str, version: str) -> str:
    return (f"pip install {distribution}=={version.split('+')[0]}, the image's version; or kkb env, then "
            "kkb dry-run --image-env")


def _skewed(result: ExecutionResult, text: str, where: str) -> str | None:
    """The skewed package that explains the failure, in words, else None (see the module docstring)."""
    api = _api_skew(text, result.version_skew)
    inside = skew_in_failure(text, result.version_skew) if api is None else None
    evidence = _image_evidence(api)
    if api is not None and evidence is not None and not evidence.has:
        return None  # the image's version lacks it too: Kaggle fails the same (skew_beside names it)
    if api is not None:
        asked = f"; the image's version has it (asked in kkb env's {evidence.where})" if evidence is not None else ""
        skew, how = api[0], f"failed on an API of {api[0].distribution} ({api[1]}{asked})"
    elif inside is not None and any_version_error(result, text) is None:
        skew, how = inside, f"failed inside {inside.distribution}"
    else:
        return None
    return (f"not rehearsed: {where} {how}, which is {skew.local} here and {skew.image} on Kaggle's image "
            f"({load_image().captured}); rehearse it with the image's versions (kkb env, then kkb dry-run --image-env)")


def any_version_error(result: ExecutionResult, text: str) -> str | None:
    """What kind of error the failure is when every version of a package raises it (shape, dtype, missing file,
    memory, blocked network): the kernel's failure on Kaggle too, whatever the versions. None otherwise."""
    if _NETWORK.search(text) or (blocked_network(result.root) and _NETWORK_LOOSE.search(text)):
        return "a blocked network access"
    return next((kind for kind, pattern in ANY_VERSION if pattern.search(text)), None)


def _api_skew(text: str, skews: tuple[Skew, ...]) -> tuple[Skew, str, tuple[str, str | None] | None] | None:
    """The skew whose API the failure names (a module's missing attribute or name, a submodule gone), or whose
    call in the failing line has another signature, with the error's words and what was missing (module, name)."""
    by_module = {module: skew for skew in skews for module in skew.modules}
    for pattern in _API:
        for match in pattern.finditer(text):
            skew = by_module.get(match.group("module").split(".")[0])
            if skew is not None:
                return skew, match.group(0), (match.group("module"), match.groupdict().get("name"))
    signature = _SIGNATURE.search(text)
    lines = _SOURCE_LINE.findall(text)
    if signature is not None and lines:
        used = set(re.findall(r"\b([A-Za-z_]\w*)\.", lines[-1]))
        skew = next((by_module[name] for name in sorted(used) if name in by_module), None)
        if skew is not None:
            return skew, f"{signature.group(0)} in `{lines[-1].strip()}`", None
    return None


_ANSWERS: dict[tuple[Skew, str, str | None, str], ImageAnswer] = {}  # the verdict and its "beside" line ask once


def _image_evidence(api: tuple[Skew, str, tuple[str, str | None] | None] | None) -> ImageAnswer | None:
    """The image's version asked for what the failure missed, None without evidence (an environment built later is
    asked then)."""
    if api is None or api[2] is None:
        return None
    key = (api[0], api[2][0], api[2][1], str(cache_root()))
    if key not in _ANSWERS:
        answer = image_has(api[0], api[2][0], api[2][1])
        if answer is None:
            return None
        _ANSWERS[key] = answer
    return _ANSWERS[key]


def skew_beside(result: ExecutionResult) -> str | None:
    """A skewed package the failure ran through that does not explain it, named beside Kaggle's verdict."""
    if result.ok:
        return None
    text = failure_text(result)
    api = _api_skew(text, result.version_skew)
    evidence = _image_evidence(api)
    if api is not None and evidence is not None and not evidence.has:
        return (f"version skew beside it: {api[0].describe()}, but the image's version lacks it too ({api[1]}; asked in "
                f"kkb env's {evidence.where}): Kaggle fails the same")
    skew = skew_in_failure(text, result.version_skew)
    kind = any_version_error(result, text)
    if skew is None or kind is None:
        return None
    return f"version skew beside it: {skew.describe()}, but {kind} fails the same with any version"


def _absolute_kaggle_read(result: ExecutionResult, text: str) -> str | None:
    """A missing ``/kaggle/...`` path that the sandbox has under its root (so it exists on Kaggle), else None."""
    input_dir = Path(result.root) / "input"
    exists = _existence(result, input_dir)
    for match in _MISSING_PATH.finditer(text):
        missing = match.group(1) or match.group(2)
        if not missing.startswith("/kaggle/"):
            continue
        relative = _under_input(missing, Path(result.root))
        if relative is None or exists(relative):
            return missing  # /kaggle/working/..., /kaggle/temp/..., or an input path that is there
    return None


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def cuda_here() -> bool:
    """A GPU this machine can use (driver device nodes or nvidia-smi), without importing torch."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi") is not None


_DISK_FULL = re.compile(r"[^\n]*(?:\[Errno 28\] No space left on device|\[Errno 122\] Disk quota exceeded|"
                        r"No space left on device|Disk quota exceeded|ENOSPC)[^\n]*")


def disk_full(result: ExecutionResult) -> str | None:
    """The run failed because a disk it wrote was full (``ENOSPC``): on Kaggle a run that needs more disk than its
    machine has ends as one that needs more memory (Notebook Exceeded Allowed Compute). The line that says so is
    quoted."""
    if result.ok:
        return None
    text = failure_text(result)
    match = _DISK_FULL.search(text)
    if match is None:
        return None
    step = _step_name(text)
    where = f"step '{step}'" if step else f"cell {result.failed_cell}" if result.failed_cell is not None else "the run"
    return (f"{where} ran out of disk: {match.group(0).strip()[:300]} (a run that needs more disk than Kaggle's machine "
            "has fails the same way there)")


def disk_overflow(result: ExecutionResult) -> str | None:
    if not result.working_limit_bytes:
        return None
    if result.disk_exceeded or result.working_bytes > result.working_limit_bytes:
        return (f"/kaggle/working grew to {size_text(result.working_bytes)} > the {size_text(result.working_limit_bytes)} "
                f"Kaggle keeps there{' (the run was stopped)' if result.disk_exceeded else ''}")
    return None
