"""Kaggle's Dependency Manager: a pulled kernel's ``pm-*`` input becomes ``[install] dependency_manager``; the build
names what cannot install offline; the dry run installs the rest before the kernel, as Kaggle's pre-run step does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from builder.errors import SpecError, WheelhouseError
from builder.project.pm_requirements import pip_lines
from builder.project.spec import load_spec
from tests.support.files import REPO
from tests.support.pulled import pulled_kernel
from tests.support.wheels import write_pure_wheel

PM = "pm-1234567-at-2026-11-30"
PUBLIC = REPO / "kernels" / "minimal" / "data" / "competition" / "public"
# The notebook needs zeta, which only the Dependency Manager brings: its import fails unless the pre-run installed it.
CELLS = (
    "import os\nimport pandas as pd\nimport zeta\n",
    "sample = pd.read_csv(os.path.join(os.environ['KKB_COMPETITION_DIR'], 'sample_submission.csv'))\n"
    "assert zeta.VERSION == '1.0'\nsample.to_csv('submission.csv', index=False)\n",
)

pytestmark = pytest.mark.usefixtures("hermetic_pip")


@pytest.mark.parametrize(("text", "requirements"), [
    ("pip install zeta==1.0\n", ["zeta==1.0"]),
    ("!pip install -U 'kmodes>=0.12' einops\n%pip install --no-deps beta\n", ["kmodes>=0.12", "einops", "beta"]),
    ("python -m pip install -q alpha[fast]\n# a comment\n\nbeta==1.2  # pinned\n", ["alpha[fast]", "beta==1.2"]),
])
def test_input_requirements_lines_are_read_as_pip_reads_them(text: str, requirements: list[str]) -> None:
    assert pip_lines(text, "input_requirements.txt") == requirements


@pytest.mark.parametrize(("text", "message"), [
    ("pip install --index-url https://x/simple zeta\n", "input_requirements.txt:1: '--index-url' needs an index, a file or "
                                                        "the network, which an offline install does not have"),
    ("pip install ok\npip install -r more.txt\n", "input_requirements.txt:2: '-r' needs an index"),
    ("pip install git+https://github.com/x/y\n", "input_requirements.txt:1: 'git+https://github.com/x/y' needs an index"),
    ("pip install 'zeta\n", "input_requirements.txt:1: 'pip install 'zeta' is not a pip command: No closing quotation"),
    ("pip install zeta===\n", "input_requirements.txt:1: 'zeta===' is not a pip requirement"),
])
def test_lines_an_offline_install_cannot_follow_are_refused(text: str, message: str) -> None:
    with pytest.raises(WheelhouseError) as refused:
        pip_lines(text, "input_requirements.txt")
    assert refused.value.message.startswith(message)


def _pulled(tmp_path: Path, requirements: str) -> Path:
    """A kernel pulled with `kaggle kernels pull -m`, its Dependency Manager input's files beside it."""
    source = pulled_kernel(tmp_path / "pulled", cells=CELLS, dataset_sources=[], kernel_sources=[f"kkb-demo/{PM}"])
    manager = source / PM
    manager.mkdir()
    (manager / "input_requirements.txt").write_text(requirements)
    write_pure_wheel(manager / "wheels", "zeta", "1.0")
    return source


