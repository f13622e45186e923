"""The ``kkb`` command: parse, build a settings object, call one library function, show the result.

This is the only module that prints for people and exits. Every command runs inside
:func:`main`'s error boundary, which maps :class:`~builder.errors.KkbError` to its exit code
(table in ``builder/errors.py``). kkb's own tracebacks only with ``--debug`` (``--verbose``).
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import typer

from builder import __version__, api
from builder.build import BuildSettings
from builder.cli import limit_options
from builder.cli.dry_run_command import dry_run
from builder.cli.image import image as image_command
from builder.cli.options import BUILD_OUT_OPT, KERNEL_ARG, OWNER_OPT
from builder.cli.remote_commands import history, logs, push, status, stop, submit
from builder.cli.views import (
    _escape,
    _print_json,
    _ProgressView,
    _readable_help,
    _show_card_settings,
    _show_error,
    _show_init,
    _show_wheels,
    _state,
    console,
    err_console,
    waiting_line,
    without_kkb_frames,
)
from builder.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, EXIT_USER, KernelFailed, KkbError
from builder.local_kaggle.cli import app as local_kaggle_app
from builder.project.ci import CiProvider
from builder.project.init import InitSettings
from builder.project.paths import absolute, resolved
from builder.project.spec_renames import SpecDeprecation
from builder.rehearse.card_inputs import DEFAULT_ROWS
from builder.remote.competition_files import fetch_competition_data
from builder.remote.outputs import CompareSettings, compare_submissions
from builder.remote.wheels import WheelsSettings, build_wheels
from builder.run.image_env import build_image_env

app = typer.Typer(
    name="kkb",
    help="kkb: turn a Kaggle kernel project into a scored code-competition submission.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Help texts are plain text: "[install]" and "[competition]" are kernel.toml sections, not markup.
    rich_markup_mode=None,
)



def _print_version(value: bool) -> None:
    if value:
        console.print(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--debug", "--verbose", "-v",
                                 help="Show kkb's own tracebacks on errors and failed runs' whole notebook traceback."),
    show_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                      help="Print kkb's version and exit."),
) -> None:
    _state["verbose"] = verbose


@app.command()
def version() -> None:
    """Print kkb's version."""
    console.print(__version__)


@app.command()
def build(
    kernel_dir: Path = KERNEL_ARG,
    out: Path | None = typer.Option(None, "--out", "-o", help="Output folder (default: build/<name>)."),
    owner: str | None = OWNER_OPT,
) -> None:
    """Build the code and weights datasets and the rendered notebook, offline."""
    result = api.build(BuildSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner))
    console.print(f"[green]built[/green] {result.kernel_id} → {result.out_dir}")
    console.print(f"  code     {result.code_dataset}  {result.code_hash}")
    console.print(f"  weights  {result.weights_dataset or result.weights_model}  {result.weights_hash}")
    console.print(f"  notebook {result.notebook_path}")
    for note in result.model_notes:
        console.print(f"  note     {note}", markup=False, highlight=False)  # file names may hold [brackets]
    _show_card_settings(result.card_settings)


@app.command()
def init(
    kernel_dir: Path = typer.Argument(..., help="The new kernel project folder, e.g. kernels/NAME."),
    competition: str | None = typer.Option(None, "--competition", help="The competition's slug (its URL name)."),
    data: Path | None = typer.Option(None, "--data", help="The competition's public data (default: download it "
                                     "with your credentials into NAME/data/SLUG)."),
    source: Path | None = typer.Option(None, "--from", help="A folder written by `kaggle kernels pull OWNER/SLUG -p DIR "
                                       "-m` (kernel-metadata.json and its notebook or script)."),
    owner: str | None = typer.Option(None, "--owner", help="Kaggle username (default: the metadata's, then credentials)."),
    ci: CiProvider | None = typer.Option(None, "--ci", help="Also write a CI workflow (github: .github/workflows/kkb.yml "
                                         "at the repository root): build and dry-run on every push, submit on a tag v*. "
                                         "Alone, it adds the workflow to an existing project."),
    repo_root: Path | None = typer.Option(None, "--repo-root", help="--ci: the repository's root, where .github/ goes "
                                          "(default: the git repository holding the kernel folder; outside one, "
                                          "kkb init refuses and writes nothing)."),
) -> None:
    """Start a kernel project: from a competition's sample submission, or from an existing Kaggle kernel folder; --ci adds a CI workflow."""
    if source is None and competition is None and ci is None:
        raise typer.BadParameter("pass --competition SLUG, or --from DIR (a `kaggle kernels pull -m` folder), or --ci github")
    if repo_root is not None and ci is None:
        raise typer.BadParameter("--repo-root says where --ci writes its workflow: pass --ci github as well")

    def download(folder: Path, slug: str) -> Path:
        console.print(f"downloading the data of {_escape(slug)} …")
        return fetch_competition_data(folder, slug)

    result = api.init(InitSettings(kernel_dir=kernel_dir, competition=competition, data_dir=data, source_dir=source,
                                owner=owner, ci=ci, repo_root=repo_root), download=download)
    _show_init(result)


