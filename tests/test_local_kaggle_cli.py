"""The real ``kaggle`` command (a subprocess, through the sitecustomize shim) and ``kkb local-kaggle``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from builder.cli import main
from tests.support.local_kaggle import (
    COMPETITION,
    USER,
    connect_as,
    kaggle_cli,
    make_competition,
    make_dataset,
    make_kernel,
    start_server,
    wait_kernel,
    wait_submission,
)

KERNEL = f"{USER}/parity-kernel"
DATASET = f"{USER}/tiny-numbers"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One server for the module: subprocess calls cost ~0.4 s each, so the scenario builds up."""
    root = tmp_path_factory.mktemp("cli-world")
    with start_server(root / "data") as server:
        server.add_competition(make_competition(root / "competition"))
        yield server, root


def run(world: Any, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    server, root = world
    return kaggle_cli(args, server.base_url, root / "home", **kwargs)


@pytest.mark.loopback
def test_datasets_through_the_kaggle_command(world: Any) -> None:
    _, root = world
    folder = make_dataset(root / "ds", files={"numbers.csv": "n\n1\n", "extra/notes.txt": "notes"})
    created = run(world, "datasets", "create", "-p", str(folder), "--dir-mode", "zip")
    assert created.returncode == 0, created.stderr
    assert "Your private Dataset is being created. Please check progress at http://127.0.0.1:" in created.stdout

    status = run(world, "datasets", "status", DATASET)
    assert (status.returncode, status.stdout) == (0, "ready")
    listed = run(world, "datasets", "files", DATASET)
    assert "numbers.csv" in listed.stdout and "extra/notes.txt" in listed.stdout

    (folder / "numbers.csv").write_text("n\n1\n2\n")
    versioned = run(world, "datasets", "version", "-p", str(folder), "-m", "more numbers", "--dir-mode", "zip")
    assert "Dataset version is being created" in versioned.stdout, versioned.stdout + versioned.stderr
    as_json = run(world, "datasets", "status", DATASET, "--format", "json")
    assert json.loads(as_json.stdout) == {"status": "ready", "current_version_number": 2}

    downloaded = run(world, "datasets", "download", DATASET, "-p", str(root / "dl"), "--unzip")
    assert downloaded.returncode == 0, downloaded.stderr
    assert (root / "dl" / "numbers.csv").read_text() == "n\n1\n2\n"
    assert (root / "dl" / "extra" / "notes.txt").read_text() == "notes"


@pytest.mark.loopback
def test_kernels_and_a_submission_through_the_kaggle_command(world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server, root = world
    folder = make_kernel(root / "kernel")
    pushed = run(world, "kernels", "push", "-p", str(folder))
    assert "Kernel version 1 successfully pushed.  Please check progress at" in pushed.stdout, pushed.stdout + pushed.stderr
    api = connect_as(monkeypatch, server.base_url)
    wait_kernel(api, KERNEL)

    status = run(world, "kernels", "status", KERNEL)
    assert status.stdout.strip() == f'{KERNEL} has status "KernelWorkerStatus.COMPLETE"'
    output = run(world, "kernels", "output", KERNEL, "-p", str(root / "out"))
    assert output.returncode == 0, output.stderr
    assert (root / "out" / "submission.csv").is_file() and (root / "out" / "parity-kernel.log").is_file()
    followed = run(world, "kernels", "logs", KERNEL, "--follow")
    assert followed.stdout.startswith("rows: 3 rerun: False"), followed.stdout + followed.stderr

    submitted = run(world, "competitions", "submit", COMPETITION, "-k", KERNEL, "-v", "1", "-f", "submission.csv",
                    "-m", "from the kaggle command")
    found = re.search(r"Submission ref: (\d+)", submitted.stdout)
    assert found is not None, submitted.stdout
    ref = int(found.group(1))
    assert "4 submissions remaining today." in submitted.stdout
    assert submitted.stdout.rstrip().endswith("Successfully submitted to Tiny Parity")
    wait_submission(api, ref)
    table = run(world, "competitions", "submissions", COMPETITION)
    assert "from the kaggle command" in table.stdout and "1.00000" in table.stdout and "COMPLETE" in table.stdout


@pytest.mark.loopback
def test_bad_credentials_and_token_auth(world: Any) -> None:
    denied = run(world, "datasets", "status", DATASET, key="not-the-key")
    assert denied.returncode == 1
    assert denied.stdout.startswith("Authentication required to call the Kaggle API.")  # the client's answer to 401
    # KAGGLE_API_TOKEN: the client validates it with IntrospectToken, then sends it as a Bearer token.
    by_token = run(world, "datasets", "status", DATASET, key=None, token="alice-token-0001")
    assert (by_token.returncode, by_token.stdout) == (0, "ready"), by_token.stderr


def test_kkb_local_kaggle_registers_competitions_and_users(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    folder = make_competition(tmp_path / "competition")
    assert main(["local-kaggle", "add-competition", str(folder), "--data-dir", str(data)]) == 0
    assert "registered competition tiny-parity (Tiny Parity, metric accuracy, 5 submissions a day)" in capsys.readouterr().out
    assert main(["local-kaggle", "add-user", "carol", "--key", "carol-key", "--data-dir", str(data)]) == 0
    assert "KAGGLE_USERNAME=carol\nKAGGLE_KEY=carol-key" in capsys.readouterr().out
    assert json.loads((data / "users.json").read_text())["carol"]["key"] == "carol-key"

    (folder / "answers.csv").unlink()
    assert main(["local-kaggle", "add-competition", str(folder), "--data-dir", str(data)]) == 1
    assert "answers.csv is missing" in capsys.readouterr().err


@pytest.mark.loopback
def test_kkb_local_kaggle_serve(tmp_path: Path) -> None:
    folder = make_competition(tmp_path / "competition")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    command = [sys.executable, "-m", "builder", "local-kaggle", "serve", "--port", "0", "--data-dir", str(tmp_path / "d"),
               "--user", "alice:k1", "--competition", str(folder)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        listening = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        assert listening is not None, line
        url = listening.group(1)
        assert requests.get(url, timeout=10).json() == {"server": "kkb local Kaggle", "users": 1}
        listed = requests.post(f"{url}/api/v1/competitions.CompetitionApiService/ListCompetitions", json={},
                               auth=("alice", "k1"), timeout=10)
        assert [c["title"] for c in listed.json()["competitions"]] == ["Tiny Parity"]
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)
    assert process.returncode == 0
