"""Install what you need: core kkb imports without torch, timm, matplotlib or grpc; a card names its extra;
the sdist ships the example kernels its tests need."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from builder.build import BuildSettings, build_kernel
from builder.bundle import cards as bundle_cards
from builder.errors import BundleError, SpecError
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.examples import example_kernel
from builder.project.image import load_image
from builder.project.spec import load_spec
from builder.run.skew import MINOR_BREAKING
from tests.support.files import KERNELS, REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HEAVY = ("torch", "torchvision", "timm", "albumentations", "safetensors", "matplotlib", "grpc", "transformers",
         "sklearn", "lightgbm", "scipy")

BLOCKED = f"""
import importlib.abc, sys
HEAVY = {HEAVY!r}

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by the test)", name=name)
        return None

sys.meta_path.insert(0, Blocker())
import pkgutil, builder
from builder import cli
for info in pkgutil.walk_packages(builder.__path__, "builder."):
    if ".examples" not in info.name and not info.name.endswith("__main__"):
        __import__(info.name)
assert cli.main(["--help"]) == 0
code = cli.main(["build", sys.argv[1], "--out", sys.argv[2]])
loaded = sorted(name for name in sys.modules if name.split(".")[0] in HEAVY)
print("loaded:", loaded)
sys.exit(code)
"""


def test_the_cli_and_every_module_import_and_build_without_the_heavy_packages(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", BLOCKED, str(KERNELS / "minimal"), str(tmp_path / "build")],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "loaded: []" in done.stdout


def test_every_card_kind_names_its_extra() -> None:
    assert set(bundle_cards.BUILD_CARDS) == set(CardKind)
    assert all(unit.extra.name and unit.extra.modules for unit in bundle_cards.BUILD_CARDS.values())


def test_a_card_without_its_extra_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    with (kernel / "kernel.toml").open("a") as spec:
        spec.write('\n[[models]]\nname = "net"\narch = "test_efficientnet"\ncheckpoint = "weights/net.pt"\n'
                   'num_classes = 1\n')
    monkeypatch.setattr(bundle_cards, "_installed", lambda module: module not in ("torch", "timm"))
    with pytest.raises(BundleError) as caught:
        build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    assert (caught.value.message, caught.value.hint) == (
        f"{kernel / 'kernel.toml'}: models.net: building an image card needs torch, timm, not installed here",
        'pip install "kkb[vision]" (core kkb installs without them)')


@pytest.mark.slow
def test_the_sdist_ships_the_kernels_its_tests_need(tmp_path: Path) -> None:
    pytest.importorskip("build")
    done = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(tmp_path), str(REPO)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (sdist,) = tmp_path.glob("kkb-*.tar.gz")
    with tarfile.open(sdist) as bundle:
        names = {name.split("/", 1)[1] for name in bundle.getnames() if "/" in name}
    assert {"kernels/minimal/kernel.toml", "kernels/minimal/data/competition/public/sample_submission.csv",
            "kernels/evalapi/kaggle_evaluation/__init__.py", "tests/conftest.py", "tests/support/files.py",
            "templates/notebook/00_provenance.md.j2"} <= names
    assert not any("/.kkb/" in name or "__pycache__" in name for name in names)


def test_hints_point_at_the_example_every_install_has(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path)
    example = example_kernel() / "kernel.toml"
    assert caught.value.hint == (f"every kernel project needs a kernel.toml; start a project with kkb init DIR "
                                 f"--competition SLUG, or see the example kkb ships: {example}")
    assert example.is_file()


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


@pytest.mark.parametrize("extra", ["vision", "text", "tabular", "torch", "evalapi"])
def test_every_extra_admits_the_versions_kaggle_s_image_has(extra: str) -> None:
    """`pip install "kkb[text]"` resolves to the image's series: no version skew by construction."""
    image = load_image()
    refused = []
    for text in _extras()[extra]:
        requirement = Requirement(text)
        there = image.packages.get(canonicalize_name(requirement.name))
        if there is not None and not requirement.specifier.contains(there, prereleases=True):
            refused.append(f"{text} (the image has {there})")
    assert refused == []


@pytest.mark.parametrize("package", sorted(MINOR_BREAKING - {"pandas", "numpy"}))
def test_a_package_whose_minors_break_is_pinned_to_the_image_s_minor(package: str) -> None:
    there = Version(load_image().packages[package])
    # one pin however many extras name the package (torch cards need scikit-learn too): the same in each
    (text,) = {text for texts in _extras().values() for text in texts if Requirement(text).name == package}
    pin = Requirement(text)
    assert not pin.specifier.contains(f"{there.major}.{there.minor + 1}.0") and pin.specifier.contains(str(there))
