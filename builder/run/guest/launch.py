"""Start a command in its own network and mount namespaces: no network, read-only inputs, a real /kaggle.

    python launch.py [--kaggle ROOT] [--root-fs overlay|fuse-overlayfs|read-only] [--mount SOURCE=TARGET ...]
                     [--readonly DIR] [--bind DIR ...] [--host DIR ...] [--mask PATH ...] [--home DIR]
                     [--shm-size BYTES] [--processes N] [--join-cgroup FILE] [--chdir DIR] [--no-namespace] -- COMMAND ...
    python launch.py --probe
    python launch.py --probe-root [overlay|fuse-overlayfs|read-only]

``--kaggle ROOT`` (the sandbox root) builds a new root file system for the command, as bubblewrap
does (:mod:`newroot`): a tmpfs holding what a Kaggle image has (the system folders, the masks over what an ordinary
user of this machine cannot read, the ``--host`` folders the interpreter needs at their own paths) and nothing else of
this machine's (no home folder, no ``/root`` but the private ``--home``, no ``/var``, ``/run``, ``/mnt``), a minimal
``/dev`` (null, zero, full, random, urandom, tty, a private shm of ``--shm-size`` bytes and pts; the GPU's nodes only
with ``--gpu``), a fresh ``/proc`` of the command's own PID namespace (its ``sys``, ``sysrq-trigger``, ``irq`` and
``bus`` read-only), a private ``/tmp`` (``ROOT/.sandbox/tmp``), ``ROOT`` itself writable at its own path (so
``$KKB_KAGGLE_ROOT`` keeps working), and ``/kaggle/input`` (read-only), ``/kaggle/working`` and
``/kaggle/temp`` bound from ``ROOT``; then ``pivot_root`` into it. Nothing the command writes lands on
the host outside ``ROOT`` and the ``--bind`` folders, and the host's own ``/kaggle`` is never touched.

``--root-fs overlay`` (or ``fuse-overlayfs``) makes the whole file system writable, as a container's is:
each system folder is an overlay whose lower layer is the host's folder and whose upper layer lives
in ``ROOT/.sandbox/upper`` (or a tmpfs where that cannot hold one), so ``pip install`` into the
interpreter, ``mkdir /kaggle/tmp`` or a write to ``/usr/local`` work, and all of it vanishes with the
sandbox root; the host's folders are never written. Mounts below a host folder stay visible,
read-only. A folder whose overlay cannot be mounted falls back to the read-only bind, and the
launcher writes what it did to ``ROOT/.sandbox/root-filesystem`` for the report.
``--no-namespace`` starts the command as it is (the portable sandbox, or bubblewrap's hop).

The command (the Jupyter kernel) sees only a loopback interface, so neither it nor any child (Python
or not: curl, pip, a C library) can reach another host. Each SOURCE folder is bind-mounted at TARGET
and made read-only, as Kaggle mounts ``/kaggle/input``; this holds for root too, where ``chmod`` does
not. The mounts exist only inside the namespace and vanish with the kernel, and nothing is copied.
With ``--kaggle`` the command runs in its own PID namespace: the launcher stays outside as the
process kkb started (it forwards signals and exits with the command's status), a small init is PID 1
inside (it reaps orphans and forwards signals), and the command is PID 2. The command sees only its
own processes, so no ``/proc/<pid>/root``, ``cwd`` or ``fd`` of a host process leads anywhere. No file
descriptor of the launcher is inherited (all but 0-2 are closed), the command keeps no capability at all (the
bounding, inheritable and ambient sets emptied, ``no_new_privs`` set: no mount, no raw devices, no
``open_by_handle_at``, no setuid program regaining any), and ``--processes N`` limits its tasks (``RLIMIT_NPROC``,
counted in the user namespace; where kkb runs as root the host's pids cgroup counts them: ``--join-cgroup FILE``, the
first thing the launcher does, puts it and everything it starts there).
Without ``--kaggle`` the launcher ``exec``s the command, which keeps the launcher's pid.

Needs CAP_SYS_ADMIN (root, outside a locked-down container) or unprivileged user namespaces;
``--probe`` exits 0 when this machine allows it. Standard library only; never imports ``builder``.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import resource
import signal
import socket
import struct
import sys
import tempfile

try:  # imported as a module of kkb (builder.run.guest.launch)
    from . import newroot
except ImportError:  # run as a script (python launch.py, -I or not): newroot.py is beside it
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import newroot  # type: ignore[no-redef,import-not-found]

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_REC, MS_PRIVATE = newroot.MS_REC, newroot.MS_PRIVATE
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, PR_SET_NO_NEW_PRIVS = 24, 47, 4, 38
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
SIOCSIFFLAGS = 0x8914
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40
VALUED = ("--mount", "--readonly", "--bind", "--host", "--mask", "--home", "--kaggle", "--chdir", "--root-fs",
          "--shm-size", "--processes", "--join-cgroup", "--memory")

_libc = newroot._libc
_check = newroot.check
bind_readonly = newroot.bind_readonly
gpu_nodes = newroot.gpu_nodes


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


class LaunchOptions:
    """What the launcher was asked for (``--mount SOURCE=TARGET``, ``--readonly``, ``--bind``, ``--host``, ``--mask``,
    ``--home``, ``--kaggle ROOT``, ``--chdir``, ``--root-fs MODE``, ``--shm-size``, ``--processes``, ``--join-cgroup``,
    ``--no-namespace``, ``--gpu``, ``--drop-capabilities`` (bubblewrap's hop); ``--memory`` is accepted and ignored)."""

    def __init__(self) -> None:
        self.plan = newroot.RootPlan("")
        self.kaggle: str | None = None
        self.chdir: str | None = None
        self.namespace = True
        self.drop_capabilities = False
        self.processes: int | None = None
        self.cgroup: str | None = None

    @property
    def mounts(self) -> list[tuple[str, str]]:
        return self.plan.mounts

    @property
    def readonly(self) -> list[str]:
        return self.plan.readonly


def parse_options(options: list[str]) -> LaunchOptions:
    parsed = LaunchOptions()
    parsed.namespace = "--no-namespace" not in options
    parsed.plan.gpu = "--gpu" in options
    parsed.drop_capabilities = "--drop-capabilities" in options
    options = [option for option in options if option not in ("--no-namespace", "--gpu", "--drop-capabilities")]
    for flag, value in zip(options[::2], options[1::2], strict=False):
        if flag not in VALUED:
            raise SystemExit(f"kkb sandbox launcher: unknown option {flag}")
        _take(parsed, flag, value)
    return parsed


def _take(parsed: LaunchOptions, flag: str, value: str) -> None:
    plan = parsed.plan
    if flag == "--mount":
        source, _, target = value.partition("=")
        plan.mounts.append((source, target))
    elif flag in ("--readonly", "--bind", "--host", "--mask"):
        {"--readonly": plan.readonly, "--bind": plan.binds, "--host": plan.hosts, "--mask": plan.masks}[flag].append(value)
    elif flag == "--home":
        plan.home = value
    elif flag == "--kaggle":
        parsed.kaggle = plan.root = value
    elif flag == "--chdir":
        parsed.chdir = value
    elif flag == "--root-fs":
        plan.root_fs = value
    elif flag == "--shm-size":
        plan.shm_bytes = int(value)
    elif flag == "--processes":
        parsed.processes = int(value)
    elif flag == "--join-cgroup":
        parsed.cgroup = value
    # --memory: kkb once set RLIMIT_DATA here; memory is now counted by the host (cgroup or PSS)


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
    if options.cgroup:  # first of all: every process of the run is counted from here on
        join_cgroup(options.cgroup)
    if options.namespace and options.kaggle:
        return run_in_pid_namespace(options, command)
    if options.namespace:
        enter_sandbox(options)
    if options.drop_capabilities:  # bubblewrap's hop: inside its PID namespace
        cover_proc()
        confine(options.processes)
    exec_command(command, options.chdir, own_pid_namespace=options.drop_capabilities)
    return 127  # pragma: no cover - exec_command does not return


def join_cgroup(procs: str) -> None:
    """This process (and so all it starts) into the cgroup whose ``cgroup.procs`` is ``procs``."""
    try:
        _write(procs, str(os.getpid()))
    except OSError as exc:
        print(f"kkb sandbox launcher: cannot join {procs}: {exc}", file=sys.stderr)
        os._exit(2)


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
        newroot.die_with_parent()
        os.setpgid(0, 0)  # a signal to the launcher's group (Jupyter's interrupt) reaches the command once, forwarded
        newroot.new_root(options.plan)
    except OSError as exc:
        print(f"kkb sandbox launcher: {exc}", file=sys.stderr)
        return 2
    command_pid = os.fork()
    if command_pid == 0:
        confine(options.processes)
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


def cover_proc() -> None:
    """/proc's system knobs read-only in bubblewrap's fresh /proc, as :mod:`newroot` makes them (bubblewrap run by root
    leaves them writable; unprivileged, it covers them itself and this finds nothing left to do)."""
    for name in newroot.PROC_READ_ONLY:
        path = "/proc/" + name
        if os.path.exists(path):  # (procfs answers access() for itself: no test of writability here)
            with contextlib.suppress(OSError):
                bind_readonly(path, path)


def confine(processes: int | None) -> None:
    """Just before the command starts: no capability left (:func:`drop_capabilities`), and at most ``processes``
    tasks of its user (its threads count) from here on."""
    drop_capabilities()
    if processes:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """No capability survives the exec: each leaves the bounding set, the inheritable and ambient sets are emptied
    (root's exec regains what is in them), and ``no_new_privs`` keeps a setuid program from regaining any."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        last = 40
    for capability in range(last + 1):
        _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # ambient capabilities would survive the exec
    header, data = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if _libc.capget(ctypes.byref(header), data) == 0:
        for part in data:
            part.inheritable = 0
        _libc.capset(ctypes.byref(header), data)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


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
        plan = newroot.RootPlan(root)
        plan.root_fs = root_fs
        newroot.new_root(plan)
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
