"""The Kaggle-like sandbox: layout, environment, network guard, read-only mounts. No kernel is started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import Isolation, Layout
from builder.project.kaggle_env import DEAD_PROXY
from builder.run.isolation import GUEST_DIR
from builder.run.sandbox import (
    Mount,
    SandboxSpec,
    blocked_network,
    input_snapshot,
    input_writes,
    isolation_mode,
    kernel_environment,
    mount_path,
    prepare_sandbox,
    remove_sandbox,
)
from tests.support.files import build_file_tree

NAMESPACES = isolation_mode("auto") != "python"
needs_namespaces = pytest.mark.skipif(not NAMESPACES, reason="no network/mount namespaces on this machine")


@pytest.fixture()
def sources(tmp_path: Path) -> dict[str, Path]:
    code = build_file_tree(tmp_path / "code", {"kkb_kernel.json": "{}", "pkg/model.py": "X = 1\n"})
    data = build_file_tree(tmp_path / "data", {"sample_submission.csv": "id,target\na,0\n", "test.csv": "id,x\na,1\n"})
    return {"code": code, "data": data}


def _spec(sources: dict[str, Path], **kwargs: object) -> SandboxSpec:
    mounts = (Mount(sources["code"], "datasets/me/thing-code"), Mount(sources["data"], "competitions/comp"))
    return SandboxSpec(mounts=mounts, **{"rerun": False, **kwargs})  # type: ignore[arg-type]


def _python(box_env: dict[str, str], code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-u", "-c", code], env=box_env, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_current_layout_puts_competitions_and_datasets_where_kaggle_does(tmp_path: Path, sources: dict[str, Path]) -> None:
    box = prepare_sandbox(_spec(sources, isolation="python"), tmp_path / "root")

    assert (box.input_dir / "competitions/comp/test.csv").read_text() == "id,x\na,1\n"
    assert (box.input_dir / "datasets/me/thing-code/pkg/model.py").is_file()
    assert box.working_dir == box.root / "working" and box.working_dir.is_dir()
    assert (box.root / "temp").is_dir()


def test_legacy_layout_drops_the_owner_and_kind(tmp_path: Path, sources: dict[str, Path]) -> None:
    box = prepare_sandbox(_spec(sources, layout="legacy", isolation="python"), tmp_path / "root")

    assert sorted(path.name for path in box.input_dir.iterdir()) == ["comp", "thing-code"]
    assert str(mount_path("competitions/comp", Layout.LEGACY)) == "comp"
    assert str(mount_path("datasets/owner/slug", Layout.LEGACY)) == "slug"
    assert str(mount_path("datasets/owner/slug", Layout.CURRENT)) == "datasets/owner/slug"


def test_mounts_that_collide_in_the_legacy_layout_are_refused(tmp_path: Path, sources: dict[str, Path]) -> None:
    spec = SandboxSpec(mounts=(Mount(sources["code"], "datasets/a/same"), Mount(sources["data"], "datasets/b/same")),
                       rerun=False, layout=Layout.LEGACY, isolation=Isolation.PYTHON)
    with pytest.raises(DryRunError, match="overlap"):
        prepare_sandbox(spec, tmp_path / "root")


@pytest.mark.parametrize("target", ["/abs", "../escape", "datasets/../../x"])
def test_mount_targets_stay_under_input(target: str) -> None:
    with pytest.raises(DryRunError, match="relative path under input"):
        mount_path(target, Layout.CURRENT)


def test_a_missing_source_or_a_used_root_is_an_error(tmp_path: Path, sources: dict[str, Path]) -> None:
    with pytest.raises(DryRunError, match="not a folder"):
        prepare_sandbox(SandboxSpec(mounts=(Mount(tmp_path / "nope", "competitions/x"),), rerun=False), tmp_path / "r1")
    build_file_tree(tmp_path / "r2", {"leftover": "x"})
    with pytest.raises(DryRunError, match="not empty"):
        prepare_sandbox(_spec(sources), tmp_path / "r2")


def test_environment_is_a_kaggle_batch_run_without_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"KAGGLE_USERNAME": "me", "KAGGLE_KEY": "k" * 32, "KAGGLE_API_TOKEN": "t", "HF_TOKEN": "hf",
                        "GITHUB_TOKEN": "gh", "AWS_SECRET_ACCESS_KEY": "a", "OPENAI_API_KEY": "o", "KKB_OTHER": "x",
                        "PYTHONPATH": "/somewhere/else", "HTTPS_PROXY": "http://corp:3128", "LANG": "C.UTF-8",
                        "PIP_FIND_LINKS": "/host/wheels", "PYENV_ROOT": "/host/pyenv",
                        "HF_HUB_OFFLINE": "1"}.items():  # a host shell's (or kkb's own build's) offline switch
        monkeypatch.setenv(name, value)
    root = tmp_path / "root"
    commit = kernel_environment(root, rerun=False, proxies=False)
    rerun = kernel_environment(root, rerun=True, proxies=False)

    assert "KAGGLE_IS_COMPETITION_RERUN" not in commit and rerun["KAGGLE_IS_COMPETITION_RERUN"] == "1"
    for env in (commit, rerun):
        assert env["KKB_KAGGLE_ROOT"] == str(root) and env["KAGGLE_KERNEL_RUN_TYPE"] == "Batch"
        assert env["KAGGLE_URL_BASE"] == "https://www.kaggle.com"  # "am I on Kaggle?" checks take Kaggle's branch
        assert "HF_HUB_OFFLINE" not in env and "TRANSFORMERS_OFFLINE" not in env  # Kaggle sets neither
        for name in ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN", "HF_TOKEN", "GITHUB_TOKEN",
                     "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "KKB_OTHER", "HTTPS_PROXY", "LANG", "PIP_FIND_LINKS",
                     "PYENV_ROOT"):
            assert name not in env, name
        for name in ("HOME", "KAGGLE_CONFIG_DIR", "TMPDIR", "XDG_CACHE_HOME", "PYTHONUSERBASE"):
            assert Path(env[name]).is_relative_to(root), name  # Kaggle's /root/.local is the sandbox's home
        # the guard, then Kaggle's entries (an empty one: the working folder), never the caller's path
        assert env["PYTHONPATH"] == f"{root / '.sandbox' / 'site'}::/opt/facets/facets_overview/python/"
        # kkb's pip shim first, then this interpreter, as on Kaggle the image's
        assert env["PATH"].split(os.pathsep)[:2] == [str(root / ".sandbox" / "bin"), str(Path(sys.executable).parent)]


def test_credentials_cannot_be_smuggled_in_through_extra_env(tmp_path: Path) -> None:
    with pytest.raises(DryRunError, match="KAGGLE_KEY"):
        kernel_environment(tmp_path, rerun=False, extra_env={"KAGGLE_KEY": "x"})
    assert kernel_environment(tmp_path, rerun=False, extra_env={"MY_FLAG": "1"})["MY_FLAG"] == "1"


def test_dead_proxies_only_where_no_namespace_blocks_the_network(tmp_path: Path) -> None:
    python_mode = kernel_environment(tmp_path, rerun=False, proxies=True)
    namespace_mode = kernel_environment(tmp_path, rerun=False, proxies=False)
    assert python_mode["HTTPS_PROXY"] == python_mode["http_proxy"] == DEAD_PROXY
    assert "127.0.0.1" in python_mode["NO_PROXY"]
    assert "HTTPS_PROXY" not in namespace_mode and "https_proxy" not in namespace_mode


# --- the Python guard (portable mode): subprocesses with the kernel's environment ------------------------


@pytest.fixture()
def python_box(tmp_path: Path, sources: dict[str, Path]):  # type: ignore[no-untyped-def]
    return prepare_sandbox(_spec(sources, isolation="python"), tmp_path / "root")


def test_guard_fails_downloads_as_an_offline_kaggle_kernel_does(python_box) -> None:  # type: ignore[no-untyped-def]
    code = ("import urllib.request\n"
            "try:\n    urllib.request.urlopen('https://huggingface.co/timm/resnet18/resolve/main/model.safetensors', timeout=5)\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
            "print(sorted(urllib.request.getproxies().items()))")
    out = _python(python_box.env, code, python_box.working_dir)

    assert out.returncode == 0, out.stderr
    assert "URLError <urlopen error [Errno -3] Temporary failure in name resolution>" in out.stdout
    assert "[('no', 'localhost,127.0.0.1,::1')]" in out.stdout  # the dead proxy is hidden from Python's clients...
    assert python_box.env["HTTPS_PROXY"] == DEAD_PROXY  # ...but still set for curl and wget
    assert blocked_network(python_box.root) == ["resolve huggingface.co:443"]


def test_guard_blocks_raw_addresses_and_grandchildren_but_not_loopback(python_box) -> None:  # type: ignore[no-untyped-def]
    code = ("import socket, subprocess, sys\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
            "socket.create_connection(s.getsockname(), timeout=5).close(); print('loopback ok')\n"
            "print(socket.getaddrinfo('localhost', 80)[0][4][0] in ('127.0.0.1', '::1'))\n"
            "child = 'import socket\\ntry: socket.create_connection((\"10.255.255.1\", 443), timeout=5)\\n'"
            " + 'except OSError as e: print(\"child:\", e)'\n"
            "subprocess.run([sys.executable, '-c', child])\n"
            "print(socket.socket().connect_ex(('192.0.2.1', 80)))")
    out = _python(python_box.env, code, python_box.working_dir)

    assert out.stdout.splitlines() == ["loopback ok", "True", "child: [Errno 101] Network is unreachable", "101"], out.stderr
    assert blocked_network(python_box.root) == ["connect 10.255.255.1:443", "connect 192.0.2.1:80"]


def test_guard_runs_the_sitecustomize_it_shadows(tmp_path: Path, python_box) -> None:  # type: ignore[no-untyped-def]
    other = build_file_tree(tmp_path / "other", {"sitecustomize.py": "import builtins\nbuiltins.OTHER_SITE = True\n"})
    env = {**python_box.env, "PYTHONPATH": os.pathsep.join([python_box.env["PYTHONPATH"], str(other)])}
    out = _python(env, "import socket, builtins; print(socket.kkb_sandbox_offline, builtins.OTHER_SITE)", tmp_path)
    assert out.stdout.strip() == "True True", out.stderr


def test_python_mode_copies_inputs_so_the_sources_stay_untouched(python_box, sources: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    target = python_box.input_dir / "competitions/comp/test.csv"
    before = input_snapshot(python_box)
    assert not target.stat().st_mode & 0o222  # write permission removed (stops every user but root)
    out = _python(python_box.env, f"open({str(target)!r}, 'a').write('tampered')", python_box.working_dir)

    if os.geteuid() == 0:  # root ignores file modes: the write lands in the copy, never in the source
        assert out.returncode == 0
        assert input_writes(python_box, before) == ["competitions/comp/test.csv"]
    else:
        assert "Permission denied" in out.stderr
    assert (sources["data"] / "test.csv").read_text() == "id,x\na,1\n"
    remove_sandbox(python_box.root)
    assert not python_box.root.exists()


# --- namespaces: real isolation where the machine allows it ----------------------------------------------


@needs_namespaces
def test_namespace_mounts_are_read_only_even_for_root_and_the_network_is_gone(tmp_path: Path, sources: dict[str, Path]) -> None:
    box = prepare_sandbox(_spec(sources), tmp_path / "root")
    assert box.isolation in ("bwrap", "namespace")
    assert not any((box.input_dir / "competitions/comp").iterdir())  # nothing copied: bind mounts, inside only
    code = ("import os, socket, sys\n"
            "print(open(sys.argv[1] + '/competitions/comp/test.csv').read().splitlines()[1])\n"
            "for path in (sys.argv[1] + '/competitions/comp/test.csv', sys.argv[1] + '/new.txt'):\n"
            "    try: open(path, 'a').write('x')\n"
            "    except OSError as e: print(e.errno)\n"
            "try: socket.create_connection(('10.255.255.1', 443), timeout=5)\n"
            "except OSError as e: print(e.errno)\n")
    env = {**box.env, "PYTHONPATH": ""}  # without the Python guard: the namespace alone must block
    out = subprocess.run([*box.launcher(), sys.executable, "-c", code, str(box.input_dir)], env=env,
                         cwd=box.working_dir, capture_output=True, text=True, timeout=60)

    assert out.stdout.splitlines() == ["a,1", "30", "30", "101"], out.stderr  # EROFS, EROFS, ENETUNREACH
    assert (sources["data"] / "test.csv").read_text() == "id,x\na,1\n"
    assert blocked_network(box.root) == []


def test_the_launcher_and_guard_use_only_the_standard_library() -> None:
    for name in ("launch.py", "sitecustomize.py"):
        text = (GUEST_DIR / name).read_text()
        assert "import builder" not in text and "from builder" not in text


def test_isolation_can_be_forced_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KKB_SANDBOX_ISOLATION", "python")
    assert isolation_mode("auto") == "python"
    assert isolation_mode(Isolation.PYTHON) == "python"
    monkeypatch.setenv("KKB_SANDBOX_ISOLATION", "chroot")
    with pytest.raises(DryRunError, match="KKB_SANDBOX_ISOLATION='chroot'"):
        isolation_mode("auto")
