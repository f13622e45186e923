"""A temporary folder that looks like ``/kaggle`` to a kernel, with the internet off.

Layout of a sandbox root (``$KKB_KAGGLE_ROOT`` inside the kernel)::

    input/competitions/<slug>/        the competition data     (legacy layout: input/<slug>/)
    input/datasets/<owner>/<slug>/    each attached dataset    (legacy layout: input/<slug>/)
    working/                          the kernel's cwd, the only place it should write
    temp/                             Kaggle's /kaggle/temp
    .sandbox/                         kkb's side: HOME, TMPDIR, the network guard, the kernel log

Three isolation modes, chosen by :func:`builder.rehearse.isolation.choose_isolation` (``auto`` picks the
strongest that works here; the report names it and why stronger ones were skipped):

``bwrap`` and ``namespace``
    The kernel starts in its own network and mount namespaces, through bubblewrap or kkb's own
    launcher (``guest/launch.py``): only a loopback interface exists, so no process of the
    run can reach another host, Python or not; ``/kaggle/input`` (read-only even for root),
    ``/kaggle/working`` and ``/kaggle/temp`` exist at their real paths, ``/tmp`` is private and the
    rest of the file system is read-only. Nothing is copied: each mount is a read-only bind mount.
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
blocked attempt in ``.sandbox/network.log``.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from builder.errors import DryRunError
from builder.rehearse.isolation import GUEST_DIR, Isolation, IsolationChoice, Mode, choose_isolation, launcher_argv

Layout = Literal["current", "legacy"]

PRIVATE = ".sandbox"
NETWORK_LOG = "network.log"
KERNEL_LOG = "kernel.log"
# Port 9 (discard) on loopback: nothing listens, so a proxied request fails at once instead of hanging.
DEAD_PROXY = "http://127.0.0.1:9"
# Never passed to the kernel: the user's Kaggle credentials and anything that looks like a secret.
SECRET_NAME = re.compile(
    r"^(KAGGLE_|KKB_|JPY_|JUPYTER_|AWS_|AZURE_|GOOGLE_APPLICATION_CREDENTIALS$|PYTHONPATH$|PYTHONSTARTUP$)"
    r"|TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|_KEY$",
    re.IGNORECASE,
)
CREDENTIAL_VARIABLES = ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN")
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
    layout: Layout = "current"
    extra_env: Mapping[str, str] = field(default_factory=dict)
    isolation: Isolation = "auto"  # kkb addition: "python" forces the portable mode (tests, debugging)
    memory_bytes: int | None = None  # RLIMIT_DATA of every process of the run (the machine shape's RAM)
    working_limit_bytes: int | None = None  # /kaggle/working larger than this stops the run (what Kaggle keeps)
    visible: tuple[Path, ...] = ()  # host folders the kernel reads at their own paths (kkb's script wrapper)


@dataclass(frozen=True)
class Sandbox:
    """A laid-out sandbox: where things are and how to start a kernel in it."""

    root: Path
    input_dir: Path
    working_dir: Path
    temp_dir: Path
    private_dir: Path
    env: dict[str, str]
    isolation: Mode
    mounts: tuple[tuple[Path, Path], ...]  # (source, absolute target)
    memory_bytes: int | None = None
    isolation_note: str = ""  # what ran, and why stronger isolations were not used
    visible: tuple[Path, ...] = ()

    @property
    def kaggle_paths(self) -> bool:
        """True when ``/kaggle/...`` exists inside the sandbox (not only ``$KKB_KAGGLE_ROOT``)."""
        return self.isolation != "python"

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
        return launcher_argv(self.isolation, self.root, self.mounts, list(binds), self.memory_bytes, self.visible)


def prepare_sandbox(spec: SandboxSpec, root: Path) -> Sandbox:
    """Lay out ``root`` as a Kaggle root for one run. ``root`` must not exist or be empty."""
    root = Path(root).absolute()
    if root.exists() and any(root.iterdir()):
        raise DryRunError(f"sandbox root {root} is not empty", hint="pass a new or empty folder for each run")
    choice = choose_isolation(spec.isolation)
    isolation = choice.mode
    mounts = _resolve_mounts(spec.mounts, root / "input", spec.layout)
    for folder in ("input", "working", "temp", f"{PRIVATE}/home/.kaggle", f"{PRIVATE}/tmp", f"{PRIVATE}/site"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(GUEST_DIR / "sitecustomize.py", root / PRIVATE / "site" / "sitecustomize.py")
    if isolation != "python":
        for _, target in mounts:
            target.mkdir(parents=True, exist_ok=True)  # empty mount points; filled inside the namespace
    else:
        for source, target in mounts:
            _readonly_copy(source, target)
        _remove_write_permission(root / "input")
    env = kernel_environment(root, rerun=spec.rerun, extra_env=spec.extra_env, proxies=isolation == "python")
    return Sandbox(root=root, input_dir=root / "input", working_dir=root / "working", temp_dir=root / "temp",
                   private_dir=root / PRIVATE, env=env, isolation=isolation, mounts=mounts,
                   memory_bytes=spec.memory_bytes, isolation_note=choice.describe(),
                   visible=tuple(Path(folder).resolve() for folder in spec.visible))


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


def remove_sandbox(root: Path) -> None:
    """Delete a sandbox, giving write permission back first (a non-root user cannot empty a 0555 folder)."""
    root = Path(root)
    if not root.exists():
        return
    for path in [root, *root.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            try:
                path.chmod(path.stat().st_mode | stat.S_IWUSR | stat.S_IXUSR)
            except OSError:
                pass
    shutil.rmtree(root, ignore_errors=True)


def kernel_environment(root: Path, *, rerun: bool, extra_env: Mapping[str, str] = {},
                       proxies: bool = True) -> dict[str, str]:
    """The kernel's environment: ours minus secrets, plus what a Kaggle batch run with internet off has.

    ``proxies``: point HTTP(S) proxies at a closed loopback port, for non-Python clients where no
    network namespace stops them (the Python guard hides this proxy from Python's own clients).
    """
    refused = sorted(name for name in extra_env if name in CREDENTIAL_VARIABLES)
    if refused:
        raise DryRunError(f"refusing to pass {', '.join(refused)} into the sandbox",
                          hint="kernels never see Kaggle credentials, on Kaggle or here")
    private = root / PRIVATE
    env = {name: value for name, value in os.environ.items() if not SECRET_NAME.search(name)}
    env.update(
        KKB_KAGGLE_ROOT=str(root),
        KAGGLE_KERNEL_RUN_TYPE="Batch",
        HOME=str(private / "home"),
        KAGGLE_CONFIG_DIR=str(private / "home" / ".kaggle"),
        TMPDIR=str(private / "tmp"), TMP=str(private / "tmp"), TEMP=str(private / "tmp"),
        XDG_CACHE_HOME=str(private / "home" / ".cache"),
        XDG_CONFIG_HOME=str(private / "home" / ".config"),
        XDG_DATA_HOME=str(private / "home" / ".local" / "share"),
        JUPYTER_RUNTIME_DIR=str(private / "home" / ".jupyter-runtime"),
        PYTHONPATH=str(private / "site"),
        KKB_SANDBOX_NETLOG=str(private / NETWORK_LOG),
        # The kernel's `python` and `pip` are this interpreter's, as on Kaggle they are the image's.
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)]),
    )
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "FTP_PROXY", "NO_PROXY"):
        env.pop(name, None)
        env.pop(name.lower(), None)
    if proxies:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "FTP_PROXY"):
            env[name] = env[name.lower()] = DEAD_PROXY
        env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
        env["KKB_SANDBOX_DEAD_PROXY"] = DEAD_PROXY
    if rerun:
        env["KAGGLE_IS_COMPETITION_RERUN"] = "1"  # Kaggle tests presence; the value is a guess
    env.update(extra_env)
    return env


def isolation_mode(requested: Isolation = "auto") -> Mode:
    """The isolation a sandbox gets here (see :func:`builder.rehearse.isolation.choose_isolation`)."""
    return choose_isolation(requested).mode


def isolation_choice(requested: Isolation = "auto") -> IsolationChoice:
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

TABLE_SUFFIXES = (".csv", ".parquet")


@dataclass(frozen=True)
class ScaledData:
    """Competition data with the test replicated ``factor`` times under new ids."""

    path: Path
    factor: int
    rows: int  # rows of the new sample submission
    replicated: tuple[str, ...]  # files rewritten or added, relative to ``path``


def scale_competition_data(source: Path, dest: Path, factor: int, *, id_column: str,
                           sample_submission: str = "sample_submission.csv", test: str | None = None) -> ScaledData:
    """Copy ``source`` to ``dest`` with every test row and test file repeated ``factor`` times.

    Copy 0 keeps the original ids; copy k gets new ones (numeric ids are shifted past the largest,
    others get a ``_r<k>`` suffix), in the sample submission, in every test table (rows whose ids
    are all sample ids) and in the names of files and folders named by an id (``test/<id>.jpg``).
    ``test`` (``[competition] test``) names the test table or folder; without it kkb looks for them.
    Unchanged files are hard links where the file system allows (never written through: every file
    kkb rewrites is unlinked first).
    """
    import pandas as pd

    if factor < 1:
        raise DryRunError(f"--rerun-scale must be at least 1, got {factor}")
    source, dest = Path(source), Path(dest)
    sample_path = source / sample_submission
    if not sample_path.is_file():
        raise DryRunError(f"{sample_path}: no sample submission to scale", hint="check [competition] data and sample_submission")
    sample = pd.read_csv(sample_path, dtype={id_column: str})
    if id_column not in sample.columns:
        raise DryRunError(f"{sample_path}: no id column '{id_column}'", hint="set [submission] id_column")
    _link_tree(source, dest)
    ids = sample[id_column].tolist()
    new_id = _id_maker(ids)
    mapping = [{old: new_id(old, k) for old in ids} for k in range(factor)]
    replicated = [sample_submission]
    _write_table(_replicate(sample, id_column, mapping), dest / sample_submission)
    for relative in _test_tables(source, sample_submission, test, id_column, set(ids)):
        table = _read_table(source / relative, id_column)
        _write_table(_replicate(table, id_column, mapping), dest / relative)
        replicated.append(relative)
    for relative in _test_files(source, test, set(ids)):
        replicated += _copy_with_new_ids(dest, relative, mapping)
    return ScaledData(path=dest, factor=factor, rows=len(sample) * factor, replicated=tuple(replicated))


def _link_tree(source: Path, dest: Path) -> None:
    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, dest, copy_function=link_or_copy)


def _id_maker(ids: list[str]):  # type: ignore[no-untyped-def]
    """Numeric ids (no leading zeros) shift past the largest id; other ids get a suffix."""
    numeric = all(value.isdigit() and (value == "0" or not value.startswith("0")) for value in ids) and ids
    if numeric:
        span = max(int(value) for value in ids) + 1
        return lambda value, k: value if k == 0 else str(int(value) + k * span)
    return lambda value, k: value if k == 0 else _suffixed(value, k)


def _suffixed(value: str, k: int) -> str:
    """``abc_r1``; an id that carries a file extension keeps it last: ``abc.jpg`` -> ``abc_r1.jpg``."""
    path = PurePosixPath(value)
    if re.fullmatch(r"\.[A-Za-z][A-Za-z0-9]{0,4}", path.suffix) and path.stem:
        return value[: -len(path.suffix)] + f"_r{k}" + path.suffix
    return f"{value}_r{k}"


def _replicate(frame, id_column: str, mapping: list[dict[str, str]]):  # type: ignore[no-untyped-def]
    import pandas as pd

    copies = []
    for ids in mapping:
        copy = frame.copy()
        copy[id_column] = copy[id_column].map(ids)
        for column in copy.columns:
            if column != id_column and (pd.api.types.is_string_dtype(copy[column]) or copy[column].dtype == object):
                copy[column] = copy[column].map(lambda value, ids=ids: _rename_path(value, ids))
        copies.append(copy)
    return pd.concat(copies, ignore_index=True)


def _rename_path(value: object, ids: dict[str, str]) -> object:
    """``test/<id>.jpg`` in a table column follows its file's new name."""
    if not isinstance(value, str):
        return value
    path = PurePosixPath(value)
    if path.name in ids and path.name != ids[path.name]:  # the id is the file name, extension included
        return str(path.with_name(ids[path.name]))
    if path.stem in ids and path.stem != ids[path.stem]:
        return str(path.with_name(ids[path.stem] + path.suffix))
    return value


def _read_table(path: Path, id_column: str):  # type: ignore[no-untyped-def]
    import pandas as pd

    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
        if id_column in frame.columns:
            frame[id_column] = frame[id_column].astype(str)
        return frame
    return pd.read_csv(path, dtype={id_column: str})


def _write_table(frame, path: Path) -> None:  # type: ignore[no-untyped-def]
    path.unlink(missing_ok=True)  # a hard link to the source: never write through it
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)


