"""Start a command in its own network and mount namespaces: no network, read-only inputs, a real /kaggle.

    python launch.py [--kaggle ROOT] [--root-fs overlay|fuse-overlayfs|read-only] [--mount SOURCE=TARGET ...]
                     [--readonly DIR] [--bind DIR ...] [--chdir DIR] [--no-namespace] -- COMMAND ...
    python launch.py --probe
    python launch.py --probe-root [overlay|fuse-overlayfs|read-only]

``--kaggle ROOT`` (the sandbox root) builds a new root file system for the command, as bubblewrap
does: a tmpfs holding a read-only bind of every top-level folder of ``/``, a minimal ``/dev`` (null, zero,
full, random, urandom, tty, a private shm and pts; the GPU's nodes only with ``--gpu``), a fresh ``/proc``
of the command's own PID namespace, a private ``/tmp`` (``ROOT/.sandbox/tmp``), ``ROOT`` itself writable at its own path (so
``$KKB_KAGGLE_ROOT`` keeps working), and ``/kaggle/input`` (read-only), ``/kaggle/working`` and
``/kaggle/temp`` bound from ``ROOT``; then ``pivot_root`` into it. Nothing the command writes lands on
the host outside ``ROOT`` and the ``--bind`` folders, and the host's own ``/kaggle`` is never touched.

``--root-fs overlay`` (or ``fuse-overlayfs``) makes the whole file system writable, as a container's is:
each top-level folder is an overlay whose lower layer is the host's folder and whose upper layer lives
in ``ROOT/.sandbox/upper`` (or a tmpfs where that cannot hold one), so ``pip install`` into the
interpreter, ``mkdir /kaggle/tmp`` or a write to ``/usr/local`` work, and all of it vanishes with the
sandbox root; the host's folders are never written. Mounts below a host folder stay visible,
read-only. A folder whose overlay cannot be mounted falls back to the read-only bind, and the
launcher writes what it did to ``ROOT/.sandbox/root-filesystem`` for the report.
``--no-namespace`` starts the command as it is (the portable sandbox).

The command (the Jupyter kernel) sees only a loopback interface, so neither it nor any child (Python
or not: curl, pip, a C library) can reach another host. Each SOURCE folder is bind-mounted at TARGET
and made read-only, as Kaggle mounts ``/kaggle/input``; this holds for root too, where ``chmod`` does
not. The mounts exist only inside the namespace and vanish with the kernel, and nothing is copied.
With ``--kaggle`` the command runs in its own PID namespace: the launcher stays outside as the
process kkb started (it forwards signals and exits with the command's status), a small init is PID 1
inside (it reaps orphans and forwards signals), and the command is PID 2. The command sees only its
own processes, so no ``/proc/<pid>/root``, ``cwd`` or ``fd`` of a host process leads anywhere. No file
descriptor of the launcher is inherited (all but 0-2 are closed), and the command's capabilities are
those of Docker's default set less ``CAP_MKNOD`` (no mount, no raw devices, no ``open_by_handle_at``).
Without ``--kaggle`` the launcher ``exec``s the command, which keeps the launcher's pid.

Needs CAP_SYS_ADMIN (root, outside a locked-down container) or unprivileged user namespaces;
``--probe`` exits 0 when this machine allows it. Standard library only; never imports ``builder``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import os
import signal
import socket
import struct
import sys
import tempfile

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
MNT_DETACH = 2
# pivot_root has no glibc wrapper: the syscall number per architecture.
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217, "riscv64": 41}
# Top-level folders not bound read-only from the host: the kernel gets its own (or none).
SPECIAL = frozenset({"proc", "dev", "sys", "tmp", "kaggle", "lost+found"})
# The only device nodes a kernel sees (bubblewrap's --dev set); the GPU's are added when the run uses one.
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
# Docker's default capabilities (Kaggle's container) less CAP_MKNOD: CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL,
# SETGID, SETUID, SETPCAP, NET_BIND_SERVICE, NET_RAW, SYS_CHROOT, AUDIT_WRITE, SETFCAP. Every other one leaves the
# bounding set before the command starts (no mount, no raw I/O, no open_by_handle_at, no device nodes).
KEPT_CAPABILITIES = frozenset({0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 29, 31})
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
SIOCSIFFLAGS = 0x8914
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40
# statvfs flag -> mount flag: a remount inside a user namespace must keep the locked flags.
_KEEP = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
         (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


def enter_namespaces(pid: bool = False) -> None:
    """New network + mount namespaces (and a PID namespace for the next child when ``pid``); as non-root,
    inside a new user namespace mapping us to root."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWNET | (CLONE_NEWPID if pid else 0)
    if _libc.unshare(flags) != 0:
        _check(_libc.unshare(CLONE_NEWUSER | flags), "unshare")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
    # Keep our mounts out of the parent namespace (systemd makes / shared).
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    loopback_up()


