"""User code nobody has read, as people run kkb over it: every way out an audit found is tried from inside it, none works.

A feature function, a torch factory, a pickled scikit-learn model and a pickled preprocessor (``kkb build .``), and the
competition's metric file (as the dry run and the local Kaggle's scorer run it) each run :data:`tests.support.escapes.PROBE`: read the host user's
``kaggle.json`` and kkb's credentials, list ``/root``, read ``/etc/shadow``, open ``core_pattern`` for writing, reach a
server on the host's loopback, write a host folder, leave a process. Each raises when one worked, so the command only
succeeds with the user code's own result when none did; and the host is as it was (:class:`HostTraps`). Both confining
launchers where this machine has them (bubblewrap, kkb's own); the portable mode confines nothing and says so.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from builder.kkb_runtime.metric_file import MetricFile
from builder.kkb_runtime.vocabulary import Isolation
from builder.rehearse.metric_sandbox import MetricJob, score_metric_file
from builder.run.isolation import probe
from tests.support.cli import kkb, said
from tests.support.escapes import HostTraps
from tests.support.tabular_style import tabular_style_assets

pytestmark = [pytest.mark.loopback, pytest.mark.slow]  # a server on the host's loopback is one of the traps
CONFINING = ["bwrap", "namespace"]

UNPICKLE = '''"""What a pickle made by a notebook runs when it loads: the probes, then the model it holds."""
import io

import joblib

from kkb_escapes import raise_if_out


def escape_then(payload, who):
    raise_if_out(who)
    return joblib.load(io.BytesIO(payload))
'''


def _mode(mode: str) -> str:
    problem = probe(Isolation(mode))
    if problem is not None:
        pytest.skip(f"{mode} isolation is not available here: {problem}")
    return mode


@pytest.fixture
def traps(tmp_path: Path) -> Iterator[HostTraps]:
    laid = HostTraps(tmp_path / "host")
    expected = ["kaggle.json", "loopback server", "host folder"] + (["/etc/shadow", "/root"] if os.geteuid() == 0 else [])
    assert laid.set_here() == expected  # each probe has something to find here: its failure inside is the sandbox's
    yield laid
    laid.close()


def _probing_pickle(real: Path, who: str) -> None:
    """``real`` rewritten as a pickle that runs the probes when it loads, then gives the model it held (protocol 0,
    written by hand: the function it names exists only in the kernel's code)."""
    payload = pickle.dumps(real.read_bytes(), protocol=0)[:-1]  # the bytes of the real file, without STOP
    real.write_bytes(b"ctabkernel.unpickle\nescape_then\n(" + payload + pickle.dumps(who, protocol=0)[:-1] + b"tR.")


@pytest.fixture(scope="module")
def tabular_assets() -> Path:
    return tabular_style_assets()


def _probing_tabular_kernel(source: Path, root: Path, traps: HostTraps) -> Path:
    kernel = Path(shutil.copytree(source, root / "tab kernel", ignore=shutil.ignore_patterns(".kkb", "build")))
    traps.plant(kernel)
    package = kernel / "tabkernel"
    (package / "unpickle.py").write_text(UNPICKLE)
    features = (package / "features.py").read_text()
    (package / "features.py").write_text(features.replace("    out = table[", "    raise_if_out('the feature function')\n"
                                                          "    out = table[", 1) + "\nfrom kkb_escapes import raise_if_out\n")
    net = (package / "net.py").read_text()
    (package / "net.py").write_text(net.replace("    return nn.Sequential(", "    raise_if_out('the factory')\n"
                                                "    return nn.Sequential(", 1) + "\nfrom kkb_escapes import raise_if_out\n")
    _probing_pickle(kernel / "weights" / "logreg.joblib", "the scikit-learn pickle")
    _probing_pickle(kernel / "weights" / "net_qt_map.pkl", "the preprocessor pickle")
    spec = (kernel / "kernel.toml").read_text()
    (kernel / "kernel.toml").write_text(spec.replace('include = ["tabkernel/**/*.py"]',
                                                     'include = ["tabkernel/**/*.py", "kkb_escapes.py", "kkb_host.json"]'))
    return kernel


@pytest.mark.parametrize("mode", CONFINING)
def test_the_users_code_at_build_finds_no_way_out(tabular_assets: Path, tmp_path: Path, traps: HostTraps,
                                                   mode: str) -> None:
    kernel = _probing_tabular_kernel(tabular_assets, tmp_path, traps)
    built = kkb("build", ".", cwd=kernel, env={**traps.environment(), "KKB_SANDBOX_ISOLATION": _mode(mode)})

    assert built.returncode == 0, said(built)  # each piece of user code ran, found nothing, and gave its own result
    assert traps.untouched() == []
    cards = {card["name"]: card for card in json.loads((kernel / "build" / kernel.name / "code" / "kkb_kernel.json")
                                                       .read_text())["models"]}
    assert set(cards) == {"lgbm", "logreg", "net"}


@pytest.mark.parametrize("mode", CONFINING)
def test_the_metric_file_finds_no_way_out(tmp_path: Path, traps: HostTraps, mode: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The file as the dry run and the local Kaggle's scorer run it (:func:`score_metric_file`), kkb's own environment
    holding the traps."""
    for name, value in {**traps.environment(), "KKB_SANDBOX_ISOLATION": _mode(mode)}.items():
        monkeypatch.setenv(name, value)
    folder = tmp_path / "competition"
    folder.mkdir()
    traps.plant(folder)
    (folder / "metric.py").write_text(
        "import numpy as np\n\nfrom kkb_escapes import raise_if_out\n\n\n"
        "def score(solution, submission, row_id_column_name):\n"
        "    raise_if_out('the metric file')\n"
        "    return float(np.sqrt(np.mean((solution['target'].to_numpy() - submission['target'].to_numpy()) ** 2)))\n")
    pd.DataFrame({"id": ["a", "b"], "target": [1.0, 3.0]}).to_csv(folder / "answers.csv", index=False)
    pd.DataFrame({"id": ["b", "a"], "target": [3.0, 2.0]}).to_csv(tmp_path / "submission.csv", index=False)
    job = MetricJob(MetricFile("metric.py"), folder, folder / "answers.csv", "id", ("target",))

    outcome = score_metric_file(job, tmp_path / "submission.csv")

    assert (outcome.failures, outcome.warnings) == ((), ())
    assert outcome.expected["public"] == pytest.approx(0.5 ** 0.5, abs=1e-5)  # its own score: sqrt(mean([1, 0]))
    assert traps.untouched() == []
