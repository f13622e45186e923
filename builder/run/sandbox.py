"""A temporary folder that looks like ``/kaggle`` to a kernel, with the internet off.

Layout of a sandbox root (``$KKB_KAGGLE_ROOT`` inside the kernel)::

    input/competitions/<slug>/        the competition data     (legacy layout: input/<slug>/)
    input/datasets/<owner>/<slug>/    each attached dataset    (legacy layout: input/<slug>/)
    working/                          the kernel's cwd, the only place it should write
    temp/                             Kaggle's /kaggle/temp
    .sandbox/                         kkb's side: HOME, TMPDIR, the network guard, the kernel log

Three isolation modes, chosen by :func:`builder.run.isolation.choose_isolation` (``auto`` picks the
strongest that works here; the report names it and why stronger ones were skipped):

``bwrap`` and ``namespace``
    The kernel starts in its own network and mount namespaces, through bubblewrap or kkb's own
    launcher (``guest/launch.py``): only a loopback interface exists, so no process of the
    run can reach another host, Python or not; ``/kaggle/input`` (read-only even for root),
    ``/kaggle/working`` and ``/kaggle/temp`` exist at their real paths, ``/tmp`` and ``/root`` are private, the
    rest of the file system is what Kaggle's image has of this machine (:mod:`builder.run.host_view`), read-only or an
    overlay, and the kernel keeps no capability and has a task limit. Nothing is copied: each mount is a read-only bind mount.
    The root folder also stays visible at its own path, so ``$KKB_KAGGLE_ROOT`` works as in the
    portable mode. Needs root or unprivileged user namespaces (Linux).
``python``
    Everywhere else. Mounts are *copies* with write permission removed: this stops an ordinary
    user but not root (root ignores file modes), so a kernel running as root can write into its
    copy, never into the project or ``build/``, which are the sources of the copies. The network is
    cut for Python processes only, by ``guest/sitecustomize.py`` (name resolution and
    non-loopback connections fail as on an offline Kaggle kernel), plus HTTP(S) proxies pointing at
    a closed loopback port for curl, wget and other non-Python clients.

The Python guard is installed in both modes: it gives Kaggle's error messages and records every
blocked attempt in ``.sandbox/network.log``. When a run ends, :func:`finish_run` removes every link and special file
it left (kkb follows none: :mod:`builder.run.sandbox_files`); kkb's own outputs go beside the root (``ROOT.kkb``).
"""

from __future__ import annotations

import shutil
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from builder.errors import DryRunError
from builder.kkb_runtime import references as runtime_references
from builder.kkb_runtime import scale as runtime_scale
from builder.kkb_runtime.references import StandInConfig
from builder.kkb_runtime.scale import ScaledData
from builder.kkb_runtime.vocabulary import Isolation, Layout
from builder.project import kaggle_env
from builder.project.kaggle_env import EnvRequest, KernelEnvironment, SandboxDirs
from builder.run.isolation import GUEST_DIR, IsolationChoice, IsolationRequest, choose_isolation, launcher_argv
from builder.run.overlay import RootChoice, choose_root_filesystem, recorded
from builder.run.pip_shim import install_pip_shim
from builder.run.processes import RECORD as PROCESSES_RECORD
from builder.run.processes import ProcessLimit, process_limit, release
from builder.run.sandbox_files import seal

PRIVATE = ".sandbox"
NETWORK_LOG = "network.log"
KERNEL_LOG = "kernel.log"
LEGACY_PREFIXES = {"competitions": 1, "datasets": 2, "models": 2, "notebooks": 2}


@dataclass(frozen=True)
class Mount:
    """``source`` appears read-only at ``input/<target>``; ``target`` is in the current layout."""

    source: Path
    target: str