def _test_tables(source: Path, sample_submission: str, test: str | None, id_column: str, ids: set[str]) -> list[str]:
    if test and (source / test).is_file():
        return [test] if (source / test).suffix in TABLE_SUFFIXES else []
    candidates = [path for path in sorted(source.rglob("*")) if path.suffix in TABLE_SUFFIXES and path.is_file()]
    found = []
    for path in candidates:
        relative = path.relative_to(source).as_posix()
        if relative == sample_submission:
            continue
        try:
            column = _read_table(path, id_column)
        except Exception:
            continue
        if id_column in column.columns and len(column) and set(column[id_column].astype(str)) <= ids:
            found.append(relative)
    return found


def _test_files(source: Path, test: str | None, ids: set[str]) -> list[str]:
    """Files and folders named by a test id (``test/<id>.jpg``, ``test_images/<id>/``), outermost only."""
    base = source / test if test and (source / test).is_dir() else source
    found: list[str] = []
    for path in sorted(base.rglob("*")):
        if path.suffix in TABLE_SUFFIXES and path.is_file():
            continue
        if path.stem in ids or path.name in ids:
            relative = path.relative_to(source).as_posix()
            if not any(relative.startswith(parent + "/") for parent in found):
                found.append(relative)
    return found


def _copy_with_new_ids(dest: Path, relative: str, mapping: list[dict[str, str]]) -> list[str]:
    original = dest / relative
    key = original.name if original.name in mapping[0] else original.stem
    added = []
    for ids in mapping[1:]:
        name = ids[key] + ("" if key == original.name else original.suffix)
        target = original.with_name(name)
        if original.is_dir():
            _link_tree(original, target)
        else:
            try:
                os.link(original, target)
            except OSError:
                shutil.copy2(original, target)
        added.append(target.relative_to(dest).as_posix())
    return added