def kkb(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.slow
@pytest.mark.loopback
def test_init_from_a_pulled_kernel_with_a_pm_input_gives_a_project_whose_dry_run_installs_it(tmp_path: Path) -> None:
    _pulled(tmp_path, "!pip install zeta==1.0\npip install pandas\n")
    (tmp_path / "my kernels").mkdir()
    done = kkb(tmp_path / "my kernels", "init", "new", "--from", "../pulled", "--data", str(PUBLIC), "--owner", "kkb-demo")
    assert done.returncode == 0, done.stderr
    assert f"kkb-demo/{PM} is Kaggle's Dependency Manager input" in done.stdout and "zeta==1.0, pandas" in done.stdout
    kernel = tmp_path / "my kernels" / "new"
    spec = load_spec(kernel)
    assert spec.install.dependency_manager == PM and spec.install.requirements == []
    (item,) = spec.inputs
    assert (item.kind, item.ref, item.path) == ("notebook", f"kkb-demo/{PM}", f"inputs/{PM}")
    assert (kernel / "inputs" / PM / "wheels" / "zeta-1.0-py3-none-any.whl").is_file()

    built = kkb(kernel, "build", ".")
    assert built.returncode == 0, built.stderr
    assert f"note     [install] dependency_manager '{PM}': 1 package(s) from the input, 1 already in Kaggle's image" in built.stdout
    config = json.loads((kernel / "build" / "new" / "code" / "kkb_kernel.json").read_text())
    assert config["dependency_manager"] == {"input": PM, "ref": f"kkb-demo/{PM}", "requirements": ["zeta==1.0"],
                                            "from_image": ["pandas"]}
    metadata = json.loads((kernel / "build" / "new" / "kernel" / "kernel-metadata.json").read_text())
    assert metadata["kernel_sources"] == [f"kkb-demo/{PM}"]  # attached to the push as Kaggle listed it

    ran = kkb(kernel, "dry-run", ".", "--scenario", "rerun", "--json")
    assert ran.returncode == 0, ran.stderr + ran.stdout
    (rerun,) = json.loads(ran.stdout)["scenarios"]
    assert rerun["verdict"]["name"] == "OK"
    log = json.loads((kernel / "build" / "new" / "dryrun" / "rerun.log.json").read_text())
    assert any(f"Kaggle's Dependency Manager (kkb-demo/{PM}) installs zeta==1.0 before the kernel" in e["data"] for e in log)


def test_a_requirement_not_installable_offline_is_named_at_build(tmp_path: Path) -> None:
    from builder.build import BuildSettings, build_kernel
    from builder.project.init import init_from_folder

    source = _pulled(tmp_path, "pip install zeta==1.0 missingpkg==2.0\npip install oldbin\n")
    (source / PM / "wheels" / "oldbin-1.0-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(b"")
    init_from_folder(tmp_path / "new", source, data_dir=PUBLIC, owner="kkb-demo")
    with pytest.raises(WheelhouseError) as refused:
        build_kernel(BuildSettings(kernel_dir=tmp_path / "new", out_dir=tmp_path / "build"))
    assert refused.value.message == (
        f"{tmp_path / 'new' / 'kernel.toml'}: [install] dependency_manager = '{PM}': not installable offline on Kaggle's "
        "image (Python 3.12, CUDA 12.8, torch 2.10.0):\n"
        f"  missingpkg==2.0: not in Kaggle's image, and no wheel for it in {tmp_path / 'new' / 'inputs' / PM}\n"
        "  oldbin: the input has oldbin-1.0-cp311-cp311-manylinux_2_17_x86_64.whl, which do(es) not install on cp312 "
        "manylinux_2_35_x86_64")
    assert "download the input's files again" in (refused.value.hint or "")


def test_dependency_manager_names_an_input(tmp_path: Path) -> None:
    from tests.support.kernels import kernel_with

    kernel = kernel_with(tmp_path, f'[install]\ndependency_manager = "{PM}"\n[[inputs]]\nkind = "notebook"\n'
                                   'ref = "kkb-demo/pm-1234567-at-2026-11-29"\npath = "inputs/pm"\n')
    with pytest.raises(SpecError) as refused:
        load_spec(kernel)
    assert refused.value.message == (
        f"{kernel / 'kernel.toml'}: [install] dependency_manager = '{PM}' names no [[inputs]] (did you mean "
        "'pm-1234567-at-2026-11-29'?); the inputs are: pm-1234567-at-2026-11-29 (attach the pm-... input as [[inputs]] first)")