# `kkb push|submit|status|stop|logs|history`: builder/cli/remote_commands.py.
app.command()(push)
app.command()(submit)
app.command()(status)
app.command()(stop)
app.command()(logs)
app.command()(history)
# `kkb dry-run`: its own module (builder/cli/dry_run_command.py).
app.command("dry-run")(dry_run)


@app.command()
def compare(
    left: Path = typer.Argument(..., help="A submission CSV (e.g. build/NAME/dryrun/rerun.submission.csv)."),
    right: Path | None = typer.Argument(None, help="The other one (default with --kernel: the output of the last scored "
                                        "version in kkb history)."),
    kernel: Path | None = typer.Option(None, "--kernel", help="The kernel project: its id column, decimals and sample "
                                       "submission, and its history's last scored output."),
    tolerance: float | None = typer.Option(None, "--tolerance", help="Largest difference allowed per value (default: what "
                                           "rounding to [submission] decimals explains, else 1e-6)."),
    id_column: str | None = typer.Option(None, "--id", help="The id column (default: [submission] id_column, else the "
                                         "first column)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON on stdout."),
) -> None:
    """Compare two submissions column by column (rows matched by id); exit 2 when they differ beyond the tolerance."""
    if right is None and kernel is None:
        raise typer.BadParameter("name two files, or --kernel DIR to compare with the last scored version's output")
    comparison = compare_submissions(resolved(CompareSettings(left=left, right=right, kernel_dir=kernel, tolerance=tolerance,
                                                              id_column=id_column)))
    if as_json:
        _print_json("compare", comparison.to_json())
    else:
        for line in comparison.lines():
            console.print(_escape(line), highlight=False, soft_wrap=True)
    if not comparison.ok:
        raise KernelFailed(f"{comparison.left} differs from {comparison.right}: {'; '.join(comparison.failures()[:3])}",
                           hint="the table compares each column; pass --tolerance to allow more")


# `kkb local-kaggle serve|add-competition|add-user`.
app.add_typer(local_kaggle_app, name="local-kaggle")


@app.command()
def wheels(
    kernel_dir: Path = KERNEL_ARG,
    on_kaggle: bool = typer.Option(False, "--on-kaggle", help="Build every wheel in Kaggle's image with a helper kernel "
                                   "(needs [install] on_kaggle = true)."),
    out: Path | None = BUILD_OUT_OPT,
    owner: str | None = OWNER_OPT,
    force: bool = typer.Option(False, "--force", help="Resolve and build again even if nothing changed (--on-kaggle: "
                               "push the helper again, past Kaggle's limits too)."),
    no_check: bool = typer.Option(False, "--no-check", help="Skip the offline install check."),
    index_url: str | None = typer.Option(None, "--index-url", help="Package index for the local build."),
    find_links: list[str] = typer.Option([], "--find-links", help="Extra wheel folder or URL for the local build."),
    no_wait: bool = typer.Option(False, "--no-wait", help="--on-kaggle: push the helper kernel and return."),
    wait_for_slot: bool = limit_options.WAIT_FOR_SLOT,
    replace: bool = limit_options.REPLACE,
) -> None:
    """Build the offline wheelhouse of [install] requirements (cached by content)."""
    if not on_kaggle:
        limit_options.refuse_without("--on-kaggle", wait_for_slot=wait_for_slot, replace=replace)
    index_args = (*(("--index-url", index_url) if index_url else ()), *(a for link in find_links for a in ("--find-links", link)))
    with _ProgressView() as view:
        result = build_wheels(resolved(WheelsSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner, on_kaggle=on_kaggle,
                                                      force=force, check=not no_check, index_args=tuple(index_args),
                                                      wait=not no_wait, progress=view, wait_for_slot=wait_for_slot,
                                                      replace=replace)))
    _show_wheels(result)


