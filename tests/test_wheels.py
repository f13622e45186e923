"""kkb wheels: wheelhouse resolution, exclusions, the install cell, the offline check, the helper kernel.

No internet: the packages are tiny projects built here and served from a folder by the session's
``index`` fixture, pip reads nothing else (``hermetic_pip``); both live in tests/support/wheels.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from builder import cli
from builder.build import BuildSettings, build_kernel
from builder.bundle.wheels import WheelTarget, check_offline_install, incompatible_wheels, kernel_requirements, stand_in
from builder.errors import BundleError, DryRunError, KernelFailed, LimitReached, SpecError, WheelhouseError
from builder.kkb_runtime import inputs
from builder.project.image import preinstalled_patterns
from builder.project.image_facts import described_image
from builder.project.layout import HELPER_DIR, WHEELS_DIR
from builder.project.spec import load_spec
from builder.rehearse.wheelhouse import dry_run_check, dry_run_mounts
from builder.remote.kaggle_api import Quota, QuotaLine
from builder.remote.wheels import RUNTIME_MODULES, WheelsSettings, build_wheels, helper_kernel
from tests.support.fake_kaggle import FAKE_WAITS, FakeKaggle
from tests.support.files import KERNELS
from tests.support.kernels import kernel_with
from tests.support.wheels import PYTHON_HERE, index_args, pip_env, write_tinyext

pytestmark = pytest.mark.usefixtures("hermetic_pip")

RUNTIME = Path(__file__).resolve().parent.parent / "builder" / "kkb_runtime"
OWNER = "kkb-demo"
WHEELHOUSE_ID = "kkb-demo/kkb-minimal-inference-wheels"  # default id: <owner>/<kernel-slug>-wheels


@pytest.fixture(scope="session")
def plain_venv(tmp_path_factory: pytest.TempPathFactory, index: Path) -> Path:
    """One fresh venv (pip and setuptools, as in the Kaggle image) shared by the install-cell tests."""
    venv = tmp_path_factory.mktemp("venv") / "kernel"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=pip_env())
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "--no-index", "--find-links", str(index),
                    "setuptools"], check=True, env=pip_env())
    return python


def install_cell(notebook: Path) -> str:
    cell = next(c for c in nbformat.read(notebook, 4).cells if c.get("id") == "kkb-install")
    return cell.source


def run_cell_in_venv(python: Path, cell: str, code_dir: Path, kaggle_root: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Execute a rendered install cell with the venv's Python, as the notebook would (kkb_runtime on the path)."""
    runtime = tmp_path / "runtime" / "kkb_runtime"
    runtime.mkdir(parents=True)
    (runtime / "__init__.py").write_text("")  # the real one imports pandas, which this bare venv lacks
    for module in RUNTIME_MODULES:  # what the wheels helper kernel embeds: the same files suffice here
        shutil.copy(RUNTIME / f"{module}.py", runtime / f"{module}.py")
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""\
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(runtime.parent)!r})
        import kkb_runtime.inputs, kkb_runtime.install
        import kkb_runtime as kkb
        CODE_DIR = Path({str(code_dir)!r})
        exec(compile(Path({str(tmp_path / 'cell.py')!r}).read_text(), "install-cell", "exec"))
        """))
    (tmp_path / "cell.py").write_text(cell)
    env = {**pip_env(), "KKB_KAGGLE_ROOT": str(kaggle_root)}
    env.pop("KKB_SANDBOX_NETLOG", None)
    return subprocess.run([str(python), str(driver)], capture_output=True, text=True, env=env, cwd=tmp_path)


# --------------------------------------------------------------------------------------------
# Target, tags, requirements
# --------------------------------------------------------------------------------------------


def test_target_accepts_older_manylinux_and_refuses_other_pythons(tmp_path: Path) -> None:
    target = WheelTarget("3.12", "manylinux_2_35_x86_64")
    platforms = target.platforms()
    assert platforms[0] == "manylinux_2_35_x86_64" and "manylinux2014_x86_64" in platforms and "manylinux1_x86_64" in platforms
    assert WheelTarget("3.12", "manylinux2014_x86_64").platforms()[:2] == ["manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    for name in ("ok-1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "ok-1.0-py3-none-any.whl",
                 "ok-1.0-cp39-abi3-manylinux_2_28_x86_64.whl"):
        (tmp_path / name).write_bytes(b"")
    assert incompatible_wheels(tmp_path, target) == []
    for name in ("old-1.0-cp311-cp311-manylinux_2_17_x86_64.whl", "new-1.0-cp312-cp312-manylinux_2_39_x86_64.whl",
                 "here-1.0-cp312-cp312-linux_x86_64.whl", "mac-1.0-cp312-cp312-macosx_11_0_arm64.whl"):
        (tmp_path / name).write_bytes(b"")
    refused = [name for name, _ in incompatible_wheels(tmp_path, target)]
    assert refused == ["here-1.0-cp312-cp312-linux_x86_64.whl", "mac-1.0-cp312-cp312-macosx_11_0_arm64.whl",
                       "new-1.0-cp312-cp312-manylinux_2_39_x86_64.whl", "old-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"]


def test_requirements_file_and_spec_validation(tmp_path: Path) -> None:
    kernel = kernel_with(tmp_path, '[install]\nrequirements = ["alpha>=1"]\nrequirements_file = "requirements.txt"\n')
    (kernel / "requirements.txt").write_text("# pinned\nbeta==1.2  # the chain\n\ndelta[fast]; python_version >= '3.8'\n")
    assert kernel_requirements(load_spec(kernel), kernel) == ["alpha>=1", "beta==1.2", "delta[fast]; python_version >= '3.8'"]
    (kernel / "requirements.txt").write_text("--extra-index-url https://example.org\n")
    with pytest.raises(WheelhouseError, match=r"requirements.txt:1: pip options"):
        kernel_requirements(load_spec(kernel), kernel)
    bad = kernel_with(tmp_path, '[install]\nrequirements = ["not a requirement"]\n', name="bad")
    with pytest.raises(SpecError, match="is not a pip requirement"):
        load_spec(bad)
    bad_id = kernel_with(tmp_path, '[install]\nwheelhouse = "me/x"\n', name="bad-id")
    with pytest.raises(SpecError, match="install.wheelhouse"):
        load_spec(bad_id)


# --------------------------------------------------------------------------------------------
# Building here: resolution from the local index, exclusions, cache
# --------------------------------------------------------------------------------------------


def test_wheelhouse_resolves_the_chain_and_leaves_out_the_image(tmp_path: Path, index: Path) -> None:
    kernel = kernel_with(tmp_path, f'[install]\nrequirements = ["alpha", "delta", "einops"]\nexclude = ["gamma"]\n'
                                   f'python_version = "{PYTHON_HERE}"\n')
    out = tmp_path / "build"
    result = build_wheels(WheelsSettings(kernel_dir=kernel, out_dir=out, index_args=index_args(index)))
    folder = out / WHEELS_DIR
    assert (result.action, result.mode, result.ref, result.out_dir) == ("built", "dataset", WHEELHOUSE_ID, folder)
    # a -> b resolved; numpy (kkb's image list, absent from this index) and gamma ([install] exclude) left out;
    # einops is on the image list but named by the kernel, so it ships and is reported as replacing the image's.
    assert sorted(result.files) == ["alpha-1.0-py3-none-any.whl", "beta-1.2-py3-none-any.whl",
                                    "delta-1.0-py3-none-any.whl", "einops-0.1-py3-none-any.whl"]
    assert {entry.split("==")[0] for entry in result.left_to_image} == {"numpy", "gamma"}
    assert result.replaces_image == ("einops",) and "numpy" in preinstalled_patterns()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["dataset"] == WHEELHOUSE_ID and manifest["resolution_key"] == result.key
    assert manifest["content_hash"] == result.content_hash
    assert json.loads((folder / "dataset-metadata.json").read_text())["id"] == WHEELHOUSE_ID
    record = json.loads((folder / "kkb_wheelhouse.json").read_text())
    assert record["id"] == WHEELHOUSE_ID and record["image"]["gamma"] == "2.0"
    assert result.check is not None and result.check.exact and result.check.python.startswith(PYTHON_HERE)
    assert {"alpha-1.0", "beta-1.2", "delta-1.0"} <= set(result.check.installed)

    # Unchanged requirements: no pip resolution, no new files, the same content hash (nothing to upload).
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    again = build_wheels(WheelsSettings(kernel_dir=kernel, out_dir=out, index_args=("--no-index",), check=False))
    assert again.action == "unchanged" and again.content_hash == result.content_hash and again.key == result.key
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before

    # A changed exclusion is a new key: rebuilt, and gamma now ships.
    text = (kernel / "kernel.toml").read_text().replace('exclude = ["gamma"]', "exclude = []")
    (kernel / "kernel.toml").write_text(text)
    changed = build_wheels(WheelsSettings(kernel_dir=kernel, out_dir=out, index_args=index_args(index), check=False))
    assert changed.action == "built" and changed.key != result.key and "gamma-2.0-py3-none-any.whl" in changed.files

    # `kkb build` replaces build/NAME but keeps the wheelhouse, and the kernel attaches it.
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=out))
    assert (out / WHEELS_DIR / "manifest.json").is_file()
    metadata_json = json.loads((build.kernel_dir / "kernel-metadata.json").read_text())
    assert metadata_json["dataset_sources"][-1] == WHEELHOUSE_ID and metadata_json["kernel_sources"] == []


def test_required_and_excluded_is_refused(tmp_path: Path, index: Path) -> None:
    kernel = kernel_with(tmp_path, '[install]\nrequirements = ["alpha"]\nexclude = ["alpha"]\n')
    with pytest.raises(WheelhouseError, match="alpha: both required and excluded"):
        build_wheels(WheelsSettings(kernel_dir=kernel, out_dir=tmp_path / "build", index_args=index_args(index)))


def test_cli_wheels_reports_errors_with_a_hint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = kernel_with(tmp_path, '[install]\nrequirements = ["alpha"]\n')
    assert cli.main(["wheels", str(kernel), "--out", str(tmp_path / "build"), "--on-kaggle"]) == 1
    err = capsys.readouterr().err
    assert "--on-kaggle, but [install] on_kaggle is not set" in err and "hint:" in err


@pytest.mark.slow
def test_sdist_only_packages_are_built_or_shipped_and_flagged(tmp_path: Path, index: Path) -> None:
    kernel = kernel_with(tmp_path, f'[install]\nrequirements = ["tinysdist", "cext"]\npython_version = "{PYTHON_HERE}"\n')
    result = build_wheels(WheelsSettings(kernel_dir=kernel, out_dir=tmp_path / "build", index_args=index_args(index)))
    # tinysdist is pure Python: built here into a wheel. cext compiles: its sdist ships and compiles in the kernel.
    assert result.built_from_sdist == ("tinysdist-0.1-py3-none-any.whl",)
    assert result.sdists == ("cext-0.1.tar.gz",)
    assert sorted(result.files) == ["beta-1.2-py3-none-any.whl", "cext-0.1.tar.gz", "tinysdist-0.1-py3-none-any.whl"]
    assert result.check is not None and "cext==0.1 (sdist)" in result.check.stand_ins


# --------------------------------------------------------------------------------------------
# The offline install check
# --------------------------------------------------------------------------------------------


def test_offline_check_names_a_missing_dependency(tmp_path: Path, index: Path) -> None:
    wheelhouse = tmp_path / "wheels"
    wheelhouse.mkdir()
    shutil.copy(index / "alpha-1.0-py3-none-any.whl", wheelhouse)  # beta is not there
    with pytest.raises(WheelhouseError, match=r"missing from the wheelhouse: beta>=1") as caught:
        check_offline_install(wheelhouse, ["alpha"], target=WheelTarget(PYTHON_HERE), image={"numpy": "2.0", "gamma": "2.0"})
    assert "kkb wheels" in (caught.value.hint or "")
    shutil.copy(index / "beta-1.2-py3-none-any.whl", wheelhouse)
    check = check_offline_install(wheelhouse, ["alpha"], target=WheelTarget(PYTHON_HERE), image={"numpy": "2.0", "gamma": "2.0"})
    assert check.exact and "alpha-1.0" in check.installed and "numpy==2.0" in check.stand_ins


def test_offline_check_refuses_a_wheel_for_another_python(tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wheels"
    stand_in(wheelhouse, "fine", "1.0")
    (wheelhouse / "oldtag-1.0-cp39-cp39-manylinux2014_x86_64.whl").write_bytes(b"")
    with pytest.raises(WheelhouseError) as caught:
        check_offline_install(wheelhouse, ["fine"], target=WheelTarget("3.12"))
    assert "oldtag-1.0-cp39-cp39-manylinux2014_x86_64.whl" in caught.value.message and "cp312" in caught.value.message


def test_dry_run_check_reports_a_stale_or_missing_wheelhouse_as_a_kernel_failure(tmp_path: Path, index: Path) -> None:
    kernel = kernel_with(tmp_path, f'[install]\nrequirements = ["beta"]\npython_version = "{PYTHON_HERE}"\n')
    out = tmp_path / "build"
    with pytest.raises(KernelFailed, match="no wheelhouse was built") as caught:
        dry_run_check(load_spec(kernel), kernel, out, OWNER)
    assert caught.value.exit_code == 2 and "kkb wheels" in (caught.value.hint or "")
    build_wheels(WheelsSettings(kernel_dir=kernel, out_dir=out, index_args=index_args(index), check=False))
    assert dry_run_check(load_spec(kernel), kernel, out, OWNER) is not None
    (kernel / "kernel.toml").write_text((kernel / "kernel.toml").read_text().replace('["beta"]', '["beta", "gamma"]'))
    with pytest.raises(KernelFailed, match="built for other requirements"):
        dry_run_check(load_spec(kernel), kernel, out, OWNER)
    spec = load_spec(kernel)
    assert dry_run_mounts(spec, OWNER, out) == [(out / WHEELS_DIR, f"datasets/{WHEELHOUSE_ID}")]


# --------------------------------------------------------------------------------------------
# The install cell, executed offline in a fresh venv
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_install_cell_installs_the_wheelhouse_offline_and_names_what_is_missing(tmp_path: Path, index: Path,
                                                                                plain_venv: Path) -> None:
    kernel = kernel_with(tmp_path, f'[install]\nrequirements = ["alpha"]\nexclude = ["gamma"]\npython_version = "{PYTHON_HERE}"\n')
    out = tmp_path / "build"
    wheels = build_wheels(WheelsSettings(kernel_dir=kernel, out_dir=out, index_args=index_args(index), check=False))
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=out))
    cell = install_cell(build.notebook_path)
    assert f"kkb.inputs.find_wheelhouse({WHEELHOUSE_ID!r}, 'dataset')" in cell
    assert "install.wheel_install_command(WHEELHOUSE, ['alpha'])" in cell
    # The "image": what the wheelhouse left out is already installed in the kernel's Python.
    image = tmp_path / "image"
    for entry in wheels.left_to_image:
        stand_in(image, *entry.split("=="))
    subprocess.run([str(plain_venv), "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(image),
                    "numpy", "gamma"], check=True, env=pip_env())
    root = tmp_path / "kaggle"
    mount = root / "input" / "datasets" / WHEELHOUSE_ID
    mount.parent.mkdir(parents=True)
    shutil.copytree(out / WHEELS_DIR, mount)
    (mount / "beta-1.2-py3-none-any.whl").unlink()
    failed = run_cell_in_venv(plain_venv, cell, build.code_dir, root, tmp_path / "missing")
    assert failed.returncode != 0 and "InstallFailed: offline install failed (missing from the wheelhouse: beta>=1" in failed.stderr
    shutil.copy(out / WHEELS_DIR / "beta-1.2-py3-none-any.whl", mount)
    ok = run_cell_in_venv(plain_venv, cell, build.code_dir, root, tmp_path / "ok")
    assert ok.returncode == 0, ok.stderr
    assert "--no-index --find-links" in ok.stdout and "Successfully installed alpha-1.0 beta-1.2" in ok.stdout
    shown = subprocess.run([str(plain_venv), "-c", "import alpha, beta; print(alpha.VERSION, beta.VERSION)"],
                           capture_output=True, text=True)
    assert shown.stdout.split() == ["1.0", "1.2"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="needs a C compiler")
def test_install_cell_compiles_a_source_package_offline(tmp_path: Path, plain_venv: Path) -> None:
    kernel = kernel_with(tmp_path, '[[install.source_packages]]\nname = "tinyext"\npath = "vendor/tinyext"\ncpp_ext = true\n')
    write_tinyext(kernel / "vendor" / "tinyext")
    (kernel / "vendor" / "tinyext" / "build" / "lib").mkdir(parents=True)
    (kernel / "vendor" / "tinyext" / "build" / "lib" / "stale.o").write_bytes(b"\0")
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    code = json.loads((build.code_dir / "manifest.json").read_text())
    shipped = {entry["path"] for entry in code["files"]}
    # The tree goes into the code dataset by itself, without its stale build output.
    assert {"vendor/tinyext/setup.py", "vendor/tinyext/tinyext/_speed.c"} <= shipped
    assert not any("/build/" in path for path in shipped)
    cell = install_cell(build.notebook_path)
    assert "install.source_install_command(CODE_DIR / 'vendor/tinyext', ['--cpp_ext'])" in cell and "WHEELHOUSE" not in cell
    code_copy = Path(shutil.copytree(build.code_dir, tmp_path / "code"))  # pip builds in the tree; inputs are read-only
    done = run_cell_in_venv(plain_venv, cell, code_copy, tmp_path / "kaggle", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    # This venv's pip (>= 23.1) takes --config-settings; the flag reached setup.py and the extension was built.
    assert "--config-settings --build-option=--cpp_ext" in done.stdout
    compiled = subprocess.run([str(plain_venv), "-c", "import tinyext; print(tinyext.compiled())"], capture_output=True,
                              text=True, cwd=tmp_path)
    assert compiled.stdout.strip() == "True", compiled.stderr


def test_source_package_path_must_exist(tmp_path: Path) -> None:
    kernel = kernel_with(tmp_path, '[[install.source_packages]]\nname = "apex"\npath = "apex"\ncpp_ext = true\n')
    with pytest.raises(BundleError, match=r"install.source_packages\[0\].path: 'apex' is not a folder"):
        build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))


# --------------------------------------------------------------------------------------------
# Wheels built on Kaggle: the helper kernel and the inference kernel that attaches it
# --------------------------------------------------------------------------------------------

ON_KAGGLE = '''\
[install]
requirements = ["delta"]
on_kaggle = true

[[install.source_packages]]
name = "tinyext"
path = "tinyext"
cpp_ext = true
cuda_ext = true
'''
HELPER_ID = "kkb-demo/kkb-minimal-inference-wheels"  # slugify("KKB Minimal Inference wheels")


def test_helper_kernel_metadata_and_script(tmp_path: Path) -> None:
    kernel = kernel_with(tmp_path, ON_KAGGLE.replace("[install]", '[install]\nexclude = ["gamma"]'))
    (kernel / "kernel.toml").write_text((kernel / "kernel.toml").read_text().replace('accelerator = "none"', 'accelerator = "NvidiaL4"'))
    write_tinyext(kernel / "tinyext")
    helper = helper_kernel(load_spec(kernel), kernel, OWNER, described_image(), code_hash="sha256:abc")
    meta = helper.metadata
    assert meta["id"] == HELPER_ID and helper.code_dataset == "kkb-demo/kkb-minimal-inference-code"
    assert meta["enable_internet"] is True and meta["kernel_type"] == "script" and meta["is_private"] is True
    assert meta["competition_sources"] == [] and meta["dataset_sources"] == [helper.code_dataset]
    assert meta["enable_gpu"] is True and meta["machine_shape"] == "NvidiaL4"  # nvcc for --cuda_ext
    assert meta["docker_image_pinning_type"] == "original" and meta["code_file"] == "kkb-minimal-inference-wheels.py"
    compile(helper.script, meta["code_file"], "exec")
    assert "'cuda_arch_list': '8.9'" in helper.script and "'exclude': ['gamma']" in helper.script
    # Another source tree or requirement is another key (the helper runs again); the same inputs are not.
    assert helper_kernel(load_spec(kernel), kernel, OWNER, described_image(), code_hash="sha256:abc").key == helper.key
    assert helper_kernel(load_spec(kernel), kernel, OWNER, described_image(), code_hash="sha256:def").key != helper.key


def test_inference_kernel_attaches_the_helper_output_and_installs_prebuilt_wheels(tmp_path: Path) -> None:
    kernel = kernel_with(tmp_path, ON_KAGGLE)
    write_tinyext(kernel / "tinyext")
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    meta = json.loads((build.kernel_dir / "kernel-metadata.json").read_text())
    assert meta["kernel_sources"] == [HELPER_ID] and HELPER_ID not in meta["dataset_sources"]
    assert meta["enable_internet"] is False
    cell = install_cell(build.notebook_path)
    assert f"kkb.inputs.find_wheelhouse({HELPER_ID!r}, 'kernel')" in cell
    assert "install.wheel_install_command(WHEELHOUSE, ['delta'])" in cell
    assert "install.wheel_install_command(WHEELHOUSE, ['tinyext'], no_deps=True)" in cell
    assert "source_install_command" not in cell
    with pytest.raises(DryRunError, match="helper kernel"):
        dry_run_mounts(build.spec, OWNER, tmp_path / "build")
    plain = kernel_with(tmp_path, ON_KAGGLE.replace("on_kaggle = true", ""), name="plain")
    with pytest.raises(WheelhouseError, match="--on-kaggle, but \\[install\\] on_kaggle is not set"):
        build_wheels(WheelsSettings(kernel_dir=plain, out_dir=tmp_path / "b2", on_kaggle=True))


@pytest.mark.parametrize("layout", ["current", "legacy", "searched"])
def test_runtime_finds_the_wheelhouse_in_every_layout(tmp_path: Path, layout: str) -> None:
    base = tmp_path / "input"
    kernel_mount = {"current": base / "notebooks" / "kkb-demo" / "kkb-minimal-inference-wheels",
                    "legacy": base / "kkb-minimal-inference-wheels", "searched": base / "somewhere" / "else"}[layout]
    (kernel_mount / "wheels").mkdir(parents=True)
    (kernel_mount / "wheels" / "kkb_wheelhouse.json").write_text(json.dumps({"id": HELPER_ID}))
    assert inputs.find_wheelhouse(HELPER_ID, "kernel", root=tmp_path) == kernel_mount / "wheels"
    assert inputs.find_kernel_output(HELPER_ID, "wheels", root=tmp_path) == kernel_mount
    other = "someone/public-wheels"
    dataset = base / "datasets" / "someone" / "public-wheels" if layout == "current" else base / "public-wheels"
    dataset.mkdir(parents=True)
    (dataset / "x-1.0-py3-none-any.whl").write_bytes(b"")  # a wheel dataset kkb did not make
    if layout != "searched":
        assert inputs.find_wheelhouse(other, "dataset", root=tmp_path) == dataset
    with pytest.raises(inputs.InputNotFound, match="wheels of notebook me/missing-wheels"):
        inputs.find_wheelhouse("me/missing-wheels", "kernel", root=tmp_path)


def test_cli_wheels_without_requirements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal"))
    assert cli.main(["wheels", str(kernel), "--out", str(tmp_path / "build")]) == 0
    assert "nothing to build" in capsys.readouterr().out
    assert not (tmp_path / "build" / HELPER_DIR).exists()


def test_a_helper_compiling_cuda_extensions_asks_kaggles_gpu_quota_before_any_upload(tmp_path: Path) -> None:
    kernel = kernel_with(tmp_path, ON_KAGGLE)
    (kernel / "kernel.toml").write_text((kernel / "kernel.toml").read_text().replace('accelerator = "none"', 'accelerator = "gpu"'))
    write_tinyext(kernel / "tinyext")
    fake = FakeKaggle()
    fake.quota = lambda: Quota(gpu=QuotaLine(used_s=29.5 * 3600, total_s=30 * 3600), tpu=None, refresh=None)  # type: ignore[method-assign]
    settings = WheelsSettings(kernel_dir=kernel, out_dir=tmp_path / "build", on_kaggle=True, adapter=fake,  # type: ignore[arg-type]
                              waits=FAKE_WAITS, wait=False)
    with pytest.raises(LimitReached) as refused:
        build_wheels(settings)
    assert refused.value.message == ("GPU quota: 0.5 h left this week (29.5 h of 30.0 h used), the run needs 1.0 h "
                                     "(compiling CUDA extensions: an hour allowed)")
    assert "[kernel] accelerator in kernel.toml: CUDA extensions compile on its GPU" in (refused.value.hint or "")
    assert (fake.calls, fake.uploaded_bytes) == ([], 0)
    pushed = build_wheels(replace(settings, force=True))  # --force: pushed past the limit, as kkb push --force
    assert pushed.action == "pushed" and f"kernel {HELPER_ID}" in fake.calls


def test_the_helper_embeds_every_runtime_module_its_own_modules_import() -> None:
    """The helper unpacks only RUNTIME_MODULES on Kaggle: one that imports another left out fails there, at import."""
    imported = {name for module in RUNTIME_MODULES
                for name in re.findall(r"^from \.(\w+) import", (RUNTIME / f"{module}.py").read_text(), re.MULTILINE)}
    assert imported <= set(RUNTIME_MODULES), sorted(imported - set(RUNTIME_MODULES))
