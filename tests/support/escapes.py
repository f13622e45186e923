"""The audit's probes as code: user code that tries every way out it found, and the host's traps that tell whether any
worked.

:data:`PROBE` is a module the tests put into a kernel's code (``kkb_escapes.py``, beside ``kkb_host.json``, what
:meth:`HostTraps.config` writes): ``escapes(who)`` tries to read the host user's ``~/.kaggle/kaggle.json`` (its key
known by its hash only: a key in the kernel's files is refused by the build's secret scan) and kkb's credentials, list
``/root`` and read ``/etc/shadow``, open ``/proc/sys/kernel/core_pattern`` for writing, connect to a server on the
host's loopback, write into a host folder, and it leaves a process behind; it returns the ways that
worked, and :func:`raise_if_out` (what a feature function, a factory, a pickle, an encode function or a metric calls)
raises with them, so a build or a dry run only goes on with the user code's own result when none did.

:class:`HostTraps` lays the traps on the host and says what they caught: a real key in a real ``kaggle.json``, kkb's
environment holding a key and the variables an audit found leaking, a folder to write, a listening server, a marker
for left processes. Each trap is checked to be set (the file exists, the server listens), so a probe that fails
inside fails because the sandbox stopped it, not because there was nothing to find.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path

import psutil

from builder.run.host_view import interpreter_folders

HOST_FILE = "kkb_host.json"
LEAKED = ("DATABASE_URL", "GH_PAT", "SENTRY_DSN", "SSH_AUTH_SOCK", "AWS_SECRET_ACCESS_KEY")

PROBE = '''"""Every way out an audit of kkb tried, from inside the user's code."""
import hashlib, json, os, subprocess
from pathlib import Path

HOST = json.loads((Path(__file__).parent / "kkb_host.json").read_text())


def escapes(who):
    found = []
    for path in (HOST["home"] + "/.kaggle/kaggle.json", os.path.expanduser("~/.kaggle/kaggle.json"),
                 "/root/.kaggle/kaggle.json"):
        try:
            key = str(json.loads(Path(path).read_text()).get("key"))
            if hashlib.sha256(key.encode()).hexdigest() == HOST["key_sha256"]:
                found.append("read " + path)
        except (OSError, ValueError, AttributeError):
            pass
    found += ["variable " + name for name in HOST["variables"] if os.environ.get(name)]
    try:
        shown = set(os.listdir("/root")) & set(HOST["root_entries"])
        found += ["listed /root: " + ", ".join(sorted(shown))] if shown else []
    except OSError:
        pass
    try:
        if open("/etc/shadow").read().strip():
            found.append("read /etc/shadow")
    except OSError:
        pass
    try:  # opened, never written
        os.close(os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY))
        found.append("opened core_pattern for writing")
    except OSError:
        pass
    try:
        import socket
        with socket.create_connection(("127.0.0.1", HOST["port"]), timeout=2) as connection:
            connection.sendall(who.encode())
        found.append("reached the host's loopback")
    except OSError:
        pass
    try:
        Path(HOST["folder"], who + ".txt").write_text("escaped")
        found.append("wrote " + HOST["folder"])
    except OSError:
        pass
    subprocess.Popen(["sleep", "600", HOST["marker"]], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # left behind, if it can be
    return found


def raise_if_out(who):
    found = escapes(who)
    if found:
        raise RuntimeError("ESCAPED from " + who + ": " + "; ".join(found))
'''


class HostTraps:
    """The host side: what the probes look for, and whether any of it moved (:meth:`untouched`)."""

    def __init__(self, root: Path) -> None:
        self.key = f"kkb-trap-{uuid.uuid4().hex}"
        self.home = root / "host home"
        (self.home / ".kaggle").mkdir(parents=True)
        (self.home / ".kaggle" / "kaggle.json").write_text(json.dumps({"username": "victim", "key": self.key}))
        self.folder = root / "host folder"
        self.folder.mkdir()
        self.marker = f"kkb-left-{uuid.uuid4().hex}"
        self.reached: list[bytes] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._server.accept()
            except OSError:
                continue
            with connection:
                connection.settimeout(1)
                try:
                    self.reached.append(connection.recv(100) or b"(connected)")
                except OSError:
                    self.reached.append(b"(connected)")

    def set_here(self) -> list[str]:
        """The traps set on this machine, each checked from the host: a probe that finds nothing inside proves
        something only where the thing was there to find (as root: /etc/shadow and /root too)."""
        set_ = []
        if json.loads((self.home / ".kaggle" / "kaggle.json").read_text())["key"] == self.key:
            set_.append("kaggle.json")
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as connection:
            connection.sendall(b"host")
        deadline = time.monotonic() + 5
        while not self.reached and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.reached == [b"host"]:
            set_.append("loopback server")
        probe = self.folder / ".writable"
        probe.write_text("x")
        probe.unlink()
        set_.append("host folder")
        self.reached.clear()  # the host's own check above is no probe's connection
        if os.geteuid() == 0:
            if Path("/etc/shadow").read_text().strip():
                set_.append("/etc/shadow")
            if _host_root_entries():
                set_.append("/root")
        return set_

    def environment(self) -> dict[str, str]:
        """kkb's own environment for the run: its HOME with the key, its credentials, what an audit saw leak."""
        return {"HOME": str(self.home), "KAGGLE_CONFIG_DIR": str(self.home / ".kaggle"), "KAGGLE_USERNAME": "victim",
                "KAGGLE_KEY": self.key, **{name: f"{name.lower()}-{self.key}" for name in LEAKED}}

    def config(self) -> dict[str, object]:
        """What the probes read (``kkb_host.json``): the places and names of the traps."""
        return {"home": str(self.home), "key_sha256": hashlib.sha256(self.key.encode()).hexdigest(),
                "variables": ["KAGGLE_KEY", "KAGGLE_USERNAME", *LEAKED],
                "root_entries": sorted(_host_root_entries()), "port": self.port, "folder": str(self.folder),
                "marker": self.marker}

    def plant(self, folder: Path) -> None:
        """The probe module and its configuration into a kernel's code folder."""
        (folder / "kkb_escapes.py").write_text(PROBE)
        (folder / HOST_FILE).write_text(json.dumps(self.config()))

    def left_processes(self) -> list[int]:
        found = []
        for process in psutil.process_iter(["cmdline"]):
            if self.marker in (process.info["cmdline"] or []):
                found.append(process.pid)
        return found

    def untouched(self) -> list[str]:
        """What moved on the host (empty: nothing); the probes' processes are killed either way."""
        moved = [f"connection {data!r}" for data in self.reached]
        moved += [f"file {path.name}" for path in self.folder.iterdir()]
        left = self.left_processes()
        moved += [f"process {pid} left" for pid in left]
        for pid in left:
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                continue
        return moved

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()


def _host_root_entries() -> set[str]:
    """What this machine's /root holds that the sandbox's private /root must not show (the interpreter's folder there,
    which the sandbox shows at its own path, and the kernel's own .kaggle excepted)."""
    try:
        entries = set(os.listdir("/root"))
    except OSError:
        return set()
    shown = {folder.parts[2] for folder in interpreter_folders() if len(folder.parts) > 2 and folder.parts[1] == "root"}
    return entries - {".kaggle"} - shown


__all__ = ["HOST_FILE", "LEAKED", "PROBE", "HostTraps"]
