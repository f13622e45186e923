"""``kkb image``: the Kaggle image description kkb uses; ``--on-kaggle`` captures it, ``--refresh`` rebuilds it from
Kaggle/docker-python's published files, ``--diff`` shows two images side by side."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer
from rich.table import Table

from builder.cli import limit_options
from builder.cli.views import _escape, _print_json, _ProgressView, console
from builder.project.image import image_summary, load_image, package_lines
from builder.project.image_diff import ImageDiff, default_pair, diff_images, load_view
from builder.project.image_facts import STALE_AFTER_DAYS, described_image
from builder.project.image_refresh import DEFAULT_REF, refresh_image
from builder.project.image_store import stored_image_path
from builder.remote.image import ImageSettings, capture_image

LISTED = 12  # packages only one side has, named before "and N more"


def image(
    left: Path | None = typer.Argument(None, help="--diff: an image: described (the description kkb uses, the default), "
                                       "shipped, captured, newest, OWNER/SLUG (that kernel's last recorded run) or a file."),
    right: Path | None = typer.Argument(None, help="--diff: the other (default: newest, the newest image a run recorded; "
                                        "shipped if none did)."),
    on_kaggle: bool = typer.Option(False, "--on-kaggle", help="Capture Kaggle's image with a tiny private script kernel "
                                   "(internet off) and store its description."),
    accelerator: str = typer.Option("gpu", "--accelerator", help="--on-kaggle: gpu (T4 x2), none, or a machine shape."),
    owner: str | None = typer.Option(None, "--owner", help="Kaggle username (default: the credentials')."),
    packages: bool = typer.Option(False, "--packages", help="List every package of the image with its version."),
    diff: bool = typer.Option(False, "--diff", help="Show two images side by side: Python, CUDA, torch, every package "
                              "that differs."),
    refresh: str | None = typer.Option(None, "--refresh", metavar="SOURCE", help="Rebuild the description from Kaggle/docker-python's "
                                       "published freeze: a clone (or its bare mirror), a folder with the files, or a "
                                       "raw-file URL."),
    ref: str = typer.Option(DEFAULT_REF, "--ref", metavar="REF", help="--refresh: the branch or commit of a clone to read."),
    out: Path | None = typer.Option(None, "--out", metavar="FILE", help="--refresh: where to write it (default: where kkb reads a "
                                    "description first; builder/data/kaggle-image.json in a checkout of kkb)."),
    as_json: bool = typer.Option(False, "--json", help="Print the image description kkb uses as JSON on stdout."),
    wait_for_slot: bool = limit_options.WAIT_FOR_SLOT,
    force: bool = limit_options.FORCE,
    replace: bool = limit_options.REPLACE,
) -> None:
    """The Kaggle image description kkb uses (Python, packages, CUDA); --on-kaggle captures it on Kaggle, --refresh
    rebuilds it from docker-python's freeze, --diff compares two images."""
    images = [str(name) for name in (left, right) if name is not None]  # a name, or a file
    if images and not diff:
        raise typer.BadParameter("image names go with --diff (kkb image --diff [A [B]])")
    if sum((on_kaggle, diff, refresh is not None)) > 1:
        raise typer.BadParameter("--on-kaggle, --diff and --refresh are separate actions: pick one")
    if not on_kaggle:
        limit_options.refuse_without("--on-kaggle", wait_for_slot=wait_for_slot, force=force, replace=replace)
    if diff:
        _show_diff(images, as_json)
    elif refresh is not None:
        result = refresh_image(refresh, ref, out)
        _print_json("image", {"path": str(result.path), **result.data}) if as_json else \
            console.print(f"[green]refreshed[/green] {_escape(result.summary())}", highlight=False)
    elif on_kaggle:
        _capture(ImageSettings(owner=owner, accelerator=accelerator, wait_for_slot=wait_for_slot, force=force,
                               replace=replace), as_json)
    elif as_json:
        _print_json("image", dataclasses.asdict(load_image()))
    else:
        _show_described(packages)


def _show_described(packages: bool) -> None:
    if stored_image_path() is None:
        console.print("no captured image: kkb uses the description shipped with it; kkb image --on-kaggle captures one")
    for line in package_lines() if packages else image_summary():
        console.print(_escape(line), highlight=False, soft_wrap=True)
    age = described_image().age_days()
    if not packages and age is not None:
        stale = f", over {STALE_AFTER_DAYS}: kkb image --on-kaggle or --refresh" if age > STALE_AFTER_DAYS else ""
        console.print(f"  age: {age} days{stale}", highlight=False)


def _capture(settings: ImageSettings, as_json: bool) -> None:
    with _ProgressView() as view:
        result = capture_image(dataclasses.replace(settings, progress=view))
    if as_json:
        _print_json("image", dataclasses.asdict(result))
        return
    console.print(f"[green]captured[/green] {_escape(result.summary)}", highlight=False)
    console.print(f"  stored {_escape(str(result.path))} (the dry run and kkb wheels read it; $KKB_KAGGLE_IMAGE overrides)",
                  highlight=False)


def _show_diff(names: list[str], as_json: bool) -> None:
    # none: the description and the newest recorded image; one: the description and that one
    left_name, right_name = default_pair() if not names else ("described", names[0]) if len(names) == 1 else names
    result = diff_images(load_view(left_name), load_view(right_name))
    if as_json:
        _print_json("image-diff", result.to_json())
        return
    _print_diff(result)


def _print_diff(result: ImageDiff) -> None:
    table = Table(box=None, header_style="bold")
    table.add_column("")
    table.add_column(_escape(result.left.label), overflow="fold")
    table.add_column(_escape(result.right.label), overflow="fold")
    for what, left, right in result.rows:
        style = "bold" if left != right and what in ("python", "cuda", "torch") else None
        table.add_row(what, _escape(left), _escape(right), style=style)
    console.print(table)
    for side, only in (("left", result.only_left), ("right", result.only_right)):
        if only:
            more = f" and {len(only) - LISTED} more" if len(only) > LISTED else ""
            console.print(f"only {side}: {', '.join(only[:LISTED])}{more}", highlight=False, soft_wrap=True)
    console.print(f"the same in both: {result.same} packages", highlight=False)


__all__ = ["image"]
