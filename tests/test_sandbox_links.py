"""kkb follows no link a kernel made: what it reads and writes in a sandbox after a run never leads out of it.

A step plants symbolic links to this machine's files in every folder kkb touches after the run (where the executed
notebook was written, the sandbox's records, the working folder), a FIFO where kkb reads a log, and swaps its own output
for a link to ``/proc/self/environ``: no file of this machine changes, no byte of kkb's environment reaches the build
folder, and the report names what the run left. The pieces: :func:`builder.run.sandbox_files.seal` (after a run),
:func:`~builder.run.sandbox_files.read_regular` (while it runs), :func:`~builder.run.sandbox_files.in_working` (the
paths a run's records name).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from builder.run.sandbox_files import in_working, read_regular, seal
from tests.support.cli import kkb, said
from tests.support.files import KERNELS
from tests.support.kernels import evalapi_variant

PLANT = '''

def _plant() -> None:
    """After writing its output: links to the host's files where kkb reads and writes after the run."""
    if os.environ.get("KKB_STEP_NAME") != "ridge":
        return
    victim, root = os.environ["VICTIM"], Path(os.environ["KKB_KAGGLE_ROOT"])
    for link in (root / "__notebook__.ipynb", root / "__script__.py", root / "working" / "kkb_mounted.json",
                 root / ".sandbox" / "root-filesystem", root / ".sandbox" / "imports" / "planted.json"):
        link.unlink(missing_ok=True)
        link.symlink_to(victim)
    (root / "working" / "outside").symlink_to(os.path.dirname(victim), target_is_directory=True)
    (root / ".sandbox" / "network.log").unlink(missing_ok=True)
    os.mkfifo(root / ".sandbox" / "network.log")  # read after the run: a FIFO there would block whoever opens it
    out = Path(sys.argv[sys.argv.index("--out") + 1])
    out.unlink()
    out.symlink_to("/proc/self/environ")  # kkb's own environment, if kkb read it
'''


@pytest.mark.loopback
def test_links_a_step_plants_never_lead_kkb_out(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    victim = host / "victim.txt"
    victim.write_text("this machine's file\n")
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "link kernel", ignore=shutil.ignore_patterns(".kkb", "build")))
    predict = kernel / "predict.py"
    text = predict.read_text().replace("import os\n", "import os\nimport sys\n", 1)
    predict.write_text(text.replace('if __name__ == "__main__":\n    main()',
                                    PLANT + '\n\nif __name__ == "__main__":\n    main()\n    _plant()'))
    secret = "kkb-secret-" + os.urandom(8).hex()
    ran = kkb("dry-run", ".", "--scenario", "rerun", "--env", f"VICTIM={victim}", cwd=kernel,
              env={"KAGGLE_KEY": secret, "KAGGLE_USERNAME": "someone"}, timeout=300)

    assert ran.returncode in (0, 2), said(ran)
    assert victim.read_text() == "this machine's file\n" and sorted(p.name for p in host.iterdir()) == ["victim.txt"]
    build = kernel / "build" / kernel.name
    for path in build.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
            assert b"this machine's file" not in path.read_bytes(), path
    report = json.loads((build / "dryrun" / "report.json").read_text())
    (rerun,) = report["scenarios"]
    left = next(warning for warning in rerun["warnings"] if warning.startswith("the run left "))
    assert "working/kkb_steps/ridge.csv -> /proc/self/environ" in left and ".sandbox/network.log (a FIFO)" in left, left
    assert "[kkb] step" in (build / "dryrun" / "rerun.ipynb").read_text()  # kkb's own copy of the executed notebook


PLANTING_PREDICT = '''import os
from pathlib import Path

from evalapi_model.serve import predict as real


def predict(test):
    link = Path(os.environ["KKB_KAGGLE_ROOT"]) / "working" / "submission.parquet"
    if not link.is_symlink():  # where kkb puts the gateway's file after the rerun
        link.unlink(missing_ok=True)
        link.symlink_to(os.environ["VICTIM"])
    return real(test)
'''


@pytest.mark.loopback
def test_the_evaluation_api_reruns_links_never_lead_kkb_out(tmp_path: Path) -> None:
    victim = tmp_path / "host" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("this machine's file\n")
    kernel = evalapi_variant(Path(shutil.copytree(KERNELS / "evalapi", tmp_path / "evalapi",
                                                  ignore=shutil.ignore_patterns("__pycache__", "build"))), PLANTING_PREDICT)
    ran = kkb("dry-run", ".", "--scenario", "rerun", "--json", "--env", f"VICTIM={victim}", cwd=kernel)
    assert ran.returncode == 0, said(ran)
    assert victim.read_text() == "this machine's file\n"
    (rerun,) = json.loads(ran.stdout)["scenarios"]
    assert f"working/submission.parquet -> {victim}" in " ".join(rerun["warnings"])
    assert (kernel / "build" / kernel.name / "dryrun" / "rerun.submission.parquet").stat().st_size > 1000  # the gateway's


def test_seal_removes_links_and_special_files_and_names_them(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "working" / "deep").mkdir(parents=True)
    (root / ".sandbox" / "upper" / "usr").mkdir(parents=True)
    (root / "working" / "kept.csv").write_text("id\n")
    (root / "working" / "deep" / "out.csv").symlink_to("/etc/passwd")
    (root / "working" / "folder").symlink_to("/", target_is_directory=True)
    os.mkfifo(root / "working" / "pipe")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "working" / "kernel.sock"))  # a Jupyter channel: removed, not named
    (root / ".sandbox" / "upper" / "usr" / "lib").symlink_to("/usr/lib")  # the overlay's layer: never walked

    assert seal(root) == ("working/deep/out.csv -> /etc/passwd", "working/folder -> /", "working/pipe (a FIFO)")
    assert sorted(p.name for p in (root / "working").iterdir()) == ["deep", "kept.csv"]
    assert (root / ".sandbox" / "upper" / "usr" / "lib").is_symlink()


def test_files_watched_while_a_run_goes_are_read_only_as_regular_files(tmp_path: Path) -> None:
    (tmp_path / "calls.jsonl").write_text('{"start": 1}\n')
    (tmp_path / "link").symlink_to(tmp_path / "calls.jsonl")
    os.mkfifo(tmp_path / "fifo")
    assert read_regular(tmp_path / "calls.jsonl") == b'{"start": 1}\n'
    assert read_regular(tmp_path / "link") is None and read_regular(tmp_path / "fifo") is None  # no follow, no block
    assert read_regular(tmp_path / "absent") is None and read_regular(tmp_path) is None


@pytest.mark.parametrize(("recorded", "expected"), [
    ("/kaggle/working/linear.csv", "linear.csv"), ("{working}/sub/x.csv", "sub/x.csv"),
    ("/kaggle/working/../../etc/passwd.csv", None), ("/home/someone/secret.csv", None), ("{working}/../x.csv", None),
    ("linear.csv", None), ("", None),
])
def test_a_runs_record_names_only_its_own_files(tmp_path: Path, recorded: str, expected: str | None) -> None:
    working = tmp_path / "working"
    found = in_working(recorded.format(working=working), working)
    assert found == (working / expected if expected else None)
