"""The image as Kaggle publishes it: the freeze behind kaggle-image.json, kkb image --refresh, kkb image."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from builder import cli
from builder.project import image_refresh
from builder.project.image import load_image, package_lines
from tests.support.files import REPO

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
    cpu = image_refresh.parse_freeze(FREEZE)
    assert cpu == {"authlib": "1.6.9", "jinja2": "3.1.6", "pyyaml": "6.0.3", "pandas": "2.3.3", "scikit-learn": "1.6.1",
                   "torch": "2.10.0+cpu", "torchvision": "0.25.0+cpu"}
    assert image_refresh.gpu_packages(cpu)["torch"] == "2.10.0" and image_refresh.gpu_packages(cpu)["pandas"] == "2.3.3"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_refresh_reads_a_docker_python_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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

    assert cli.main(["image", "--refresh", str(repo), "--ref", "HEAD", "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"refreshed {out}: 7 packages (was 0), Python 3.12, as of 2026-06-17; ")

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
    assert "source: Kaggle/docker-python list_packages 1ebea3c (2026-06-17, dated by its commit): installed_cpu_packages" in out
    assert cli.main(["image", "--packages"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert "pandas==2.3.3" in listed and "ipywidgets==8.1.5" in listed and "scikit-learn==1.6.1" in listed
    assert len(package_lines()) == len(load_image().packages) > 800


PUBLISHED = REPO / "tests" / "images" / "docker-python"  # a recorded copy of list_packages 1ebea3c (2026-06-17)


def test_the_recorded_freeze_refreshes_to_the_description_kkb_ships(capsys: pytest.CaptureFixture[str]) -> None:
    """``kkb image --refresh FOLDER`` writes where kkb reads a description first; ``kkb image`` then says its date."""
    shipped = load_image()
    assert cli.main(["image", "--refresh", str(PUBLISHED)]) == 0
    assert "873 packages (was 0), Python 3.12" in capsys.readouterr().out
    refreshed = load_image()
    assert refreshed.path != shipped.path and refreshed.packages == shipped.packages and refreshed.cuda == "12.8"
    assert refreshed.sources[0].endswith("dated by the files' modification time): installed_cpu_packages.txt, the pip "
                                         "freeze of the CPU image (873 packages)")
    assert cli.main(["image"]) == 0
    out = capsys.readouterr().out
    assert f"{refreshed.path}: Kaggle Python image" in out and "age: " in out


@pytest.mark.loopback
def test_the_refresh_reads_a_raw_file_url(tmp_path: Path) -> None:
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(PUBLISHED))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            result = image_refresh.refresh_image(f"http://127.0.0.1:{server.server_address[1]}/", out=tmp_path / "i.json")
        finally:
            server.shutdown()
    assert result.data["python"] == "3.12" and len(result.packages) == 873
    assert "dated by today (a URL says no date)" in result.data["sources"][0]


@pytest.mark.parametrize(("source", "message"), [
    ("nowhere", "--refresh nowhere: not a folder or an http(s) URL"),
    ("empty", "empty: no installed_cpu_packages.txt and no Dockerfile.tmpl (and not a git repository)"),
])
def test_a_refresh_source_without_the_freeze_is_refused(source: str, message: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)  # a relative path, as people type it
    assert cli.main(["image", "--refresh", source]) == 1
    assert message in capsys.readouterr().err
