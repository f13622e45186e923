"""A hermetic pip and a local package index: wheels tests need no internet and no mirror.

The packages are tiny projects built here (``pip wheel``) and served from a folder (``--no-index
--find-links``); pip's own configuration is switched off so the machine's mirrors are not consulted
either. The one C extension (``tinyext``) stands in for NVIDIA apex: its setup.py compiles
``tinyext._speed`` only when given ``--cpp_ext``, as apex does.

A module whose tests run pip opts into ``hermetic_pip`` with
``pytestmark = pytest.mark.usefixtures("hermetic_pip")``; ``index`` is built once per session.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

#: "major.minor" of the Python running the tests: a wheelhouse for it can be installed and checked here.
PYTHON_HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"
NO_PIP_CONFIG = {"PIP_CONFIG_FILE": os.devnull}


def pip_env() -> dict[str, str]:
    """This process's environment without any ``PIP_*`` setting and with no pip configuration file."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("PIP_")}
    return {**env, **NO_PIP_CONFIG}


@pytest.fixture
def hermetic_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's pip.conf adds mirrors and find-links: a test sees only its own folder."""
    for name in list(os.environ):
        if name.upper().startswith("PIP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


# -- the local package index: tiny projects, built once per session --------------------------

PROJECTS = {
    # a -> b chain, plus a package the image has (numpy, never on this index) and one excluded by the kernel
    "alpha": ("1.0", ["beta>=1", "numpy>=1", "gamma"]),
    "beta": ("1.2", []),
    "gamma": ("2.0", []),
    "delta": ("1.0", ["beta", "epsilon; python_version < '3.0'"]),  # epsilon exists nowhere: its marker is false
    "einops": ("0.1", []),  # an image package (kkb's list) a kernel may ask for by name
}

SETUP_TINYEXT = '''\
import sys
from setuptools import Extension, setup

# Like NVIDIA apex: the C extension is compiled only when --cpp_ext reaches setup.py.
ext_modules = []
if "--cpp_ext" in sys.argv:
    sys.argv.remove("--cpp_ext")
    ext_modules = [Extension("tinyext._speed", ["tinyext/_speed.c"])]
setup(name="tinyext", version="0.1", packages=["tinyext"], ext_modules=ext_modules)
'''
SPEED_C = '''\
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, "42"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speed", NULL, -1, methods};
PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&module); }
'''
TINYEXT_INIT = '''\
def compiled():
    try:
        from . import _speed
    except ImportError:
        return False
    return _speed.answer() == 42
'''
PYPROJECT_SETUPTOOLS = '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'


def write_pure_wheel(folder: Path, name: str, version: str) -> Path:
    """A pure-Python wheel written by hand (no build tool, no index); its package has ``__version__`` and ``VERSION``."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"__version__ = VERSION = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: kkb-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def write_project(root: Path, name: str, version: str, dependencies: list[str]) -> Path:
    """A pure-Python setuptools project ``root/name`` whose package knows its ``VERSION``."""
    folder = root / name
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(f"VERSION = {version!r}\n")
    deps = ", ".join(json.dumps(d) for d in dependencies)
    (folder / "pyproject.toml").write_text(
        PYPROJECT_SETUPTOOLS + f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = [{deps}]\n')
    return folder


def write_tinyext(folder: Path) -> Path:
    """The apex stand-in's source tree in ``folder``: ``tinyext.compiled()`` says whether ``--cpp_ext`` was given."""
    (folder / "tinyext").mkdir(parents=True)
    (folder / "setup.py").write_text(SETUP_TINYEXT)
    (folder / "pyproject.toml").write_text(PYPROJECT_SETUPTOOLS)
    (folder / "tinyext" / "__init__.py").write_text(TINYEXT_INIT)
    (folder / "tinyext" / "_speed.c").write_text(SPEED_C)
    return folder


def repack_installed(name: str, dest: Path) -> Path:
    """A wheel of an installed distribution (setuptools), so tests need no index to get one."""
    dist = metadata.distribution(name)
    wheel_file = next(f for f in dist.files or [] if f.name == "WHEEL" and f.parent.name.endswith(".dist-info"))
    tag = next(line.split(": ", 1)[1] for line in (dist.read_text("WHEEL") or "").splitlines() if line.startswith("Tag:"))
    wheel = dest / f"{dist.metadata['Name'].replace('-', '_')}-{dist.version}-{tag}.whl"
    record = []
    with zipfile.ZipFile(wheel, "w") as archive:
        for item in dist.files or []:
            path = Path(str(dist.locate_file(item)))
            if item.name == "RECORD" or "__pycache__" in item.parts or ".." in item.parts or not path.is_file():
                continue
            data = path.read_bytes()
            archive.writestr(str(item), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{item},sha256={digest},{len(data)}")
        record_path = f"{wheel_file.parent}/RECORD"
        archive.writestr(record_path, "\n".join([*record, f"{record_path},,"]) + "\n")
    return wheel


def write_sdist(dest: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """An sdist ``name-version.tar.gz`` in ``dest`` holding ``files`` (and a PKG-INFO)."""
    sdist = dest / f"{name}-{version}.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for rel, text in {**files, "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{rel}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return sdist


@pytest.fixture(scope="session")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of wheels and sdists pip reads with ``--no-index --find-links``."""
    root = tmp_path_factory.mktemp("projects")
    folders = [write_project(root, name, version, deps) for name, (version, deps) in PROJECTS.items()]
    wheels = tmp_path_factory.mktemp("index")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(wheels), *map(str, folders)], check=True, env=pip_env())
    repack_installed("setuptools", wheels)  # the sdists' isolated builds take setuptools from here
    pyproject = PYPROJECT_SETUPTOOLS + '[project]\nname = "tinysdist"\nversion = "0.1"\ndependencies = ["beta"]\n'
    write_sdist(wheels, "tinysdist", "0.1", {"pyproject.toml": pyproject, "tinysdist/__init__.py": ""})
    cext_setup = ('from setuptools import Extension, setup\nsetup(name="cext", version="0.1", packages=["cext"], '
                  'ext_modules=[Extension("cext._speed", ["cext/_speed.c"])])\n')
    write_sdist(wheels, "cext", "0.1", {"pyproject.toml": PYPROJECT_SETUPTOOLS, "setup.py": cext_setup,
                                        "cext/__init__.py": "", "cext/_speed.c": SPEED_C})
    return wheels


def index_args(index: Path) -> tuple[str, ...]:
    """pip options that install from ``index`` only."""
    return ("--no-index", "--find-links", str(index))
