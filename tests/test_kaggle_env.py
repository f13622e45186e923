"""The kernel's environment as Kaggle's machine gives it: Kaggle's variables, kkb's own, --env, nothing of this machine's.

Unit tests of :mod:`builder.project.kaggle_env` and of the image description's ``environment`` (read from
Kaggle/docker-python's Dockerfile by :mod:`builder.project.image_environment`), then one dry run as people call it: from the
kernel folder, with a variable only this machine has, a credential and an ``--env``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from builder.errors import DryRunError
from builder.project.image import load_image
from builder.project.image_environment import dockerfile_environment
from builder.project.kaggle_env import (
    REDACTED,
    EnvRequest,
    Origin,
    SandboxDirs,
    kernel_environment,
    parse_env_options,
)
from tests.support.files import KERNELS


def _request(tmp_path: Path, **kwargs: object) -> EnvRequest:
    root = tmp_path / "kaggle"
    return EnvRequest(root=root, dirs=SandboxDirs(root / ".sandbox"), python=Path(sys.executable),
                      **{"rerun": False, **kwargs})  # type: ignore[arg-type]


def test_the_shipped_image_names_kaggles_variables_with_their_sources() -> None:
    image = load_image()
    names = {variable.name for variable in image.environment}
    assert {"KAGGLE_URL_BASE", "KAGGLE_KERNEL_RUN_TYPE", "KAGGLE_DOCKER_IMAGE", "KAGGLE_CONTAINER_NAME",
            "KAGGLE_USER_SECRETS_TOKEN", "KAGGLE_DATA_PROXY_TOKEN", "MKL_THREADING_LAYER", "PYTHONPATH"} <= names
    assert all(variable.source for variable in image.environment) and image.environment_sources
    secrets = [v for v in image.environment if v.name in ("KAGGLE_USER_SECRETS_TOKEN", "KAGGLE_DATA_PROXY_TOKEN")]
    assert secrets and all(v.stand_in and v.value == "kkb-stand-in" for v in secrets)  # inert, never a real token


def test_kaggle_and_kkb_variables_and_nothing_of_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host_only = f"KKB_TEST_HOST_ONLY_{uuid.uuid4().hex[:8].upper()}"
    for name, value in {host_only: "leak", "PIP_FIND_LINKS": "/wheels", "CLOUD_SDK_VERSION": "1", "KAGGLE_KEY": "k",
                        "LD_LIBRARY_PATH": "/opt/host/lib", "CUDA_VISIBLE_DEVICES": "1"}.items():
        monkeypatch.setenv(name, value)
    cpu = kernel_environment(_request(tmp_path))
    gpu = kernel_environment(_request(tmp_path, gpu=True, rerun=True))
    for environment in (cpu, gpu):
        env = environment.env
        assert host_only not in env and "PIP_FIND_LINKS" not in env and "CLOUD_SDK_VERSION" not in env
        assert "KAGGLE_KEY" not in env and env["KAGGLE_URL_BASE"] == "https://www.kaggle.com"
        assert env["PYTHONUSERBASE"] == str(tmp_path / "kaggle" / ".sandbox" / "home" / ".local")  # Kaggle's /root/.local
    assert cpu.env["KAGGLE_DOCKER_IMAGE"] == "gcr.io/kaggle-images/python" and "CUDA_HOME" not in cpu.env
    assert gpu.env["KAGGLE_DOCKER_IMAGE"] == "gcr.io/kaggle-gpu-images/python" and gpu.env["CUDA_HOME"] == "/usr/local/cuda"
    # the GPU image's library path first, then this machine's (its interpreter may need it); its GPU choice on a GPU run
    assert gpu.env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64:/usr/local/cuda/lib64:/opt/host/lib"
    assert gpu.env["CUDA_VISIBLE_DEVICES"] == "1" and "CUDA_VISIBLE_DEVICES" not in cpu.env
    assert "KAGGLE_IS_COMPETITION_RERUN" not in cpu.env and gpu.env["KAGGLE_IS_COMPETITION_RERUN"] == "1"
    origins = {variable.name: variable.origin for variable in gpu.given}
    assert origins["KAGGLE_URL_BASE"] is Origin.KAGGLE and origins["HOME"] is Origin.KKB
    assert origins["LD_LIBRARY_PATH"] is Origin.MACHINE and origins["CUDA_VISIBLE_DEVICES"] is Origin.MACHINE


def test_env_options_add_variables_and_are_redacted_where_they_hold_a_secret(tmp_path: Path) -> None:
    user = parse_env_options(["MY_FLAG=on", "MY_TOKEN=s3cret", "KAGGLE_KERNEL_RUN_TYPE=Interactive", "EMPTY="])
    environment = kernel_environment(_request(tmp_path, user=user))
    assert environment.env["MY_FLAG"] == "on" and environment.env["EMPTY"] == ""
    assert environment.env["KAGGLE_KERNEL_RUN_TYPE"] == "Interactive"  # a Kaggle value may be changed for a run
    listed = {entry["name"]: entry for entry in environment.listing()}
    assert listed["MY_TOKEN"] == {"name": "MY_TOKEN", "value": REDACTED, "origin": "--env"}
    assert "s3cret" not in json.dumps(environment.listing()) and "s3cret" not in environment.summary()
    assert listed["KAGGLE_USER_SECRETS_TOKEN"]["note"].startswith("stand-in")
    assert "--env 4 (EMPTY, KAGGLE_KERNEL_RUN_TYPE, MY_FLAG, MY_TOKEN)" in environment.summary()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["KAGGLE_KEY=x"], "refusing to pass KAGGLE_KEY into the sandbox"),
        (["KAGGLE_USERNAME=me", "KAGGLE_API_TOKEN=t"], "refusing to pass KAGGLE_API_TOKEN, KAGGLE_USERNAME into the sandbox"),
        (["PATH=/bin"], "--env PATH: the sandbox sets PATH itself"),
        (["KKB_KAGGLE_ROOT=/x"], "--env KKB_KAGGLE_ROOT: the sandbox sets KKB_KAGGLE_ROOT itself"),
        (["KAGGLE_IS_COMPETITION_RERUN=1"], "--env KAGGLE_IS_COMPETITION_RERUN: the sandbox sets KAGGLE_IS_COMPETITION_RERUN itself"),
        (["NOEQUALS"], "--env 'NOEQUALS': expected NAME=VALUE"),
        (["1BAD=x"], "--env '1BAD=x': expected NAME=VALUE"),
    ],
)
def test_env_options_refused(options: list[str], message: str) -> None:
    with pytest.raises(DryRunError) as caught:
        parse_env_options(options)
    assert caught.value.message == message


def test_dockerfile_env_lines_with_continuations_comments_and_accelerator_blocks() -> None:
    dockerfile = ('ARG PACKAGE_PATH=/usr/local/lib\n{{ if eq .Accelerator "gpu" }}\nENV A=/gpu \\\n    B=${A}/lib:${BASE}\n'
                  '{{ else }}\nENV A=/cpu\n{{ end}}\nENV TESSERACT_PATH=/usr/bin/tesseract \\\n'
                  '    # For Facets, an empty path for $PWD.\n    PYTHONPATH=:$PYTHONPATH:/opt/facets/ \\\n    Q="a b"\n'
                  'ARG GIT_COMMIT=unknown\nENV GIT_COMMIT=${GIT_COMMIT}\n')
    found = [(e["name"], e["value"], e.get("accelerator")) for e in dockerfile_environment(dockerfile, "D")]
    assert found == [("A", "/gpu", "gpu"), ("B", "/gpu/lib", "gpu"), ("A", "/cpu", "cpu"),
                     ("TESSERACT_PATH", "/usr/bin/tesseract", None), ("PYTHONPATH", ":/opt/facets/", None),
                     ("Q", "a b", None), ("GIT_COMMIT", "unknown", None)]


def _env_printing_kernel(tmp_path: Path) -> Path:
    """kernels/minimal whose step prints its whole environment (a folder with a space, as people name them)."""
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "my kernel", ignore=shutil.ignore_patterns(".kkb", "build")))
    predict = kernel / "predict.py"
    source = predict.read_text().replace("from __future__ import annotations\n", "", 1)
    predict.write_text("import json, os\nprint('KKB-ENV ' + json.dumps(dict(os.environ)), flush=True)\n" + source)
    return kernel


@pytest.mark.loopback
def test_a_step_sees_kaggles_environment_in_the_dry_run(tmp_path: Path) -> None:
    kernel = _env_printing_kernel(tmp_path)
    host_only = f"KKB_TEST_HOST_ONLY_{uuid.uuid4().hex[:8].upper()}"
    env = {**os.environ, host_only: "leak", "KAGGLE_KEY": "k" * 32, "HF_HUB_OFFLINE": "1", "PIP_FIND_LINKS": "/wheels"}
    done = subprocess.run([sys.executable, "-m", "builder", "dry-run", ".", "--scenario", "rerun", "--hidden-rows", "5",
                           "--out", "../out", "--env", "MY_FLAG=on", "--env", "MY_TOKEN=s3cret"],
                          cwd=kernel, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    log = json.loads((tmp_path / "out" / "dryrun" / "rerun.log.json").read_text())
    printed = [json.loads(line[len("KKB-ENV "):]) for entry in log for line in entry["data"].splitlines()
               if line.startswith("KKB-ENV ")]
    assert len(printed) == 2  # each step of the rerun
    for seen in printed:
        assert seen["KAGGLE_URL_BASE"] == "https://www.kaggle.com" and seen["KAGGLE_KERNEL_RUN_TYPE"] == "Batch"
        assert seen["KAGGLE_IS_COMPETITION_RERUN"] == "1" and seen["MY_FLAG"] == "on" and "KAGGLE_CONTAINER_NAME" in seen
        for name in (host_only, "KAGGLE_KEY", "HF_HUB_OFFLINE", "PIP_FIND_LINKS"):
            assert name not in seen, name
    report = json.loads((tmp_path / "out" / "dryrun" / "report.json").read_text())
    listed = {entry["name"]: entry for entry in report["scenarios"][0]["variables"]}
    assert listed["KAGGLE_URL_BASE"]["origin"] == "Kaggle" and listed["MY_FLAG"]["origin"] == "--env"
    assert listed["MY_TOKEN"]["value"] == REDACTED and host_only not in listed
    assert "s3cret" not in (tmp_path / "out" / "dryrun" / "report.json").read_text() and "s3cret" not in done.stdout
    assert "kernel environment: Kaggle " in done.stdout and "nothing else of this machine's" in done.stdout
    html = (tmp_path / "out" / "dryrun" / "report.html").read_text()
    assert "<td>KAGGLE_URL_BASE</td><td>https://www.kaggle.com</td><td>Kaggle</td>" in html and "s3cret" not in html
