"""The kernel's own root file system, built by kkb's namespace launcher (``launch.py --kaggle ROOT``) as bubblewrap builds it.

A tmpfs becomes the new ``/``; into it go only what a Kaggle image has, never this machine's own folders:

- the system folders (:data:`SYSTEM_FOLDERS`: ``/usr``, ``/bin``, ``/lib*``, ``/etc``), read-only or
  through an overlay (:class:`Layers`), with every file and folder of ``/etc`` that an ordinary user of this
  machine cannot read (``/etc/shadow``, ``/etc/ssl/private``, ...) masked: an empty file or folder in its place;
- the host folders the kernel's interpreter needs (``host``: its prefix, its import path, kkb's package), at their own
  paths, the same way; nothing else of ``/home``, ``/root``, ``/opt``, ``/var``, ``/run``, ``/mnt``, a checkout, ...;
- ``/root`` (and ``$HOME``) the sandbox's own private, empty home; ``/tmp`` its own; a minimal ``/dev`` whose
  ``/dev/shm`` is sized to the run's memory limit; a fresh ``/proc`` of the kernel's PID namespace with
  ``/proc/sys``, ``/proc/sysrq-trigger``, ``/proc/irq`` and ``/proc/bus`` read-only; ``/sys`` read-only;
- the sandbox root writable at its own path, the kernel's inputs read-only, ``/kaggle/{input,working,temp}``.

Standard library only; never imports ``builder`` (it runs as a script beside ``launch.py``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import stat

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
MNT_DETACH = 2
# pivot_root has no glibc wrapper: the syscall number per architecture.
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217, "riscv64": 41}
# The top-level folders of this machine the kernel sees: what a Kaggle image has (the system's libraries, tools,
# configuration; an interpreter elsewhere, /opt/conda's, is shown by its own folder). Top-level links among them (a
# merged /usr's /bin -> usr/bin) stay links.
SYSTEM_FOLDERS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc")
# /proc entries the kernel may read and never write (bubblewrap covers the same ones).
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
# The only device nodes a kernel sees (bubblewrap's --dev set); the GPU's are added when the run uses one.
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
# statvfs flag -> mount flag: a remount inside a user namespace must keep the locked flags.
_KEEP = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
         (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


class RootPlan:
    """What the new root holds besides the system folders (the launcher's options)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.mounts: list[tuple[str, str]] = []  # (source, target): read-only inputs
        self.readonly: list[str] = []  # host folders read-only at their own paths
        self.binds: list[str] = []  # host folders writable at their own paths (the kernel's ipc sockets)
        self.hosts: list[str] = []  # host folders the interpreter needs, at their own paths through the layers
        self.masks: list[str] = []  # system paths shown empty (an unreadable /etc/shadow)
        self.home: str | None = None  # the sandbox's private home, shown as /root
        self.root_fs = "read-only"
        self.gpu = False
        self.shm_bytes: int | None = None  # /dev/shm's size (the run's memory limit)


def new_root(plan: RootPlan) -> None:
    """Build the kernel's file system in a tmpfs (see the module docstring) and ``pivot_root`` into it."""
    root = plan.root
    staging = os.path.join(root, ".sandbox", "newroot")
    os.makedirs(staging, exist_ok=True)
    check(_libc.mount(b"tmpfs", staging.encode(), b"tmpfs", 0, b"mode=0755"), "tmpfs for the new root")
    layers = Layers(root, plan.root_fs)
    _system_folders(staging, layers)
    for path in plan.masks:
        mask(staging + path)
    _bind_system(staging, plan.gpu, plan.shm_bytes)
    bind_writable(os.path.join(root, ".sandbox", "tmp"), os.path.join(staging, "tmp"))
    if plan.home:
        bind_writable(plan.home, os.path.join(staging, "root"))
    for folder in plan.hosts:  # the interpreter's folders, before the sandbox root (which may lie below one)
        os.makedirs(staging + folder, exist_ok=True)
        layers.mount(folder, staging + folder)
    for folder in [root, *plan.binds]:  # writable at their own paths: the sandbox root, the kernel's ipc folder
        bind_writable(folder, staging + folder)
    for folder in plan.readonly:
        try:
            os.makedirs(staging + folder, exist_ok=True)  # a folder in the private /tmp needs its mount point
        except OSError:
            pass
        bind_readonly(folder, staging + folder)
    for source, target in plan.mounts:
        bind_readonly(source, staging + target)
    _bind_kaggle(staging, root, layers.writable)
    if not layers.writable:
        check(_libc.mount(b"none", staging.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None), "make / read-only")
    layers.record()
    os.chdir(staging)
    check(_libc.syscall(SYS_PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root")
    check(_libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")


def _system_folders(staging: str, layers: Layers) -> None:
    """The system folders of the host's / in the new root: links as links, folders through the layers."""
    for name in SYSTEM_FOLDERS:
        source, target = "/" + name, os.path.join(staging, name)
        if os.path.islink(source):
            os.symlink(os.readlink(source), target)
        elif os.path.isdir(source):
            os.mkdir(target)
            layers.mount(source, target)


def mask(target: str) -> None:
    """An empty file (``/dev/null``, read-only) or an empty read-only folder where ``target`` was."""
    try:
        info = os.lstat(target)
    except OSError:
        return
    if stat.S_ISDIR(info.st_mode):
        check(_libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0000,size=4k"), f"mask {target}")
        _libc.mount(b"none", target.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    elif stat.S_ISREG(info.st_mode):
        bind_readonly("/dev/null", target)


def _bind_system(staging: str, gpu: bool, shm_bytes: int | None) -> None:
    """A minimal /dev, a fresh /proc (of the caller's PID namespace: call it from inside) with its system knobs
    read-only, /sys read-only."""
    minimal_dev(os.path.join(staging, "dev"), gpu, shm_bytes)
    proc = os.path.join(staging, "proc")
    os.mkdir(proc)
    check(_libc.mount(b"proc", proc.encode(), b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "a fresh /proc")
    for name in PROC_READ_ONLY:  # /proc/sys/kernel/core_pattern writable by root would run code on the host
        if os.path.exists(os.path.join(proc, name)):
            bind_readonly(os.path.join(proc, name), os.path.join(proc, name))
    if os.path.isdir("/sys"):
        os.mkdir(os.path.join(staging, "sys"))
        bind_tree_readonly("/sys", os.path.join(staging, "sys"))


def minimal_dev(dev: str, gpu: bool, shm_bytes: int | None = None) -> None:
    """A tmpfs with the host's harmless nodes bound in (no mknod needed), private shm and pts, the usual links."""
    os.mkdir(dev)
    check(_libc.mount(b"tmpfs", dev.encode(), b"tmpfs", MS_NOSUID, b"mode=0755"), "tmpfs /dev")
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
        check(_libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source}")
    for name in ("shm", "pts"):
        os.mkdir(os.path.join(dev, name))
    # DataLoader workers share tensors in /dev/shm: the kernel's own, not the host's, and no larger than its memory
    size = f",size={shm_bytes}" if shm_bytes else ""
    check(_libc.mount(b"tmpfs", os.path.join(dev, "shm").encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                      f"mode=1777{size}".encode()), "tmpfs /dev/shm")
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
        bind_writable(os.path.join(root, ".sandbox", "kaggle"), kaggle)
    for name in ("input", "working", "temp", *(["src"] if os.path.isdir(os.path.join(root, "src")) else [])):
        os.makedirs(os.path.join(kaggle, name))
        check(_libc.mount((staging + os.path.join(root, name)).encode(), os.path.join(kaggle, name).encode(), None,
                          MS_BIND | MS_REC, None), f"bind /kaggle/{name}")
    _readonly_below(os.path.join(kaggle, "input"))


class Layers:
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
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=die_with_parent)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if os.path.ismount(target):
            return None
        if daemon.poll() is not None:
            return f"fuse-overlayfs: {(daemon.stderr.read().decode(errors='replace') if daemon.stderr else '').strip()[-200:]}"
        time.sleep(0.02)
    daemon.kill()
    return "fuse-overlayfs did not mount within 10 s"


def die_with_parent() -> None:
    PR_SET_PDEATHSIG = 1
    _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)


def _outermost_mounts_below(source: str) -> list[str]:
    points = sorted(point for point in _mount_points_below(source) if point != source)
    outermost: list[str] = []
    for point in points:
        if not any(point.startswith(other.rstrip("/") + "/") for other in outermost):
            outermost.append(point)
    return outermost


def bind_writable(source: str, target: str) -> None:
    os.makedirs(target, exist_ok=True)
    check(_libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source}")


def bind_readonly(source: str, target: str) -> None:
    check(_libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source} on {target}")
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY
    kept = os.statvfs(target).f_flag
    for stat_flag, mount_flag in _KEEP:
        if kept & stat_flag:
            flags |= mount_flag
    check(_libc.mount(b"none", target.encode(), None, flags, None), f"make {target} read-only")


def bind_tree_readonly(source: str, target: str) -> None:
    """A recursive bind with every mount in it read-only (a plain remount affects the top one only)."""
    check(_libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source} on {target}")
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
