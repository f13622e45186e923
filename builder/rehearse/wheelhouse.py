"""The wheelhouse in a local rehearsal: mounted where the install cell looks, and installed offline first."""

from __future__ import annotations

from pathlib import Path

from builder.bundle.wheels import OfflineCheck, check_kernel_wheels, wheelhouse_source
from builder.errors import DryRunError, KernelFailed, WheelhouseError
from builder.project.image_facts import kernel_image
from builder.project.layout import WHEELS_DIR
from builder.project.spec import KernelSpec


def dry_run_mounts(spec: KernelSpec, owner: str, out_dir: Path) -> list[tuple[Path, str]]:
    """(folder, target under input/) for the wheelhouse the install cell reads in a local rehearsal."""
    source = wheelhouse_source(spec, owner)
    if source is None:
        return []
    if source.kind == "kernel":
        raise DryRunError(
            "the kernel installs wheels built on Kaggle by its helper kernel ([install] on_kaggle), which a local "
            "dry run does not have",
            hint="rehearse against the local Kaggle after pushing the helper there, or set [install] on_kaggle = false "
                 "and run kkb wheels for a local wheelhouse",
        )
    return [(Path(out_dir) / WHEELS_DIR, f"datasets/{source.ref}")]


def dry_run_check(spec: KernelSpec, kernel_dir: Path, out_dir: Path, owner: str) -> OfflineCheck | None:
    """:func:`check_kernel_wheels` for the image the kernel's push gets, with a failure reported as the kernel failing
    (what Kaggle would do)."""
    try:
        return check_kernel_wheels(spec, kernel_dir, kernel_image(spec, owner), out_dir)
    except WheelhouseError as exc:
        raise KernelFailed(f"the install cell would fail on Kaggle: {exc.message}", hint=exc.hint) from exc
