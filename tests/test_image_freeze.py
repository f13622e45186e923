"""The image as Kaggle publishes it: the freeze behind kaggle-image.json, its refresh script, kkb image."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from builder import cli
from builder.project.image import load_image, package_lines
from tests.support.files import refresh_image_script

FREEZE = """Authlib==1.6.9
Jinja2==3.1.6
PyYAML==6.0.3
pandas==2.3.3
scikit-learn==1.6.1
torch==2.10.0+cpu
torchvision==0.25.0+cpu
-e git+https://github.com/Kaggle/learntools@abc#egg=learntools
"""
DOCKERFILE = """FROM us-docker.pkg.dev/colab-images/public/runtime:release-colab-external-images_20260416-060047_RC00
ARG PACKAGE_PATH=/usr/local/lib/python3.12/dist-packages
"""


def test_a_freeze_becomes_canonical_names_and_versions() -> None:
    script = refresh_image_script()
    cpu = script.parse_freeze(FREEZE)
    assert cpu == {"authlib": "1.6.9", "jinja2": "3.1.6", "pyyaml": "6.0.3", "pandas": "2.3.3", "scikit-learn": "1.6.1",
                   "torch": "2.10.0+cpu", "torchvision": "0.25.0+cpu"}
    assert script.gpu_packages(cpu)["torch"] == "2.10.0" and script.gpu_packages(cpu)["pandas"] == "2.3.3"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_refresh_script_reads_a_docker_python_checkout(tmp_path: Path) -> None:
    repo = tmp_path / "docker-python"
    repo.mkdir()
    (repo / "installed_cpu_packages.txt").write_text(FREEZE)
    (repo / "Dockerfile.tmpl").write_text(DOCKERFILE)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "freeze", "--date", "2026-06-17T12:00:00"], check=True,
                   env={"GIT_COMMITTER_DATE": "2026-06-17T12:00:00", "PATH": "/usr/bin:/bin"})
    out = tmp_path / "image.json"

    assert refresh_image_script().main(["--repo", str(repo), "--ref", "HEAD", "--out", str(out)]) == 0

    data = json.loads(out.read_text())
    assert data["python"] == "3.12" and data["captured"] == "2026-06-17" and data["verified"] is True
    assert data["packages"]["torch"] == "2.10.0" and data["cpu_builds"]["torch"] == "2.10.0+cpu"
    assert data["import_names"]["sklearn"] == "scikit-learn" and data["import_names"]["yaml"] == "pyyaml"
    assert "PIL" not in data["import_names"]  # pillow is not in this freeze
    assert data["sources"][0].startswith("Kaggle/docker-python HEAD ") and "installed_cpu_packages.txt" in data["sources"][0]
    image = load_image(out)
    assert image.packages["scikit-learn"] == "1.6.1" and image.has("nvidia-cublas-cu12") and image.has("triton")


def test_kkb_image_prints_the_description_and_lists_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["image"]) == 0
    out = capsys.readouterr().out
    assert "builder/data/kaggle-image.json: Kaggle Python image" in out and "Python 3.12, as of 2026-06-17" in out
    assert "source: Kaggle/docker-python list_packages 1ebea3c (2026-06-17): installed_cpu_packages.txt" in out
    assert cli.main(["image", "--packages"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert "pandas==2.3.3" in listed and "ipywidgets==8.1.5" in listed and "scikit-learn==1.6.1" in listed
    assert len(package_lines()) == len(load_image().packages) > 800