def loopback_up() -> None:
    """A new network namespace starts with ``lo`` down; Kaggle kernels have loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING))


def bind_readonly(source: str, target: str) -> None:
    _check(_libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source} on {target}")
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY
    kept = os.statvfs(target).f_flag
    for stat_flag, mount_flag in _KEEP:
        if kept & stat_flag:
            flags |= mount_flag
    _check(_libc.mount(b"none", target.encode(), None, flags, None), f"make {target} read-only")


def probe() -> int:
    """0 when namespaces, loopback and a read-only bind mount all work here."""
    try:
        enter_namespaces()
        with tempfile.TemporaryDirectory() as folder:
            source, target = os.path.join(folder, "s"), os.path.join(folder, "t")
            os.mkdir(source)
            os.mkdir(target)
            bind_readonly(source, target)
            try:
                open(os.path.join(target, "x"), "w").close()
            except OSError:
                pass
            else:
                return 3
            finally:
                _libc.umount2(target.encode(), 2)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
    except OSError as exc:
        print(f"kkb sandbox probe: {exc}", file=sys.stderr)
        return 2
    return 0


def new_root(root: str, mounts: list[tuple[str, str]], readonly: list[str], binds: list[str],
             root_fs: str = "read-only", gpu: bool = False) -> None:
    """Build the kernel's file system in a tmpfs (see the module docstring) and ``pivot_root`` into it."""
    staging = os.path.join(root, ".sandbox", "newroot")
    os.makedirs(staging, exist_ok=True)
    _check(_libc.mount(b"tmpfs", staging.encode(), b"tmpfs", 0, b"mode=0755"), "tmpfs for the new root")
    layers = _Layers(root, root_fs)
    _mirror_host_root(staging, layers)
    _bind_system(staging, gpu)
    _bind_writable(os.path.join(root, ".sandbox", "tmp"), os.path.join(staging, "tmp"))
    for folder in [root, *binds]:  # writable at their own paths: the sandbox root, the kernel's ipc folder
        _bind_writable(folder, staging + folder)
    for folder in readonly:
        try:
            os.makedirs(staging + folder, exist_ok=True)  # a folder in the private /tmp needs its mount point
        except OSError:
            pass
        bind_readonly(folder, staging + folder)
    for source, target in mounts:
        bind_readonly(source, staging + target)
    _bind_kaggle(staging, root, layers.writable)
    if not layers.writable:
        _check(_libc.mount(b"none", staging.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None), "make / read-only")
    layers.record()
    os.chdir(staging)
    _check(_libc.syscall(SYS_PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")


def _mirror_host_root(staging: str, layers: _Layers) -> None:
    """Every top-level entry of the host's / (but SPECIAL) in the new root: links as links, folders through the layers."""
    for name in sorted(os.listdir("/")):
        source, target = "/" + name, os.path.join(staging, name)
        if name in SPECIAL:
            continue
        if os.path.islink(source):
            os.symlink(os.readlink(source), target)
        elif os.path.isdir(source):
            os.mkdir(target)
            layers.mount(source, target)
        elif os.path.isfile(source):
            open(target, "w").close()
            bind_readonly(source, target)


def _bind_system(staging: str, gpu: bool) -> None:
    """A minimal /dev, a fresh /proc (of the caller's PID namespace: call it from inside), /sys read-only."""
    minimal_dev(os.path.join(staging, "dev"), gpu)
    os.mkdir(os.path.join(staging, "proc"))
    _check(_libc.mount(b"proc", os.path.join(staging, "proc").encode(), b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
           "a fresh /proc")
    if os.path.isdir("/sys"):
        os.mkdir(os.path.join(staging, "sys"))
        bind_tree_readonly("/sys", os.path.join(staging, "sys"))


def minimal_dev(dev: str, gpu: bool) -> None:
    """A tmpfs with the host's harmless nodes bound in (no mknod needed), private shm and pts, the usual links."""
    os.mkdir(dev)
    _check(_libc.mount(b"tmpfs", dev.encode(), b"tmpfs", MS_NOSUID, b"mode=0755"), "tmpfs /dev")
    nodes = list(DEV_NODES) + (gpu_nodes() if gpu else [])
    for name in nodes:
        source, target = "/dev/" + name, os.path.join(dev, name)
        if os.path.isdir(source):
            os.makedirs(target, exist_ok=True)
        elif os.path.exists(source):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "w").close()
        else:
            continue
        _check(_libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source}")
    for name in ("shm", "pts"):
        os.mkdir(os.path.join(dev, name))
    # DataLoader workers share tensors in /dev/shm: the kernel's own, not the host's
    _check(_libc.mount(b"tmpfs", os.path.join(dev, "shm").encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777"), "tmpfs /dev/shm")
    if _libc.mount(b"devpts", os.path.join(dev, "pts").encode(), b"devpts", MS_NOSUID | MS_NOEXEC,
                   b"newinstance,ptmxmode=0666,mode=620") == 0:
        os.symlink("pts/ptmx", os.path.join(dev, "ptmx"))
    for name, target in (("fd", ""), ("stdin", "/0"), ("stdout", "/1"), ("stderr", "/2")):
        os.symlink("/proc/self/fd" + target, os.path.join(dev, name))


def gpu_nodes() -> list[str]:
    """The host's NVIDIA and DRI device nodes (names under /dev), for a run that uses the GPU."""
    names = sorted(name for name in os.listdir("/dev") if name.startswith("nvidia"))
    return names + (["dri"] if os.path.isdir("/dev/dri") else [])


def _bind_kaggle(staging: str, root: str, writable: bool) -> None:
    """/kaggle/input, working and temp (src: a script kernel's): the sandbox root's folders, the input read-only all the way down."""
    kaggle = os.path.join(staging, "kaggle")
    if writable:  # /kaggle itself writable (mkdir /kaggle/tmp), on disk in the sandbox root, as on Kaggle
        os.makedirs(os.path.join(root, ".sandbox", "kaggle"), exist_ok=True)
        _bind_writable(os.path.join(root, ".sandbox", "kaggle"), kaggle)
    for name in ("input", "working", "temp", *(["src"] if os.path.isdir(os.path.join(root, "src")) else [])):
        os.makedirs(os.path.join(kaggle, name))
        _check(_libc.mount((staging + os.path.join(root, name)).encode(), os.path.join(kaggle, name).encode(), None,
                           MS_BIND | MS_REC, None), f"bind /kaggle/{name}")
    _readonly_below(os.path.join(kaggle, "input"))


class _Layers:
    """Each host folder as the new root's: an overlay (writable, changes kept in the sandbox root) or a read-only bind."""

    def __init__(self, root: str, root_fs: str) -> None:
        self.root_fs, self.writable = root_fs, root_fs in ("overlay", "fuse-overlayfs")
        self.upper = os.path.join(root, ".sandbox", "upper")
        self.tmpfs_upper = os.path.join(root, ".sandbox", "upper-tmpfs")
        self.failed: list[str] = []
        self.used: set[str] = set()

    def mount(self, source: str, target: str) -> None:
        if not self.writable:
            bind_tree_readonly(source, target)
            return
        problem = self._overlay(source, target)
        if problem is None:
            for point in _outermost_mounts_below(source):  # what the overlay's lower layer does not show
                inside = target + point[len(source):]
                if os.path.isdir(point) and os.path.isdir(inside):
                    try:
                        bind_tree_readonly(point, inside)
                    except OSError:
                        continue
            return
        self.failed.append(f"{source}: {problem}")
        bind_tree_readonly(source, target)

    def _overlay(self, source: str, target: str) -> str | None:
        name = source.strip("/").replace("/", "_")
        problem: str | None = "no overlay tried"
        for base in (self.upper, self.tmpfs_upper):
            if base == self.tmpfs_upper and not os.path.ismount(base):
                os.makedirs(base, exist_ok=True)
                if _libc.mount(b"tmpfs", base.encode(), b"tmpfs", 0, b"mode=0755") != 0:
                    continue
            upper, work = os.path.join(base, name, "upper"), os.path.join(base, name, "work")
            os.makedirs(upper, exist_ok=True)
            os.makedirs(work, exist_ok=True)
            problem = (_fuse_overlay if self.root_fs == "fuse-overlayfs" else _kernel_overlay)(source, upper, work, target)
            if problem is None:
                self.used.add("tmpfs" if base == self.tmpfs_upper else "disk")
                return None
        return problem

    def record(self) -> None:
        """What was made writable, for the report: ``ROOT/.sandbox/root-filesystem`` (read by the host)."""
        if not self.writable:
            text = "read-only"
        elif self.failed:
            text = f"{self.root_fs}, partly read-only: " + "; ".join(self.failed)
        else:
            text = f"{self.root_fs}: the whole file system writable, changes discarded after the run" + (
                " (upper layers in memory)" if self.used == {"tmpfs"} else "")
        with open(os.path.join(os.path.dirname(self.upper), "root-filesystem"), "w", encoding="utf-8") as handle:
            handle.write(text)


def _kernel_overlay(lower: str, upper: str, work: str, target: str) -> str | None:
    options = f"lowerdir={lower},upperdir={upper},workdir={work}"
    problem = ""
    for extra in ("", ",userxattr"):  # in a user namespace the overlay keeps its metadata in user.* xattrs
        if _libc.mount(b"overlay", target.encode(), b"overlay", 0, (options + extra).encode()) == 0:
            return None
        problem = os.strerror(ctypes.get_errno())
    return f"overlay: {problem}"


def _fuse_overlay(lower: str, upper: str, work: str, target: str) -> str | None:
    """fuse-overlayfs in the foreground, a child that dies with the kernel (PR_SET_PDEATHSIG survives exec)."""
    import shutil
    import subprocess
    import time

    tool = shutil.which("fuse-overlayfs")
    if tool is None:
        return "fuse-overlayfs is not installed"
    daemon = subprocess.Popen([tool, "-f", "-o", f"lowerdir={lower},upperdir={upper},workdir={work}", target],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if os.path.ismount(target):
            return None
        if daemon.poll() is not None:
            return f"fuse-overlayfs: {(daemon.stderr.read().decode(errors='replace') if daemon.stderr else '').strip()[-200:]}"
        time.sleep(0.02)
    daemon.kill()
    return "fuse-overlayfs did not mount within 10 s"


def _die_with_parent() -> None:
    PR_SET_PDEATHSIG = 1
    _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)


def _outermost_mounts_below(source: str) -> list[str]:
    points = sorted(point for point in _mount_points_below(source) if point != source)
    outermost: list[str] = []
    for point in points:
        if not any(point.startswith(other.rstrip("/") + "/") for other in outermost):
            outermost.append(point)
    return outermost


def _bind_writable(source: str, target: str) -> None:
    os.makedirs(target, exist_ok=True)
    _check(_libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source}")


def bind_tree_readonly(source: str, target: str) -> None:
    """A recursive bind with every mount in it read-only (a plain remount affects the top one only)."""
    _check(_libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source} on {target}")
    _readonly_below(target)


def _readonly_below(target: str) -> None:
    for point in _mount_points_below(target):
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        try:
            kept = os.statvfs(point).f_flag
        except OSError:
            continue
        for stat_flag, mount_flag in _KEEP:
            if kept & stat_flag:
                flags |= mount_flag
        _libc.mount(b"none", point.encode(), None, flags, None)  # best effort below the top: a locked mount stays


def _mount_points_below(target: str) -> list[str]:
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as info:
        for line in info:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == target or point.startswith(target.rstrip("/") + "/"):
                points.append(point)
    return points


class LaunchOptions:
    """What the launcher was asked for (``--mount SOURCE=TARGET``, ``--readonly``, ``--bind``, ``--kaggle ROOT``,
    ``--chdir``, ``--root-fs MODE``, ``--no-namespace``, ``--gpu``, ``--drop-capabilities`` (bubblewrap's hop);
    ``--memory`` is accepted and ignored)."""

    def __init__(self) -> None:
        self.mounts: list[tuple[str, str]] = []
        self.readonly: list[str] = []
        self.binds: list[str] = []
        self.kaggle: str | None = None
        self.chdir: str | None = None
        self.root_fs = "read-only"
        self.namespace = True
        self.gpu = False
        self.drop_capabilities = False


def parse_options(options: list[str]) -> LaunchOptions:
    parsed = LaunchOptions()
    parsed.namespace = "--no-namespace" not in options
    parsed.gpu = "--gpu" in options
    parsed.drop_capabilities = "--drop-capabilities" in options
    options = [option for option in options if option not in ("--no-namespace", "--gpu", "--drop-capabilities")]
    for flag, value in zip(options[::2], options[1::2], strict=False):
        if flag == "--mount":
            source, _, target = value.partition("=")
            parsed.mounts.append((source, target))
        elif flag == "--readonly":
            parsed.readonly.append(value)
        elif flag == "--bind":
            parsed.binds.append(value)
        elif flag == "--kaggle":
            parsed.kaggle = value
        elif flag == "--chdir":
            parsed.chdir = value
        elif flag == "--root-fs":
            parsed.root_fs = value
        elif flag == "--memory":
            pass  # kkb once set RLIMIT_DATA here; memory is now counted by the host (cgroup or PSS)
        else:
            raise SystemExit(f"kkb sandbox launcher: unknown option {flag}")
    return parsed


def enter_sandbox(options: LaunchOptions) -> None:
    """The namespaces and the read-only binds in place (without ``--kaggle``: no new root, no PID namespace)."""
    enter_namespaces()
    for folder in options.readonly:  # the input root first: the datasets are then mounted inside it
        bind_readonly(folder, folder)
    for source, target in options.mounts:
        bind_readonly(source, target)


def main(argv: list[str]) -> int:
    if argv == ["--probe"]:
        return probe()
    if argv[:1] == ["--probe-root"]:
        return probe_root(argv[1] if len(argv) > 1 else "read-only")
    split = argv.index("--")
    options, command = parse_options(argv[:split]), argv[split + 1:]
    if options.namespace and options.kaggle:
        return run_in_pid_namespace(options, command)
    if options.namespace:
        enter_sandbox(options)
    if options.drop_capabilities:  # bubblewrap's hop: inside its PID namespace
        drop_capabilities()
    exec_command(command, options.chdir, own_pid_namespace=options.drop_capabilities)
    return 127  # pragma: no cover - exec_command does not return


def exec_command(command: list[str], chdir: str | None, own_pid_namespace: bool = False) -> None:
    """Replace this process by ``command``, with no file descriptor but 0-2 left open.

    In its own PID namespace the command's parent is the namespace's init (PID 1), which a Jupyter kernel
    takes for "my parent died" and exits: ``JPY_PARENT_PID=1`` turns that watch off. The init dies with the
    launcher and takes the kernel with it, so nothing is lost."""
    os.closerange(3, 1 << 20)
    if own_pid_namespace and "JPY_PARENT_PID" in os.environ:
        os.environ["JPY_PARENT_PID"] = "1"
    try:
        if chdir:
            os.chdir(chdir)
        os.execv(command[0], command)
    except OSError as exc:
        print(f"kkb sandbox launcher: cannot start {command[0]}: {exc}", file=sys.stderr)
    os._exit(127)


def run_in_pid_namespace(options: LaunchOptions, command: list[str]) -> int:
    """The launcher's side: new namespaces, an init (PID 1) that builds the root and runs the command, its status."""
    enter_namespaces(pid=True)
    report_read, report_write = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(report_read)
        os._exit(_init(options, command, report_write))
    os.close(report_write)
    _forward_signals(init)
    status = _wait_for(init)
    died_of = os.read(report_read, 16).decode()
    if died_of.isdigit():  # the command died of a signal: so does the launcher, as if it had exec'd it
        signal.signal(int(died_of), signal.SIG_DFL)
        os.kill(os.getpid(), int(died_of))
    return os.waitstatus_to_exitcode(status)


def _init(options: LaunchOptions, command: list[str], report: int) -> int:
    """PID 1 of the kernel's namespace: the new root (with a /proc of this namespace), then the command as PID 2."""
    try:
        _die_with_parent()
        os.setpgid(0, 0)  # a signal to the launcher's group (Jupyter's interrupt) reaches the command once, forwarded
        assert options.kaggle is not None
        new_root(options.kaggle, options.mounts, options.readonly, options.binds, options.root_fs, options.gpu)
    except OSError as exc:
        print(f"kkb sandbox launcher: {exc}", file=sys.stderr)
        return 2
    command_pid = os.fork()
    if command_pid == 0:
        drop_capabilities()
        exec_command(command, options.chdir, own_pid_namespace=True)
    _forward_signals(command_pid)
    while True:  # reap every orphan until the command itself ends
        pid, status = os.waitpid(-1, 0)
        if pid != command_pid:
            continue
        if os.WIFSIGNALED(status):
            os.write(report, str(os.WTERMSIG(status)).encode())
            return 128 + os.WTERMSIG(status)
        return os.waitstatus_to_exitcode(status)


def _forward_signals(pid: int) -> None:
    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for signum in FORWARDED:
        signal.signal(signum, forward)


def _wait_for(pid: int) -> int:
    return os.waitpid(pid, 0)[1]  # PEP 475: retried after a forwarded signal


def drop_capabilities() -> None:
    """Everything but :data:`KEPT_CAPABILITIES` leaves the bounding set: the exec'd command never has it."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        last = 40
    for capability in range(last + 1):
        if capability not in KEPT_CAPABILITIES:
            _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # ambient capabilities would survive the exec


def probe_root(root_fs: str = "read-only") -> int:
    """0 when a new root with /kaggle can be built here (tmpfs, recursive read-only binds or overlays, pivot_root)."""
    import shutil

    root = tempfile.mkdtemp(prefix="kkb-probe-")
    try:
        for name in ("input", "working", "temp", ".sandbox/tmp"):
            os.makedirs(os.path.join(root, name))
        pid = os.fork()
        if pid == 0:  # the child enters the namespaces, so the parent can remove the folder afterwards
            try:
                enter_namespaces(pid=True)
            except OSError as exc:
                print(f"kkb sandbox probe: {exc}", file=sys.stderr)
                os._exit(2)
            init = os.fork()  # PID 1 of the new PID namespace: /proc is mounted from inside it
            if init == 0:
                os._exit(_probe_root_child(root, root_fs))
            os._exit(os.waitstatus_to_exitcode(os.waitpid(init, 0)[1]))
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _probe_root_child(root: str, root_fs: str) -> int:
    try:
        new_root(root, [], [], [], root_fs)
        if os.getpid() != 1 or any(name.isdigit() and name != "1" for name in os.listdir("/proc")):
            print("kkb sandbox probe: the kernel would see the host's processes in /proc", file=sys.stderr)
            return 5
        open("/kaggle/working/x", "w").close()
        with open(os.path.join(root, ".sandbox", "root-filesystem"), encoding="utf-8") as handle:
            recorded = handle.read()
        if root_fs != "read-only" and not recorded.startswith(f"{root_fs}:"):
            print(f"kkb sandbox probe: {recorded}", file=sys.stderr)
            return 4
        writable = ("/usr/kkb-probe",) if root_fs != "read-only" else ()
        for path in ("/kaggle/input/x", "/usr/kkb-probe"):
            try:
                open(path, "w").close()
            except OSError:
                if path in writable:
                    print(f"kkb sandbox probe: {path} is not writable through the {root_fs}", file=sys.stderr)
                    return 4
                continue
            if path not in writable:
                return 3
    except (OSError, KeyError) as exc:
        print(f"kkb sandbox probe: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
