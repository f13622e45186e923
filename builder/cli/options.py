"""What several commands take alike: the kernel folder, the build folder, the owner."""

from __future__ import annotations

import typer

KERNEL_ARG = typer.Argument(..., help="The kernel project folder (holds kernel.toml).")
OWNER_OPT = typer.Option(None, "--owner", help="Kaggle username (default: [kernel] owner, then credentials).")
BUILD_OUT_OPT = typer.Option(None, "--out", "-o", help="Build folder (default: build/<name>).")
