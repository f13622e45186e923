"""kkb sandbox: the internet is off for this Python process, as in a Kaggle code-competition rerun.

``builder.run.sandbox`` puts this file first on ``PYTHONPATH`` for the kernel, and kkb's runtime keeps
``PYTHONPATH`` for every step it starts, so each Python process of the run imports it at startup.
Name resolution of any host but this machine fails with the error glibc gives on an offline Kaggle
kernel (``[Errno -3] Temporary failure in name resolution``), and connecting to a non-loopback address
fails with ``[Errno 101] Network is unreachable``. Loopback stays open: ipykernel, gRPC inference
servers (kaggle_evaluation) and DataLoader workers use it on Kaggle too.

Every refused attempt is appended to ``$KKB_SANDBOX_NETLOG`` so the dry run can name the host the
kernel tried to reach. At exit, each process also writes the top-level packages it imported from
site-packages to ``$KKB_SANDBOX_IMPORTS/<pid>.txt``, so the dry run can compare their versions with
Kaggle's image (``builder.run.skew``). Standard library only; never imports ``builder``.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import sys

_LOCAL_NAMES = frozenset({"", "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
_real_getaddrinfo = socket.getaddrinfo
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_sendto = socket.socket.sendto
_own_addresses: set[str] | None = None


def _record(what: str) -> None:
    path = os.environ.get("KKB_SANDBOX_NETLOG")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()} {what}\n")
    except OSError:
        pass


def _hostname() -> str:
    try:
        return socket.gethostname()
    except OSError:
        return ""


def _own() -> set[str]:
    """This machine's own addresses (its hostname resolves to them through /etc/hosts on Kaggle too)."""
    global _own_addresses
    if _own_addresses is None:
        try:
            _own_addresses = {str(info[4][0]) for info in _real_getaddrinfo(_hostname(), None)}
        except OSError:
            _own_addresses = set()
    return _own_addresses


def _text(host: object) -> str:
    if isinstance(host, (bytes, bytearray)):
        return bytes(host).decode("ascii", "replace")
    return "" if host is None else str(host)


def _is_local(host: object) -> bool:
    name = _text(host).strip("[]").split("%")[0].lower()
    if name in _LOCAL_NAMES or name.endswith(".localhost") or name == _hostname().lower():
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified or name in _own()


def _is_address(host: object) -> bool:
    try:
        ipaddress.ip_address(_text(host).strip("[]").split("%")[0])
    except ValueError:
        return False
    return True


def _refuse(host: object, port: object) -> OSError:
    target = f"{_text(host)}:{port}"
    if _is_address(host):
        _record(f"connect {target}")
        return OSError(errno.ENETUNREACH, "Network is unreachable")
    _record(f"resolve {target}")
    return socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")


def _remote(sock: socket.socket, address: object) -> tuple[object, object] | None:
    """(host, port) when ``address`` leaves this machine, else None (loopback, unix sockets)."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple) or not address:
        return None
    host, port = address[0], address[1] if len(address) > 1 else ""
    return None if _is_local(host) else (host, port)


def getaddrinfo(host, port, *args, **kwargs):  # type: ignore[no-untyped-def]
    if not _is_local(host) and not _is_address(host):
        raise _refuse(host, port)
    return _real_getaddrinfo(host, port, *args, **kwargs)


def gethostbyname(host):  # type: ignore[no-untyped-def]
    return getaddrinfo(host, None, socket.AF_INET)[0][4][0]


def _connect(self, address):  # type: ignore[no-untyped-def]
    remote = _remote(self, address)
    if remote is not None:
        raise _refuse(*remote)
    return _real_connect(self, address)


def _connect_ex(self, address):  # type: ignore[no-untyped-def]
    remote = _remote(self, address)
    if remote is not None:
        error = _refuse(*remote)
        return error.errno if error.errno is not None else errno.ENETUNREACH
    return _real_connect_ex(self, address)


def _sendto(self, data, *args):  # type: ignore[no-untyped-def]
    remote = _remote(self, args[-1]) if args else None
    if remote is not None:
        raise _refuse(*remote)
    return _real_sendto(self, data, *args)


class _IgnoreDeadProxy:
    """Python HTTP clients (urllib, requests, pip, httpx, aiohttp) read proxies through
    ``urllib.request.getproxies``: hide the sandbox's dead proxy from them, so they resolve the host
    themselves and fail as on Kaggle, while curl and wget still meet the dead proxy."""

    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name != "urllib.request":
            return None
        import importlib.util

        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader)
        return spec


class _PatchingLoader:
    def __init__(self, loader) -> None:  # type: ignore[no-untyped-def]
        self.loader = loader

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:  # type: ignore[no-untyped-def]
        self.loader.exec_module(module)
        dead = os.environ.get("KKB_SANDBOX_DEAD_PROXY")
        original = module.getproxies

        def getproxies():  # type: ignore[no-untyped-def]
            return {scheme: url for scheme, url in original().items() if url != dead}

        module.getproxies = getproxies
        module.getproxies_environment = getproxies


def _install() -> None:
    socket.getaddrinfo = getaddrinfo
    socket.gethostbyname = gethostbyname
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
    socket.socket.sendto = _sendto  # type: ignore[method-assign]
    if os.environ.get("KKB_SANDBOX_DEAD_PROXY"):
        sys.meta_path.insert(0, _IgnoreDeadProxy())  # type: ignore[arg-type]
    socket.kkb_sandbox_offline = True  # type: ignore[attr-defined]  # lets tests and users see the guard


def _chain() -> None:
    """Run the sitecustomize this file shadows (Debian's, Kaggle's image's), as Python would have."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _record_imports() -> None:
    """The top-level packages this process imported from site-packages (not the standard library, not the kernel's code)."""
    folder = os.environ.get("KKB_SANDBOX_IMPORTS")
    if not folder:
        return
    names = set()
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) or ""
        if "." not in name and not name.startswith("_") and ("site-packages" in where or "dist-packages" in where):
            names.add(name)
    try:
        with open(os.path.join(folder, f"{os.getpid()}.txt"), "w", encoding="utf-8") as handle:
            handle.write("\n".join(sorted(names)))
    except OSError:
        pass


_install()
if os.environ.get("KKB_SANDBOX_IMPORTS"):
    import atexit

    atexit.register(_record_imports)
try:
    _chain()
except Exception as exc:  # a broken site hook must not stop the kernel, as it would not on Kaggle
    print(f"kkb sandbox: the shadowed sitecustomize failed: {exc!r}", file=sys.stderr)
