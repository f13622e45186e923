"""Changed copies of the project kernels in ``kernels/``: a test edits its own copy, never the repository's."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

from tests.support.files import KERNELS


def kernel_with(tmp_path: Path, install: str, name: str = "minimal") -> Path:
    """A copy of kernels/minimal at ``tmp_path/name`` with the TOML text ``install`` appended to its kernel.toml."""
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / name, ignore=shutil.ignore_patterns(".kkb")))
    with (kernel / "kernel.toml").open("a") as spec:
        spec.write("\n" + textwrap.dedent(install))
    return kernel


def evalapi_variant(kernel: Path, code: str, *, predict: str = "evalapi_model.faults:predict", **settings: object) -> Path:
    """``kernel`` (a copy of kernels/evalapi) with ``evalapi_model/faults.py`` as its predict and kernel.toml values replaced."""
    (kernel / "evalapi_model" / "faults.py").write_text(code)
    spec = (kernel / "kernel.toml").read_text()
    spec = re.sub(r'^predict = "[^"]*"', f'predict = "{predict}"', spec, flags=re.MULTILINE)
    for key, value in settings.items():
        spec, count = re.subn(rf"^{key} = \S+", f"{key} = {json.dumps(value)}", spec, flags=re.MULTILINE)
        assert count == 1, key
    (kernel / "kernel.toml").write_text(spec)
    return kernel
