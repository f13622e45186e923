"""No way out of the namespace sandboxes: a step that tries every path to the host finds none.

The step is what a public notebook nobody has read could do: write through ``/proc/<pid>/root`` of a
host process (kkb's own pid, every pid it can list), ``/proc/1/cwd``, read a file descriptor the
launcher was given, open or create a disk's device node. Each confining isolation this machine
allows is tested (bubblewrap, kkb's namespace launcher); a machine with neither skips with the probe's
reason. The portable mode says plainly that it does not confine.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from builder.kkb_runtime.vocabulary import Isolation
from builder.run.guest.newroot import SYSTEM_FOLDERS
from builder.run.host_view import interpreter_folders
from builder.run.isolation import DESCRIPTIONS, launcher_argv, probe
from builder.run.sandbox import SandboxSpec, finish_run, prepare_sandbox

CONFINING = ["bwrap", "namespace"]

STEP = r"""
import glob, json, os, stat, sys
host_pid, host_dir, fd, name = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
seen = {"pid": os.getpid(), "pids": sorted(int(n) for n in os.listdir("/proc") if n.isdigit()), "wrote": [],
        "read": [], "devices": [], "mknod": []}
targets = [f"/proc/{host_pid}/root{host_dir}", f"/proc/{host_pid}/cwd", "/proc/1/cwd", "/proc/1/root/tmp"]
targets += [p + host_dir for p in glob.glob("/proc/[0-9]*/root")] + [p + "/tmp" for p in glob.glob("/proc/[0-9]*/root")]
for folder in targets:
    try:
        with open(os.path.join(folder, name), "w") as handle:
            handle.write("x")
        seen["wrote"].append(folder)
    except OSError:
        pass
for path in [f"/proc/{host_pid}/root{host_dir}/secret.txt", f"/proc/{host_pid}/cwd/secret.txt",
             *(p + host_dir + "/secret.txt" for p in glob.glob("/proc/[0-9]*/root")),
             *(p for p in glob.glob("/proc/[0-9]*/fd/*"))]:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe would block
            continue
        with open(path) as handle:
            if "host-only" in handle.read():
                seen["read"].append(path)
    except (OSError, UnicodeDecodeError):
        pass
try:
    if b"host-only" in os.pread(fd, 100, 0):
        seen["read"].append(f"fd {fd}")
except OSError:
    pass
for name in sorted(os.listdir("/dev")):
    try:
        if stat.S_ISBLK(os.stat("/dev/" + name).st_mode) or name in ("mem", "kmem", "port", "kmsg"):
            seen["devices"].append(name)
    except OSError:
        pass
for folder in ("/kaggle/working", "/tmp", "/dev"):
    try:
        os.mknod(folder + "/sda", 0o600 | stat.S_IFBLK, os.makedev(8, 0))
        seen["mknod"].append(folder)
    except OSError:
        pass
print(json.dumps(seen))
"""


def _mode(mode: str) -> str:
    problem = probe(Isolation(mode))
    if problem is not None:
        pytest.skip(f"{mode} isolation (a confining one) is not available here: {problem}")
    return mode


@pytest.mark.parametrize("mode", CONFINING)
def test_a_step_finds_no_way_to_the_host(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    mode = _mode(mode)
    monkeypatch.setenv("KKB_SANDBOX_ROOT_FS", "read-only")
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text("host-only data\n")
    monkeypatch.chdir(host)  # the launcher's cwd: /proc/<launcher>/cwd would lead here
    box = prepare_sandbox(SandboxSpec(mounts=(), rerun=False, isolation=mode), tmp_path / "root")  # type: ignore[arg-type]
    step = box.working_dir / "step.py"
    step.write_text(STEP)
    before = sorted(path.name for path in host.iterdir())
    escaped = f"kkb-escaped-{os.getpid()}-{mode}.txt"
    fd = os.open(host / "secret.txt", os.O_RDONLY)
    try:
        out = subprocess.run([*box.launcher(), sys.executable, "/kaggle/working/step.py", str(os.getpid()), str(host), str(fd), escaped],
                             env={**box.env, "PYTHONPATH": ""}, capture_output=True, text=True, timeout=60, pass_fds=(fd,))
    finally:
        os.close(fd)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])

    assert os.getpid() not in seen["pids"] and len(seen["pids"]) <= 3, seen["pids"]  # its own processes only
    assert seen["read"] == []
    assert seen["devices"] == []
    assert seen["mknod"] == []
    # Whatever it wrote stayed inside the sandbox: the host is unchanged.
    assert sorted(path.name for path in host.iterdir()) == before
    assert not Path("/tmp", escaped).exists()
    assert not list(tmp_path.glob("*.txt"))


@pytest.mark.parametrize("mode", CONFINING)
def test_the_dev_of_a_sandbox_is_minimal(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    mode = _mode(mode)
    monkeypatch.setenv("KKB_SANDBOX_ROOT_FS", "read-only")
    box = prepare_sandbox(SandboxSpec(mounts=(), rerun=False, isolation=mode), tmp_path / "root")  # type: ignore[arg-type]
    code = ("import json, os; print(json.dumps(sorted(n for n in os.listdir('/dev') if not os.path.islink('/dev/' + n))));"
            "print(open('/dev/urandom', 'rb').read(4) != b'', open('/dev/zero', 'rb').read(2));"
            "open('/dev/null', 'w').write('x'); open('/dev/shm/x', 'w').write('x')")
    out = subprocess.run([*box.launcher(), sys.executable, "-c", code], env={**box.env, "PYTHONPATH": ""},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    nodes = set(json.loads(out.stdout.splitlines()[0]))
    assert {"null", "zero", "full", "random", "urandom", "tty", "shm"} <= nodes
    assert not {name for name in nodes if name.startswith(("sd", "vd", "nvme", "nvidia", "loop", "mem"))}
    assert out.stdout.splitlines()[1] == "True b'\\x00\\x00'"


VIEW = r"""
import json, os, resource, stat, sys
seen = {"top": sorted(os.listdir("/")), "root": sorted(os.listdir("/root")), "home": os.environ["HOME"],
        "caps": {line.split(":")[0]: int(line.split()[1], 16) for line in open("/proc/self/status") if line.startswith("Cap")},
        "variables": sorted(os.environ), "tmp": sorted(os.listdir("/tmp"))}