@dataclass(frozen=True)
class SandboxSpec:
    mounts: tuple[Mount, ...]
    rerun: bool
    timeout_seconds: float | None = None
    layout: Layout = Layout.CURRENT
    extra_env: Mapping[str, str] = field(default_factory=dict)
    isolation: IsolationRequest = "auto"  # kkb addition: "python" forces the portable mode (tests, debugging)
    memory_bytes: int | None = None  # the whole run's memory limit (the machine shape's RAM; builder.run.memory)
    working_limit_bytes: int | None = None  # /kaggle/working larger than this stops the run (what Kaggle keeps)
    visible: tuple[Path, ...] = ()  # host folders the kernel reads at their own paths (kkb's script wrapper)
    python: Path | None = None  # the kernel's interpreter (kkb env's, --image-env); default: this one
    gpu: bool = False  # the run uses the GPU: its device nodes exist in the namespaces' minimal /dev
    user_env: Mapping[str, str] = field(default_factory=dict)  # --env NAME=VALUE (builder.project.kaggle_env)


@dataclass(frozen=True)
class Sandbox:
    """A laid-out sandbox: where things are and how to start a kernel in it."""

    root: Path
    input_dir: Path
    working_dir: Path
    temp_dir: Path
    private_dir: Path
    env: dict[str, str]
    isolation: Isolation
    mounts: tuple[tuple[Path, Path], ...]  # (source, absolute target)
    memory_bytes: int | None = None
    isolation_note: str = ""  # what ran, and why stronger isolations were not used
    visible: tuple[Path, ...] = ()
    root_choice: RootChoice = RootChoice(None)  # how the container's file system is writable (builder.run.overlay)
    python: Path = Path(sys.executable)  # the kernel's interpreter, first on its PATH
    gpu: bool = False  # the GPU's device nodes are visible to the kernel
    environment: KernelEnvironment = KernelEnvironment(())  # env, each variable with its origin (the report lists it)
    processes: ProcessLimit | None = None  # the run's task limit (None: the portable mode, which confines nothing)

    @property
    def root_filesystem(self) -> str:
        """What the run's root really was, in words (the launcher's record, once it ran)."""
        return recorded(self.private_dir, self.root_choice)

    @property
    def kaggle_paths(self) -> bool:
        """True when ``/kaggle/...`` exists inside the sandbox (not only ``$KKB_KAGGLE_ROOT``)."""
        return self.isolation != "python"

    @property
    def outputs_dir(self) -> Path:
        """Beside the root, a folder the kernel never had: where kkb writes what it keeps of a run (the executed notebook,
        a program's output)."""
        return outputs_dir(self.root)

    @property
    def network_log(self) -> Path:
        return self.private_dir / NETWORK_LOG

    @property
    def kernel_log(self) -> Path:
        return self.private_dir / KERNEL_LOG

    def launcher(self, binds: tuple[Path, ...] = ()) -> list[str]:
        """The argv prefix that starts a command inside this sandbox (empty in python mode without limits).

        ``binds``: host folders the command must be able to write at their own paths (the kernel's ipc sockets).
        """
        return launcher_argv(self.isolation, self.root, self.mounts, list(binds), self.memory_bytes, self.visible,
                             self.root_choice.kind, self.gpu, shm_bytes=self.memory_bytes, processes=self.processes)


