"""Start a command in its own network and mount namespaces: no network, read-only inputs.

    python launch.py [--mount SOURCE=TARGET ...] [--readonly DIR] -- COMMAND ...
    python launch.py --probe

The command (the Jupyter kernel) sees only a loopback interface, so neither it nor any child (Python
or not: curl, pip, a C library) can reach another host. Each SOURCE folder is bind-mounted at TARGET
and made read-only, as Kaggle mounts ``/kaggle/input``; this holds for root too, where ``chmod`` does
not. The mounts exist only inside the namespace and vanish with the kernel, and nothing is copied.
The launcher ``exec``s the command, so the kernel keeps the launcher's pid.

Needs CAP_SYS_ADMIN (root, outside a locked-down container) or unprivileged user namespaces;
``--probe`` exits 0 when this machine allows it. Standard library only; never imports ``builder``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import socket
import struct
import sys
import tempfile

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
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


def enter_namespaces() -> None:
    """New network + mount namespaces; as non-root, inside a new user namespace mapping us to root."""
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(CLONE_NEWNS | CLONE_NEWNET) != 0:
        _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET), "unshare")
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


def main(argv: list[str]) -> int:
    if argv == ["--probe"]:
        return probe()
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1:]
    mounts: list[tuple[str, str]] = []
    readonly: list[str] = []
    for flag, value in zip(options[::2], options[1::2], strict=False):
        if flag == "--mount":
            source, _, target = value.partition("=")
            mounts.append((source, target))
        elif flag == "--readonly":
            readonly.append(value)
        else:
            raise SystemExit(f"kkb sandbox launcher: unknown option {flag}")
    enter_namespaces()
    for folder in readonly:  # the input root first: the datasets are then mounted inside it
        bind_readonly(folder, folder)
    for source, target in mounts:
        bind_readonly(source, target)
    os.execv(command[0], command)
    return 127  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