seen["shadow"] = open("/etc/shadow").read() if os.path.exists("/etc/shadow") else None
for knob in ("/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"):
    try:
        os.close(os.open(knob, os.O_WRONLY))  # opened, never written
        seen[knob] = "opened"
    except OSError as exc:
        seen[knob] = exc.errno
shm = os.statvfs("/dev/shm")
seen["shm"] = shm.f_blocks * shm.f_frsize
started = 0
for _ in range(int(sys.argv[1]) * 3):  # a fork bomb's first steps: stopped at the task limit
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        import time
        time.sleep(30)
        os._exit(0)
    started += 1
seen["started"] = started
print(json.dumps(seen))
"""


@pytest.mark.parametrize("mode", CONFINING)
def test_the_sandbox_shows_nothing_of_this_machine(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a Kaggle image has, and the kernel's own HOME, /root and /tmp: no home folder, no secret of /etc, none of
    kkb's variables, /proc's knobs read-only, no capability as root, a task limit, /dev/shm no larger than the memory."""
    mode = _mode(mode)
    tasks, memory = 40, 256 << 20
    monkeypatch.setenv("KKB_SANDBOX_PROCESSES", str(tasks))
    for name in ("KAGGLE_KEY", "DATABASE_URL", "GH_PAT", "SENTRY_DSN", "SSH_AUTH_SOCK"):
        monkeypatch.setenv(name, "kkb-trap")
    marker = Path(tempfile.mkdtemp(prefix="kkb-host-tmp-"))  # in this machine's /tmp
    try:
        box = prepare_sandbox(SandboxSpec(mounts=(), rerun=False, isolation=mode, memory_bytes=memory),  # type: ignore[arg-type]
                              tmp_path / "root")
        out = subprocess.run([*box.launcher(), sys.executable, "-c", VIEW, str(tasks)], env=box.env, capture_output=True,
                             text=True, timeout=120)
        finish_run(box)
    finally:
        marker.rmdir()
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])

    shown = set(seen["top"]) - {"kaggle", "proc", "dev", "sys", "tmp", "root"}
    assert shown <= set(SYSTEM_FOLDERS) | {folder.parts[1] for folder in interpreter_folders()}, seen["top"]
    assert not {"home", "mnt", "var", "run", "srv", "media", "boot"} & set(seen["top"])
    hidden = _host_root() - {".kaggle"} - {folder.parts[2] for folder in interpreter_folders() if folder.parts[1] == "root"}
    assert not set(seen["root"]) & hidden, seen["root"]  # the host's /root (this machine has one: {hidden})
    assert seen["home"] == str(box.private_dir / "home") and marker.name not in seen["tmp"]
    assert seen["shadow"] in ("", None) and not {"KAGGLE_KEY", "DATABASE_URL", "GH_PAT", "SENTRY_DSN", "SSH_AUTH_SOCK"} & set(
        seen["variables"])
    assert set(seen["caps"].values()) == {0}, seen["caps"]  # no capability, whoever runs kkb
    # kkb run by root: root in the sandbox is the host's root, and only the read-only mount stops it; run by another
    # user, the file's owner (the host's root) stops it too
    assert seen["/proc/sys/kernel/core_pattern"] in ((errno.EROFS,) if os.geteuid() == 0 else (errno.EROFS, errno.EACCES))
    assert seen["/proc/sysrq-trigger"] in (errno.EROFS, errno.EACCES, errno.ENOENT)  # read-only, or no such knob
    assert seen["shm"] <= memory
    assert seen["started"] < tasks, seen["started"]


def _host_root() -> set[str]:
    try:
        return set(os.listdir("/root"))
    except OSError:
        return set()


def test_the_gpu_nodes_exist_only_when_the_run_uses_the_gpu(tmp_path: Path) -> None:
    assert "--gpu" in launcher_argv(Isolation.NAMESPACE, tmp_path, (), [], None, gpu=True)
    assert "--gpu" not in launcher_argv(Isolation.NAMESPACE, tmp_path, (), [], None)
    bwrap = launcher_argv(Isolation.BWRAP, tmp_path, (), [], None)
    assert ["--dev", "/dev"] == bwrap[bwrap.index("--dev"):bwrap.index("--dev") + 2]
    assert "--dev-bind" not in bwrap and "--unshare-pid" in bwrap and ["--proc", "/proc"] == bwrap[bwrap.index("--proc"):][:2]


def test_the_portable_fallback_says_it_does_not_confine() -> None:
    assert "does NOT confine" in DESCRIPTIONS[Isolation.PYTHON]
