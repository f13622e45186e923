"""The audit's client-side findings: Ctrl-C exits 130 (a real SIGINT), and bad inputs say what they are.

* ``kkb`` interrupted while it waits on Kaggle: exit 130 and "interrupted" (typer returns 130, it
  used to be ignored and the process exited 0);
* an empty checkpoint says "empty", random bytes say "not a checkpoint", both exit 1;
* ``target_columns = []`` and a non-UTF-8 kernel.toml are refused naming the file;
* a malformed kaggle.json says so, naming the file and never showing its content.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from builder import cli
from builder.errors import EXIT_AUTH, EXIT_INTERRUPTED, EXIT_USER, AuthError, ModelError, SpecError
from builder.local_kaggle import LocalKaggle, ServerSettings
from builder.project.credentials import check_kaggle_json, kaggle_username
from builder.project.spec import load_spec
from builder.remote.kaggle_api import KaggleAdapter
from tests.support.files import KERNELS, REPO
from tests.support.local_kaggle import GatedRunner, connect_as, make_kernel

# -- Ctrl-C ----------------------------------------------------------------------------------

USER, KEY = "kkb-demo", "local-test-key-0123456789"
KERNEL_ID = "kkb-demo/kkb-minimal-inference"


def test_main_returns_typers_130_and_says_interrupted(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("builder.cli.remote_commands.kernel_status", interrupted)
    assert cli.main(["status", str(KERNELS / "minimal")]) == EXIT_INTERRUPTED
    assert "interrupted" in capsys.readouterr().err


@pytest.mark.loopback
def test_sigint_to_a_kkb_waiting_on_kaggle_exits_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real signal to a real ``kkb submit --version 1`` that is polling a kernel run that never ends."""
    runner = GatedRunner()
    asked = threading.Event()
    with LocalKaggle(tmp_path / "kaggle", port=0, settings=ServerSettings(dataset_ready_seconds=0.0),
                     runner=runner) as server:
        server.add_user(USER, KEY)
        server.add_competition(KERNELS / "minimal" / "data" / "competition")
        api = connect_as(monkeypatch, server.base_url, USER, KEY)
        api.kernels_push(str(make_kernel(tmp_path / "pushed", title="KKB Minimal Inference", owner=USER,
                                         competitions=("kkb-minimal",))))
        assert runner.started.wait(30)  # the run is RUNNING, held at the gate
        status_rpc = "kernels.KernelsApiService/GetKernelSessionStatus"
        real = server.routes[status_rpc]

        def observed(call: Any) -> Any:
            asked.set()
            return real(call)

        server.routes[status_rpc] = observed
        kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path),
               "KAGGLE_CONFIG_DIR": str(tmp_path / "home" / ".kaggle"), "KAGGLE_USERNAME": USER, "KAGGLE_KEY": KEY,
               "KKB_KAGGLE_API": server.base_url, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
        process = subprocess.Popen([sys.executable, "-m", "builder", "submit", str(kernel), "--version", "1"],
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert asked.wait(120), (process.stderr.read() if process.stderr and process.poll() is not None
                                     else "no status poll")
            assert process.poll() is None
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
            runner.gate.set()
        assert process.returncode == EXIT_INTERRUPTED, err
        assert "interrupted" in err


# -- checkpoints -----------------------------------------------------------------------------


def _card(tmp_path: Path, content: bytes) -> Any:
    """The kernel's card of an image card whose checkpoint ``model.pth`` holds ``content``."""
    from builder.bundle.cards.image import to_kernel
    from builder.project.cards import ImageCard

    (tmp_path / "model.pth").write_bytes(content)
    return to_kernel(ImageCard(name="m", arch="resnet18", checkpoint="model.pth", num_classes=2))


@pytest.mark.parametrize(
    ("content", "message", "hint"),
    [
        (b"", "[[models]] 'm': checkpoint model.pth is empty (0 bytes)",
         "the file was truncated or never written: save or copy the checkpoint again"),
        (bytes(range(1, 256)) * 8, "[[models]] 'm': model.pth is not a checkpoint (neither a torch.save file nor safetensors)",
         "point checkpoint at the file torch.save or safetensors wrote"),
        (b"hello, I am a text file\n", "[[models]] 'm': model.pth is not a checkpoint (neither a torch.save file nor "
                                       "safetensors)", "point checkpoint at the file torch.save or safetensors wrote"),
    ],
    ids=["empty", "random-bytes", "text"],
)
def test_unreadable_checkpoints_say_what_they_are(tmp_path: Path, content: bytes, message: str, hint: str) -> None:
    pytest.importorskip("torch")
    from builder.bundle.models import read_training_checkpoint

    with pytest.raises(ModelError) as raised:
        read_training_checkpoint(_card(tmp_path, content), None, tmp_path, "model.pth")
    assert (raised.value.message, raised.value.hint, raised.value.exit_code) == (message, hint, EXIT_USER)


class PickledThing:
    """Not a tensor: what torch.load(weights_only=True) refuses to unpickle."""


def test_a_pickle_of_objects_is_still_described_as_one(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from builder.bundle.models import read_training_checkpoint

    torch.save({"model": PickledThing()}, tmp_path / "saved.pth")
    card = _card(tmp_path, (tmp_path / "saved.pth").read_bytes())
    # Issue 12: the refusal quotes torch's line naming the class, and the hint names the per-card opt-in.
    with pytest.raises(ModelError, match="Unsupported global: GLOBAL tests.test_client_hardening.PickledThing") as raised:
        read_training_checkpoint(card, None, tmp_path, "model.pth")
    assert "allow_pickle = true" in (raised.value.hint or "") and "\x1b[" not in raised.value.message


# -- kernel.toml -----------------------------------------------------------------------------


def _kernel(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb", "data")))


def test_empty_target_columns_are_refused(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path)
    toml = kernel / "kernel.toml"
    text = toml.read_text()
    toml.write_text("\n".join(line for line in text.splitlines() if not line.startswith("target_columns"))
                    .replace("[submission]", "[submission]\ntarget_columns = []"))
    with pytest.raises(SpecError) as raised:
        load_spec(kernel)
    assert raised.value.message == (f"{toml}: submission.target_columns: an empty list names no column to predict; "
                                    'list them, e.g. ["target"], or leave target_columns out')


def test_a_non_utf8_kernel_toml_names_the_file(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path)
    (kernel / "kernel.toml").write_bytes(b'[kernel]\ntitle = "caf\xe9"\n')
    with pytest.raises(SpecError) as raised:
        load_spec(kernel)
    assert (raised.value.message, raised.value.hint) == (
        f"{kernel / 'kernel.toml'}: not UTF-8 text (byte 0xe9 at offset 21)", "save kernel.toml with UTF-8 encoding")
    assert cli.main(["build", str(kernel), "--out", str(tmp_path / "out")]) == EXIT_USER


# -- kaggle.json -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"username": "bob", "key": "SECRETKEY12', "not valid JSON (Unterminated string starting at: line 1 column 28)"),
        (b'["bob", "SECRETKEY12"]', "not a JSON object but a list"),
        (b'{"username": "b\xf6b", "key": "SECRETKEY12"}', "not UTF-8 text, so not a valid kaggle.json"),
    ],
    ids=["truncated", "list", "latin-1"],
)
def test_a_malformed_kaggle_json_says_so_naming_the_file(tmp_path: Path, content: bytes, message: str) -> None:
    config = tmp_path / "cfg"
    config.mkdir()
    (config / "kaggle.json").write_bytes(content)
    env = {"HOME": str(tmp_path), "KAGGLE_CONFIG_DIR": str(config)}
    for check in (kaggle_username, check_kaggle_json):
        with pytest.raises(AuthError) as raised:
            check(env)
        assert raised.value.message == f"{config / 'kaggle.json'}: {message}"
        assert "SECRETKEY12" not in str(raised.value)
        assert raised.value.exit_code == EXIT_AUTH


def test_connecting_with_a_malformed_kaggle_json_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """push, submit and status connect through the adapter: the real client would say "no credentials"."""
    config = tmp_path / "cfg"
    config.mkdir()
    (config / "kaggle.json").write_bytes(b'{"username": "bob", "key": "SECRETKEY12')
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(config))
    with pytest.raises(AuthError) as raised:
        KaggleAdapter.connect("http://127.0.0.1:9")
    assert raised.value.message.startswith(f"{config / 'kaggle.json'}: not valid JSON")
    assert "SECRETKEY12" not in str(raised.value)


def test_a_good_kaggle_json_still_gives_the_username(tmp_path: Path) -> None:
    (tmp_path / "kaggle.json").write_text(json.dumps({"username": "bob", "key": "k"}))
    env = {"HOME": str(tmp_path), "KAGGLE_CONFIG_DIR": str(tmp_path)}
    assert kaggle_username(env) == "bob"
    check_kaggle_json(env)
