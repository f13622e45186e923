"""How a sandboxed kernel is started: which isolation this machine allows, and the launcher's argv.

Three isolations, strongest first; ``auto`` takes the first that works here and says why it skipped
the others (the dry-run report shows both):

``bwrap``
    bubblewrap, the well-kept tool for unprivileged namespaces: a new root holding only what a Kaggle image has of
    this machine (:mod:`builder.run.host_view`: the system folders as read-only binds, ``/etc``'s unreadable files
    masked, the interpreter's folders at their own paths), a private ``/tmp`` and ``/root``, its own PID namespace with a fresh ``/proc``
    (``--unshare-pid --proc /proc``), a minimal ``/dev`` (``--dev``: null, zero, full, random, urandom,
    tty, private shm and pts; the GPU's nodes only when the run uses one), ``--unshare-net`` (only
    loopback), and ``/kaggle/input`` (read-only), ``/kaggle/working``, ``/kaggle/temp`` bound from the
    sandbox root. Used when ``bwrap`` is on ``PATH`` and its probe passes.
``namespace``
    The same file system built by kkb's own launcher (``guest/launch.py``): Linux user, mount
    network and PID namespaces, the same minimal ``/dev`` and fresh ``/proc``, bind mounts and
    ``pivot_root``, through ``ctypes`` (no tool needed). Needs root or unprivileged user namespaces.
``python``
    Where the OS allows neither, and it does NOT confine the kernel: the kernel runs as the user, sees the
    host's processes and devices, and can write wherever the user can. The sandbox is a temporary folder reached through
    ``$KKB_KAGGLE_ROOT`` only (absolute ``/kaggle`` paths do not exist), inputs are read-only copies,
    and the network is cut for Python processes (``guest/sitecustomize.py``).

In every mode the sandbox root stays visible, writable, at its own path, so ``$KKB_KAGGLE_ROOT``
(kkb's runtime, the local Kaggle's runner, the evaluation-API supervisor) keeps working; inside the
namespaces the same folders are also ``/kaggle/...``. The rest of the file system is an overlay where the
machine allows one (:mod:`builder.run.overlay`), else read-only. In both namespace modes nothing of the
host is reachable through ``/proc/*/root``, ``cwd`` or ``fd`` (only the kernel's own processes exist there), no
file descriptor of the launcher is inherited, the kernel keeps no capability (root too), ``/proc/sys`` and its
siblings are read-only, its tasks are limited (:mod:`builder.run.processes`) and its ``/dev/shm`` is sized to the
memory limit. Memory is counted by the host, as Kaggle's container counts it (:mod:`builder.run.memory`, with
:mod:`builder.run.shared_memory`), in every mode.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import Isolation, RootFilesystem
from builder.run.guest.newroot import SYSTEM_FOLDERS, gpu_nodes
from builder.run.host_view import interpreter_folders, masked_paths
from builder.run.overlay import bwrap_folder_args, launcher_option
from builder.run.processes import ProcessLimit

# What a caller may ask for: an isolation, or "auto" (the strongest this machine allows).
IsolationRequest = Isolation | Literal["auto"]
MODES: tuple[Isolation, ...] = tuple(Isolation)
# What each isolation gives the kernel, for the report.
DESCRIPTIONS: dict[Isolation, str] = {
    Isolation.BWRAP: "bubblewrap: real /kaggle paths, no network",
    Isolation.NAMESPACE: "kkb's namespace launcher: real /kaggle paths, no network",
    Isolation.PYTHON: "portable, does NOT confine the kernel (it sees the host's processes and devices and can write "
                 "wherever you can): no /kaggle paths (only $KKB_KAGGLE_ROOT), network cut for Python only",
}
GUEST_DIR = Path(__file__).resolve().parent / "guest"
LAUNCH = GUEST_DIR / "launch.py"
PROBE_SECONDS = 30

@dataclass(frozen=True)
class IsolationChoice:
    """The isolation a run uses, and why stronger ones were not used (empty when none was skipped)."""

    mode: Isolation
    skipped: tuple[str, ...] = ()

    def describe(self) -> str:
        what = DESCRIPTIONS[Isolation(self.mode)]
        return what + ("" if not self.skipped else f" (not used: {'; '.join(self.skipped)})")


def choose_isolation(requested: IsolationRequest = "auto") -> IsolationChoice:
    """The strongest isolation this machine allows (``auto``), or the requested one, or an error saying why not.

    ``$KKB_SANDBOX_ISOLATION`` overrides ``auto``, for a machine where a probe passes but kernels
    still cannot start.
    """
    requested = _resolved(requested)
    if requested == Isolation.PYTHON:
        return IsolationChoice(Isolation.PYTHON)
    skipped: list[str] = []
    for mode in (Isolation.BWRAP, Isolation.NAMESPACE):  # strongest first; the portable mode always works
        if requested not in ("auto", mode):
            continue
        problem = probe(mode)
        if problem is None:
            return IsolationChoice(mode, tuple(skipped))
        if requested == mode:
            raise DryRunError(f"the {mode} sandbox cannot start here: {problem}",
                              hint="use isolation 'auto' to fall back, or KKB_SANDBOX_ISOLATION=python")
        skipped.append(f"{mode}: {problem}")
    return IsolationChoice(Isolation.PYTHON, tuple(skipped))


def _resolved(requested: IsolationRequest) -> IsolationRequest:
    """``requested``, with ``$KKB_SANDBOX_ISOLATION`` in place of ``auto``; an unknown one refused."""
    if requested == "auto":
        override = os.environ.get("KKB_SANDBOX_ISOLATION", "auto")
        if override not in ("auto", *MODES):
            raise DryRunError(f"KKB_SANDBOX_ISOLATION={override!r} is not a sandbox isolation",
                              hint="use bwrap, namespace, python, or unset it")
        requested = override  # type: ignore[assignment]
    if requested not in ("auto", *MODES):
        raise DryRunError(f"unknown sandbox isolation '{requested}'", hint="use auto, bwrap, namespace or python")
    return requested


def probe_soon() -> None:
    """Start the probe :func:`choose_isolation` (``auto``) will want first, in a background thread: a sandbox started
    by the probe is a process of its own, and the caller's work goes on meanwhile (:func:`probe` waits for it). A
    refused ``$KKB_SANDBOX_ISOLATION`` starts nothing here: :func:`choose_isolation` says so where the run needs it."""
    try:
        mode = _resolved("auto")
    except DryRunError:
        return
    if mode in ("auto", Isolation.BWRAP):
        threading.Thread(target=probe, args=(Isolation.BWRAP,), name="kkb-sandbox-probe", daemon=True).start()


_PROBING = threading.Lock()  # one probe of a mode at a time: a second caller waits for the first one's answer


def probe(mode: Isolation) -> str | None:
    """None when ``mode`` works on this machine, else why not (one line); probed once per process."""
    with _PROBING:
        return _probe(mode)


@functools.cache
def _probe(mode: Isolation) -> str | None:
    if not sys.platform.startswith("linux"):
        return "Linux namespaces only exist on Linux"
    if mode == "bwrap":
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            return "bwrap is not installed"
        with tempfile.TemporaryDirectory(prefix="kkb-probe-") as folder:
            root = Path(folder)
            for name in ("input", "working", "temp", ".sandbox/tmp"):
                (root / name).mkdir(parents=True)
            argv = bwrap_argv(root, [], [], memory_bytes=None) + [
                "/bin/sh", "-c", "touch /kaggle/working/x && ! touch /kaggle/input/x 2>/dev/null && grep -q bwrap /proc/1/comm"]
            return _run_probe(argv)
    return _run_probe([sys.executable, str(LAUNCH), "--probe-root"])


def _run_probe(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_SECONDS)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if out.returncode == 0:
        return None
    lines = (out.stderr or out.stdout).strip().splitlines()
    return (lines[-1] if lines else f"probe exited with {out.returncode}").removeprefix("kkb sandbox probe: ")


def launcher_argv(mode: Isolation, root: Path, mounts: tuple[tuple[Path, Path], ...], binds: list[Path],
                  memory_bytes: int | None, readonly: tuple[Path, ...] = (),
                  root_fs: RootFilesystem | None = None, gpu: bool = False, *, shm_bytes: int | None = None,
                  processes: ProcessLimit | None = None) -> list[str]:
    """The argv prefix that starts a command in the sandbox at ``root`` (``mounts``: host source, target under
    root/input; ``binds``: writable at their own paths; ``readonly``: visible read-only at their own paths;
    ``root_fs``: how the rest is made writable, read-only when None; ``shm_bytes``: /dev/shm's size; ``processes``:
    the run's task limit). The root shows only what :mod:`builder.run.host_view` lists of this machine.
    ``memory_bytes`` is no launcher's business any more: the host counts and enforces it (kept for callers)."""
    if mode == "bwrap":
        join = processes.join_options() if processes is not None else []
        prefix = [sys.executable, "-I", "-S", str(LAUNCH), *join, "--no-namespace", "--"] if join else []
        return [*prefix, *bwrap_argv(root, mounts, binds, None, readonly, root_fs, gpu, shm_bytes=shm_bytes,
                                     processes=processes)]
    if mode != "namespace":
        return []
    argv = [sys.executable, str(LAUNCH), "--kaggle", str(root), *launcher_option(root_fs), "--readonly",
            str(root / "input"), "--chdir", "/kaggle/working", *(["--gpu"] if gpu else [])]
    home = private_home(root)
    argv += ["--home", str(home)] if home is not None else []
    for folder in interpreter_folders():
        argv += ["--host", str(folder)]
    for path in masked_paths():
        argv += ["--mask", path]
    argv += ["--shm-size", str(shm_bytes)] if shm_bytes else []
    argv += processes.launcher_options() if processes is not None else []
    for folder in readonly:
        argv += ["--readonly", str(folder)]
    for source, target in mounts:
        argv += ["--mount", f"{source}={target}"]
    for folder in binds:
        argv += ["--bind", str(folder)]
    return [*argv, "--"]


def private_home(root: Path) -> Path | None:
    """The sandbox's own home, shown as ``/root`` (and ``$HOME``) inside; None before the sandbox is laid out."""
    home = Path(root) / ".sandbox" / "home"
    return home if home.is_dir() else None


def bwrap_argv(root: Path, mounts: list[tuple[Path, Path]] | tuple[tuple[Path, Path], ...], binds: list[Path],
               memory_bytes: int | None, readonly: tuple[Path, ...] = (), root_fs: RootFilesystem | None = None,
               gpu: bool = False, *, shm_bytes: int | None = None, processes: ProcessLimit | None = None) -> list[str]:
    """bubblewrap arguments for the file system :mod:`builder.run.guest.newroot` builds with ``--kaggle``.

    The command after them starts through the launcher's ``--no-namespace`` hop, which closes every file
    descriptor but 0-2 (bubblewrap passes them on), empties every capability set (as root bubblewrap leaves the
    bounding set full, so the command's exec would regain every capability) and sets the task limit."""
    bwrap = shutil.which("bwrap") or "bwrap"
    argv = [bwrap, "--unshare-net", "--unshare-pid", "--die-with-parent"]
    for entry in SYSTEM_FOLDERS:
        path = Path("/") / entry
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += bwrap_folder_args(root_fs, str(path))
    argv += _bwrap_masks(root)
    argv += ["--dev", "/dev"]
    if shm_bytes and bwrap_has("--size"):
        argv += ["--size", str(shm_bytes), "--tmpfs", "/dev/shm"]
    argv += ["--proc", "/proc", "--ro-bind-try", "/sys", "/sys"]
    for name in gpu_nodes() if gpu else ():
        argv += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    argv += ["--bind", str(root / ".sandbox" / "tmp"), "/tmp"]
    home = private_home(root)
    argv += ["--bind", str(home), "/root"] if home is not None else []
    for folder in interpreter_folders():
        argv += bwrap_folder_args(root_fs, str(folder))
    for folder in [root, *binds]:
        argv += ["--bind", str(folder), str(folder)]
    argv += ["--ro-bind", str(root / "input"), str(root / "input")]
    for folder in readonly:
        argv += ["--ro-bind", str(folder), str(folder)]
    for source, target in mounts:
        argv += ["--ro-bind", str(source), str(target)]
    argv += ["--bind", str(root / "working"), "/kaggle/working", "--bind", str(root / "temp"), "/kaggle/temp",
             "--ro-bind", str(root / "input"), "/kaggle/input", "--bind-try", str(root / "src"), "/kaggle/src"]
    for source, target in mounts:
        argv += ["--ro-bind", str(source), "/kaggle/input/" + target.relative_to(root / "input").as_posix()]
    if root_fs != RootFilesystem.BWRAP_OVERLAY:
        argv += ["--remount-ro", "/"]
    argv += ["--chdir", "/kaggle/working"]
    limit = ["--processes", str(processes.tasks)] if processes is not None else []
    return [*argv, "--", sys.executable, "-I", "-S", str(LAUNCH), "--no-namespace", "--drop-capabilities", *limit, "--"]


def _bwrap_masks(root: Path) -> list[str]:
    """What an ordinary user cannot read, shown empty: an empty file over a file (bubblewrap's binds are ``nodev``: a
    ``/dev/null`` there could not even be opened), an empty read-only tmpfs over a folder."""
    argv: list[str] = []
    empty = Path(root) / ".sandbox" / "empty"
    if empty.parent.is_dir() and not empty.exists():
        empty.write_bytes(b"")
        empty.chmod(0o444)
    for path in masked_paths():
        if os.path.isdir(path):
            argv += [*(["--perms", "0000"] if bwrap_has("--perms") else []), "--tmpfs", path, "--remount-ro", path]
        else:
            argv += ["--ro-bind", str(empty) if empty.is_file() else "/dev/null", path]
    return argv


def bwrap_has(option: str) -> bool:
    """Whether this bubblewrap takes ``option`` (``--size`` for a tmpfs came with 0.7, ``--perms`` with 0.5)."""
    return option in _bwrap_help()


@functools.cache
def _bwrap_help() -> str:
    try:
        return subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True, text=True,
                              timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
