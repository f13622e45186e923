"""The executor on real ipykernels, with hand-written notebooks (kkb's build is not involved here)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import nbformat
import psutil
import pytest

from builder.run.execute import ExecutionResult, execute_notebook
from builder.run.sandbox import Mount, SandboxSpec, blocked_network
from tests.support.files import build_file_tree


def _notebook(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(textwrap.dedent(cell).strip()) for cell in cells],
                                  metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, path)
    return path


def _run(tmp_path: Path, *cells: str, **spec: object) -> ExecutionResult:
    data = build_file_tree(tmp_path / "data", {"sample_submission.csv": "id,target\na,0\n"})
    options = {"mounts": (Mount(data, "competitions/comp"),), "rerun": True, **spec}
    return execute_notebook(_notebook(tmp_path / "in.ipynb", *cells), SandboxSpec(**options), tmp_path / "kaggle")  # type: ignore[arg-type]


@pytest.mark.loopback
def test_a_run_is_measured_logged_and_saved(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        import json, os, subprocess, sys, time
        print(json.dumps([sys.executable, os.getcwd()]), flush=True)  # a checkout's path may hold a space
        print("to stderr", file=sys.stderr, flush=True)
        """,
        # a child holding 300 MB for a second: the peak counts the kernel's children
        """
        subprocess.run([sys.executable, "-c", "import time; x = bytearray(300 * 2**20); time.sleep(1.0)"], check=True)
        json.dump([{"name": "infer", "seconds": 1.0, "peak_rss_bytes": 123, "returncode": 0}], open("kkb_steps.json", "w"))
        print("done")
        """,
    )

    assert result.ok and not result.timed_out and result.failed_cell is None and result.ename is None
    assert result.working_dir == tmp_path / "kaggle" / "working"
    streams = [(entry["stream_name"], entry["data"]) for entry in result.log]
    executable, cwd = json.loads(streams[0][1])
    assert Path(executable).resolve() == Path(sys.executable).resolve()  # the venv's interpreter, not any `python3`
    assert cwd == ("/kaggle/working" if result.isolation != "python" else str(result.working_dir))
    assert ("stderr", "to stderr\n") in streams and streams[-1] == ("stdout", "done\n")
    times = [entry["time"] for entry in result.log]
    assert times == sorted(times) and times[-1] >= 1.0
    assert result.peak_rss_bytes > 300 * 2**20
    assert result.peak_gpu_bytes is None or result.peak_gpu_bytes >= 0
    assert result.steps == [{"name": "infer", "seconds": 1.0, "peak_rss_bytes": 123, "returncode": 0}]
    executed = nbformat.read(result.executed_notebook, as_version=4)
    assert executed.cells[1].outputs[-1]["text"] == "done\n"
    assert executed.metadata["kkb_execution"]["ok"] is True


@pytest.mark.loopback
def test_a_failing_cell_is_reported_and_the_notebook_still_written(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        "import urllib.request",
        "urllib.request.urlopen('https://huggingface.co/api/models', timeout=5)",
        "print('never runs')",
    )

    assert not result.ok and not result.timed_out
    assert (result.failed_cell, result.ename) == (1, "URLError")
    assert result.evalue == "<urlopen error [Errno -3] Temporary failure in name resolution>"
    assert "Temporary failure in name resolution" in (result.traceback_tail or "")
    assert blocked_network(result.root) == ["resolve huggingface.co:443"]
    executed = nbformat.read(result.executed_notebook, as_version=4)
    assert executed.cells[0].cell_type == "markdown" and "failed: `URLError` in cell 1" in executed.cells[0].source
    assert executed.cells[3].outputs == []  # the cell after the failure did not run
    assert result.log[-1]["stream_name"] == "stderr" and "URLError" in result.log[-1]["data"]


@pytest.mark.loopback
@pytest.mark.slow
def test_a_hung_run_is_killed_with_its_children(tmp_path: Path) -> None:
    # The child is found by its arguments: in a PID namespace the pid it sees is not the host's.
    seconds = f"300.{os.getpid()}"
    result = _run(
        tmp_path,
        f"""
        import subprocess, time
        child = subprocess.Popen(["sleep", "{seconds}"])
        time.sleep(300)
        """,
        timeout_seconds=3,
    )

    assert result.timed_out and not result.ok
    assert 3 <= result.wall_seconds < 20
    assert (result.failed_cell, result.ename) == (0, "Timeout")
    assert "killed with its child processes" in (result.evalue or "")
    children = [process for process in psutil.process_iter(["cmdline", "status"]) if process.info["cmdline"] == ["sleep", seconds]]
    assert all(process.info["status"] == psutil.STATUS_ZOMBIE for process in children)
    assert nbformat.read(result.executed_notebook, as_version=4).metadata["kkb_execution"]["timed_out"] is True


@pytest.mark.loopback
@pytest.mark.slow
def test_the_portable_sandbox_runs_the_same_kernel(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        import os, socket
        root = os.environ["KKB_KAGGLE_ROOT"]
        print(socket.kkb_sandbox_offline, os.environ["KAGGLE_IS_COMPETITION_RERUN"], os.environ["HOME"].startswith(root))
        open(root + "/input/competitions/comp/extra.txt", "w").close() if os.geteuid() == 0 else None
        """,
        isolation="python",
    )

    assert result.ok, result.traceback_tail
    assert result.log[0]["data"] == "True 1 True\n"
    notes = [entry["data"] for entry in result.log if entry["data"].startswith("[kkb sandbox]")]
    assert len(notes) == (1 if psutil.Process().uids().effective == 0 else 0)
    assert json.loads(result.executed_notebook.read_text())["metadata"]["kkb_execution"]["isolation"] == "python"


def test_gpu_memory_is_the_largest_per_device_total_of_the_runs_processes() -> None:
    from builder.run.monitor import gpu_bytes

    smi = ("GPU-aaa, 101, 1000\nGPU-aaa, 102, 500\nGPU-bbb, 101, 1200\n"
           "GPU-aaa, 999, 30000\n"  # another user's process
           "GPU-bbb, [N/A], [N/A]\n")
    assert gpu_bytes(smi, {101, 102}) == 1500 * 2**20
    assert gpu_bytes(smi, {7}) is None


def test_a_working_dir_past_its_limit_stops_the_run(tmp_path: Path) -> None:
    result = _run(tmp_path, "import time\nopen('big.bin', 'wb').write(b'x' * 3 * 2**20)\ntime.sleep(30)",
                  working_limit_bytes=2**20, timeout_seconds=60)
    assert result.disk_exceeded and not result.ok and not result.timed_out
    assert result.working_bytes >= 3 * 2**20 and result.working_limit_bytes == 2**20