@app.command("env")
def env(
    kernel_dir: Path = KERNEL_ARG,
    find_links: Path | None = typer.Option(None, "--find-links", help="Install the image's versions from this folder of "
                                           "wheels, offline (default: PyPI)."),
) -> None:
    """Build (once, then cached) an environment with Kaggle's image's versions of what the kernel imports."""
    for line in build_image_env(absolute(kernel_dir), find_links=absolute(find_links) if find_links else None).lines():
        console.print(_escape(line), highlight=False, soft_wrap=True)


# `kkb image`: its own module (builder/cli/image.py).
app.command("image")(image_command)


@app.command()
def demo(
    kernel: Path | None = typer.Option(None, "--kernel", help="Kernel project (default: kernels/reference in a "
                                       "checkout, else the pandas-only example kkb ships)."),
    port: int = typer.Option(0, "--port", help="Loopback port for the local Kaggle (0: any free one)."),
    keep: bool = typer.Option(False, "--keep", help="Keep the scratch folder (server data, build, history)."),
) -> None:
    """A kernel to a public score against a local Kaggle, end to end (what make demo runs)."""
    # builder.demo is a program beside this one (the layers keep them apart): run it as one.
    argv = [sys.executable, "-m", "builder.demo", "--port", str(port), *(["--kernel", str(kernel)] if kernel else []),
            *(["--keep"] if keep else [])]
    code = subprocess.run(argv, check=False).returncode
    if code != EXIT_OK:
        raise typer.Exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` and return the exit code (the one error boundary)."""
    args = optional_values(list(sys.argv[1:] if argv is None else argv))
    try:
        with warnings.catch_warnings():  # kernel.toml's old spellings: one "warning:" line each
            warnings.showwarning = _show_warning
            warnings.simplefilter("default", SpecDeprecation)
            # Without standalone mode typer *returns* the code of an Exit, Ctrl-C's 130 included.
            code = app(args=args, prog_name="kkb", standalone_mode=False)
    except KkbError as exc:
        _show_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/red]")
        return EXIT_INTERRUPTED
    except SystemExit as exc:  # click's own exits (--help, --version) arrive here
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USER
    except Exception as exc:  # click usage errors and anything unexpected
        return _unexpected(exc)
    if isinstance(code, int) and not isinstance(code, bool) and code != EXIT_OK:
        if code == EXIT_INTERRUPTED:
            err_console.print("[red]interrupted[/red]")
        return code
    return EXIT_OK


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: TextIO | None = None,
                  line: str | None = None) -> None:
    if issubclass(category, SpecDeprecation):
        err_console.print(f"[yellow]warning:[/yellow] {_escape(str(message))}", highlight=False)
    else:
        err_console.print(warnings.formatwarning(message, category, filename, lineno, line), markup=False, highlight=False)


OPTIONAL_VALUES = {"--show-inputs": str(DEFAULT_ROWS)}  # an option whose value may be left out: its default then


def optional_values(args: list[str]) -> list[str]:
    """``--show-inputs`` alone means ``--show-inputs 3``: click has no option with an optional value."""
    out: list[str] = []
    for index, arg in enumerate(args):
        out.append(arg)
        following = args[index + 1] if index + 1 < len(args) else None
        if arg in OPTIONAL_VALUES and (following is None or not following.lstrip("-").isdigit()):  # -1: given, refused
            out.append(OPTIONAL_VALUES[arg])
    return out


def _unexpected(exc: Exception) -> int:
    # typer vendors its own click, so its usage errors are matched by shape, not by class.
    if type(exc).__name__ == "Abort":
        err_console.print("[red]interrupted[/red]")
        return EXIT_INTERRUPTED
    show, exit_code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
    if callable(show) and isinstance(exit_code, int):
        show()
        # click says 2 for a usage error, which is kkb's "the kernel failed": scripts must tell them apart.
        return EXIT_USAGE if exit_code == 2 else exit_code
    if _state["verbose"]:
        err_console.print_exception()
    err_console.print(f"[bold red]internal error:[/bold red] {type(exc).__name__}: {_escape(str(exc))}")
    err_console.print("run again with --debug for the traceback, and report it")
    return EXIT_USER


_readable_help(app)


def entrypoint() -> None:
    sys.exit(main())


__all__ = ["app", "entrypoint", "main", "waiting_line", "without_kkb_frames"]