def prepare_sandbox(spec: SandboxSpec, root: Path) -> Sandbox:
    """Lay out ``root`` as a Kaggle root for one run. ``root`` must not exist or be empty."""
    root = Path(root).absolute()
    if root.exists() and any(root.iterdir()):
        raise DryRunError(f"sandbox root {root} is not empty", hint="pass a new or empty folder for each run")
    choice = choose_isolation(spec.isolation)
    isolation = choice.mode
    root_choice = choose_root_filesystem(isolation)
    mounts = _resolve_mounts(spec.mounts, root / "input", spec.layout)
    for folder in ("input", "working", "temp", f"{PRIVATE}/home/.kaggle", f"{PRIVATE}/tmp", f"{PRIVATE}/site",
                   f"{PRIVATE}/imports"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    outputs_dir(root).mkdir(exist_ok=True)
    shutil.copyfile(GUEST_DIR / "sitecustomize.py", root / PRIVATE / "site" / "sitecustomize.py")
    install_pip_shim(root / PRIVATE, spec.python)  # `pip install X` is a no-op where Kaggle's image has X, as there
    if isolation != "python":
        for _, target in mounts:
            target.mkdir(parents=True, exist_ok=True)  # empty mount points; filled inside the namespace
    else:
        for source, target in mounts:
            _readonly_copy(source, target)
        _remove_write_permission(root / "input")
    python = Path(spec.python) if spec.python else Path(sys.executable)
    processes = process_limit(root / PRIVATE) if isolation != Isolation.PYTHON else None
    environment = sandbox_environment(root, rerun=spec.rerun, extra_env=spec.extra_env, proxies=isolation == "python",
                                      python=python, user_env=spec.user_env, gpu=spec.gpu)
    return Sandbox(root=root, input_dir=root / "input", working_dir=root / "working", temp_dir=root / "temp",
                   private_dir=root / PRIVATE, env=environment.env, isolation=isolation, mounts=mounts, environment=environment,
                   memory_bytes=spec.memory_bytes, isolation_note=choice.describe() + _confined(processes),
                   visible=tuple(Path(folder).resolve() for folder in spec.visible), root_choice=root_choice, python=python,
                   gpu=spec.gpu, processes=processes)


def _confined(processes: ProcessLimit | None) -> str:
    """What a namespaced sandbox shows of this machine and limits, for the report (nothing in the portable mode)."""
    if processes is None:
        return ""
    return (f"; shows only what Kaggle's image has of this machine (no home folders, /root or secrets of /etc), "
            f"no capabilities, {processes.describe()}, /dev/shm counted in the memory")


def mount_path(target: str, layout: Layout) -> PurePosixPath:
    """``competitions/x`` → ``x`` and ``datasets/owner/x`` → ``x`` in the legacy layout."""
    path = PurePosixPath(target)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise DryRunError(f"mount target '{target}' must be a relative path under input/",
                          hint="e.g. competitions/<slug> or datasets/<owner>/<slug>")
    if layout == "legacy" and path.parts[0] in LEGACY_PREFIXES:
        drop = LEGACY_PREFIXES[path.parts[0]] if len(path.parts) > LEGACY_PREFIXES[path.parts[0]] else 0
        path = PurePosixPath(*path.parts[drop:])
    return path


def _resolve_mounts(mounts: tuple[Mount, ...], input_dir: Path, layout: Layout) -> tuple[tuple[Path, Path], ...]:
    resolved: list[tuple[Path, Path]] = []
    for mount in mounts:
        source = Path(mount.source).resolve()
        if not source.is_dir():
            raise DryRunError(f"cannot mount {mount.source}: not a folder", hint="build the kernel first, or fix --data")
        target = input_dir / mount_path(mount.target, layout)
        for _, other in resolved:
            if target == other or target in other.parents or other in target.parents:
                raise DryRunError(f"two mounts overlap at {target.relative_to(input_dir)} in the {layout} layout",
                                  hint="give the datasets different slugs, or use the current layout")
        resolved.append((source, target))
    return tuple(resolved)


def _readonly_copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # Copies, not links: a kernel running as root could otherwise write through to the project.
    shutil.copytree(source, target, symlinks=False)


def _remove_write_permission(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def outputs_dir(root: Path) -> Path:
    """kkb's own folder beside a sandbox root (``ROOT.kkb``), removed with it."""
    root = Path(root)
    return root.with_name(root.name + ".kkb")


def finish_run(box: Sandbox) -> tuple[str, ...]:
    """After a run, once none of its processes is left: its task limit released, and every link and special file it
    left removed (:func:`builder.run.sandbox_files.seal`): what kkb reads and writes there afterwards stays inside.
    Returns what was removed, in words, for the report."""
    release(box.private_dir)
    return seal(box.root, PRIVATE)


def remove_sandbox(root: Path) -> None:
    """Delete a sandbox (or a folder of them), giving write permission back first (a non-root user cannot empty a 0555
    folder) and removing any task limit a run left."""
    root = Path(root)
    shutil.rmtree(outputs_dir(root), ignore_errors=True)
    if not root.exists():
        return
    for record in root.rglob(PROCESSES_RECORD):
        release(record.parent)
    for path in [root, *root.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            try:
                path.chmod(path.stat().st_mode | stat.S_IWUSR | stat.S_IXUSR)
            except OSError:
                pass
    shutil.rmtree(root, ignore_errors=True)


def kernel_environment(root: Path, *, rerun: bool, extra_env: Mapping[str, str] = {}, proxies: bool = True,
                       python: Path | None = None, user_env: Mapping[str, str] = {}, gpu: bool = False) -> dict[str, str]:
    """The kernel's environment (:func:`builder.project.kaggle_env.kernel_environment`: Kaggle's variables, kkb's own,
    ``--env``; nothing else of this machine's) for a sandbox at ``root``; ``extra_env`` is the run's own kkb settings."""
    return sandbox_environment(root, rerun=rerun, extra_env=extra_env, proxies=proxies, python=python,
                               user_env=user_env, gpu=gpu).env


def sandbox_environment(root: Path, *, rerun: bool, extra_env: Mapping[str, str] = {}, proxies: bool = True,
                        python: Path | None = None, user_env: Mapping[str, str] = {}, gpu: bool = False) -> KernelEnvironment:
    return kaggle_env.kernel_environment(EnvRequest(
        root=Path(root), dirs=SandboxDirs(Path(root) / PRIVATE), python=Path(python or sys.executable), rerun=rerun,
        gpu=gpu, proxies=proxies, kkb=extra_env, user=user_env))


def isolation_mode(requested: IsolationRequest = "auto") -> Isolation:
    """The isolation a sandbox gets here (see :func:`builder.run.isolation.choose_isolation`)."""
    return choose_isolation(requested).mode


def isolation_choice(requested: IsolationRequest = "auto") -> IsolationChoice:
    return choose_isolation(requested)


def input_snapshot(box: Sandbox) -> dict[str, tuple[int, int]]:
    """``{path under input/: (size, mtime_ns)}``, to find writes the python mode could not stop (root)."""
    snapshot: dict[str, tuple[int, int]] = {}
    for path in box.input_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            info = path.stat()
            snapshot[path.relative_to(box.input_dir).as_posix()] = (info.st_size, info.st_mtime_ns)
    return snapshot


def input_writes(box: Sandbox, before: dict[str, tuple[int, int]]) -> list[str]:
    """Files under ``input/`` created, changed or deleted since ``before``."""
    after = input_snapshot(box)
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def blocked_network(root: Path) -> list[str]:
    """The hosts the kernel tried to reach, in order, without repeats (``resolve huggingface.co:443``)."""
    path = Path(root) / PRIVATE / NETWORK_LOG
    if not path.is_file():
        return []
    seen: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        _, _, what = line.partition(" ")
        if what:
            seen.setdefault(what, None)
    return list(seen)


# --- rerun scale: a larger hidden test set made from the public one -----------------------------
# The implementation lives in the kernel-side runtime: the rehearsal on Kaggle scales the same way.


def scale_competition_data(source: Path, dest: Path, factor: int, *, id_column: str,
                           sample_submission: str = "sample_submission.csv", test: str | None = None,
                           stand_in: StandInConfig | None = None) -> ScaledData:
    """:func:`builder.kkb_runtime.scale.scale_competition_data`, its errors as :class:`DryRunError`."""
    try:
        return runtime_scale.scale_competition_data(source, dest, factor, id_column=id_column,
                                                    sample_submission=sample_submission, test=test, stand_in=stand_in)
    except runtime_references.ScaleError as exc:
        raise DryRunError(exc.message, hint=exc.hint) from None
