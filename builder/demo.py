"""``make demo``: a kernel project to a public score, end to end, against a local Kaggle.

    kkb demo [--kernel kernels/reference] [--keep] [--port 0]     (or python -m builder.demo)

1. generates the reference kernel's assets (``kernels/reference/make_assets.py``; a no-op when current),
2. starts the local Kaggle on a free loopback port, registers a demo user and the competition,
3. runs ``kkb submit`` as a separate process, with ``KKB_KAGGLE_API`` pointing the real ``kaggle``
   client at that server and throwaway credentials (the user's own are never read),
4. prints the score and the project's history, and stops the server.

The kernel project is copied into a scratch folder first, so the demo leaves neither history nor
build output in the repository. Installed from a wheel (no checkout, no ``kernels/reference``), the demo runs
the pandas-only example kernel kkb ships (``builder.project.examples``). Like ``builder.cli``, this is a program: it prints and exits.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from builder.local_kaggle.server import LocalKaggle
from builder.project.examples import example_kernel
from builder.remote.history import History

REPO = Path(__file__).resolve().parent.parent
CHECKOUT_KERNEL = REPO / "kernels" / "reference"
DEFAULT_KERNEL = CHECKOUT_KERNEL if CHECKOUT_KERNEL.is_dir() else example_kernel()
DEMO_USER = "kkb-demo"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    kernel = Path(args.kernel).resolve()
    _make_assets(kernel)
    scratch = Path(tempfile.mkdtemp(prefix="kkb-demo-"))
    try:
        return _run(kernel, scratch, args.port)
    finally:
        if args.keep:
            print(f"demo: kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kkb demo", description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", default=str(DEFAULT_KERNEL),
                        help="kernel project (default: kernels/reference in a checkout, else the example kkb ships)")
    parser.add_argument("--port", type=int, default=0, help="loopback port for the local Kaggle (0: any free one)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (server data, build, history)")
    return parser.parse_args(argv)


def _make_assets(kernel: Path) -> None:
    script = kernel / "make_assets.py"
    if script.is_file():
        print(f"demo: generating assets with {script.relative_to(REPO) if script.is_relative_to(REPO) else script}")
        subprocess.run([sys.executable, str(script)], check=True, cwd=kernel)


def _run(kernel: Path, scratch: Path, port: int) -> int:
    project = Path(shutil.copytree(kernel, scratch / kernel.name, ignore=shutil.ignore_patterns(".kkb", "__pycache__")))
    competition = project / "data" / "competition"
    key = secrets.token_hex(16)  # throwaway: lives only in this process and the child's environment
    with LocalKaggle(scratch / "kaggle", port=port) as server:
        server.add_user(DEMO_USER, key)
        config = server.add_competition(competition)
        print(f"demo: local Kaggle at {server.base_url}, competition {config.slug}, user {DEMO_USER}")
        env = _child_env(scratch, server.base_url, key)
        # As people type it, from inside the project (the build lands in its build/ folder, in the scratch copy).
        print(f"demo: cd {project} && KKB_KAGGLE_API={server.base_url} kkb submit .")
        code = subprocess.run([sys.executable, "-m", "builder", "submit", "."], env=env, cwd=project).returncode
        subprocess.run([sys.executable, "-m", "builder", "history", "."], env=env, cwd=project)
    rows = [row for row in History.for_kernel(project).rows() if row.kind == "submission"]
    if code == 0 and rows:
        print(f"demo: public score {rows[-1].score} (submission #{rows[-1].submission_ref})")
    else:
        print(f"demo: kkb submit failed with exit code {code}", file=sys.stderr)
    return code


def _child_env(scratch: Path, base_url: str, key: str) -> dict[str, str]:
    """The child sees only the demo credentials: a real KAGGLE_API_TOKEN or ~/.kaggle would win otherwise."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAGGLE_", "KKB_"))}
    home = scratch / "home"
    (home / ".kaggle").mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), KAGGLE_CONFIG_DIR=str(home / ".kaggle"), KAGGLE_USERNAME=DEMO_USER,
               KAGGLE_KEY=key, KKB_KAGGLE_API=base_url, TMPDIR=str(scratch))
    return env


if __name__ == "__main__":
    sys.exit(main())
