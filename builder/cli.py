"""The ``kkb`` command: parse, build a settings object, call one library function, show the result.

This is the only module that prints for people and exits. Every command runs inside
:func:`main`'s error boundary, which maps :class:`~builder.errors.KkbError` to its exit code
(table in ``builder/errors.py``). Tracebacks only with ``--verbose``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from builder import __version__
from builder.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USER, KkbError

app = typer.Typer(
    name="kkb",
    help="kkb: turn a Kaggle kernel project into a scored code-competition submission.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

_state = {"verbose": False}


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show tracebacks on errors."),
) -> None:
    _state["verbose"] = verbose


@app.command()
def version() -> None:
    """Print kkb's version."""
    console.print(__version__)


@app.command()
def build(
    kernel_dir: Path = typer.Argument(..., help="The kernel project folder (holds kernel.toml)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder (default: build/<name>)."),
    owner: Optional[str] = typer.Option(None, "--owner", help="Kaggle username (default: [kernel] owner, then credentials)."),
) -> None:
    """Build the code and weights datasets and the rendered notebook, offline."""
    from builder.build import BuildSettings, build_kernel

    result = build_kernel(BuildSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner))
    console.print(f"[green]built[/green] {result.kernel_id} → {result.out_dir}")
    console.print(f"  code     {result.code_dataset}  {result.code_hash}")
    console.print(f"  weights  {result.weights_dataset}  {result.weights_hash}")
    console.print(f"  notebook {result.notebook_path}")


# -- push / submit / status / logs / history (issue 5) ------------------------------------------


class _ProgressView:
    """Push/submit progress on stderr: a line per step, a spinner for any wait longer than a second."""

    def __init__(self) -> None:
        self._status = None

    def __enter__(self) -> _ProgressView:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def __call__(self, event) -> None:  # builder.push.ProgressEvent
        text = _escape(event.message)
        if event.waiting:
            if event.elapsed >= 1.0:
                line = f"{text} [dim]({event.elapsed:.0f}s)[/dim]"
                if self._status is None:
                    self._status = err_console.status(line)
                    self._status.start()
                else:
                    self._status.update(line)
            return
        self._stop()
        err_console.print(f"[dim]{event.stage:>10}[/dim] {text}", highlight=False)

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


_KERNEL_ARG = typer.Argument(..., help="The kernel project folder (holds kernel.toml).")
_OWNER_OPT = typer.Option(None, "--owner", help="Kaggle username (default: [kernel] owner, then credentials).")


@app.command()
def push(
    kernel_dir: Path = _KERNEL_ARG,
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Build folder (default: build/<name>)."),
    owner: Optional[str] = _OWNER_OPT,
    message: Optional[str] = typer.Option(None, "--message", "-m", help="Dataset version notes."),
) -> None:
    """Build, upload only what changed, and push a kernel version (internet off) to Kaggle."""
    from builder.push import PushSettings
    from builder.push import push as push_kernel

    with _ProgressView() as view:
        result = push_kernel(PushSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner, message=message, progress=view))
    _show_push(result)


def _show_push(result) -> None:  # builder.push.PushResult
    for dataset in (result.weights, result.code):
        if dataset is not None:
            version = f" v{dataset.version}" if dataset.version else ""
            console.print(f"  {dataset.ref}{version}  {dataset.action}  {dataset.content_hash[:19]}…", highlight=False)
    console.print(f"  uploaded {result.uploaded_bytes:,} bytes", highlight=False)
    console.print(f"[green]{result.kernel_action}[/green] {result.kernel_id} v{result.kernel_version}  {result.kernel_url}",
                  highlight=False)


@app.command()
def submit(
    kernel_dir: Path = _KERNEL_ARG,
    version: Optional[int] = typer.Option(None, "--version", help="Submit this kernel version instead of pushing."),
    message: Optional[str] = typer.Option(None, "--message", "-m", help="Submission description."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Build folder (default: build/<name>)."),
    owner: Optional[str] = _OWNER_OPT,
    resubmit: bool = typer.Option(False, "--resubmit", help="Submit again even if this version was submitted."),
) -> None:
    """Push (unless --version), wait for the kernel run, submit it, and print the public score."""
    from builder.push import SubmitSettings
    from builder.push import submit as submit_kernel

    settings = SubmitSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner, message=message, version=version,
                              resubmit=resubmit)
    with _ProgressView() as view:
        result = submit_kernel(SubmitSettings(**{**settings.__dict__, "progress": view}))
    if result.push is not None:
        _show_push(result.push)
    console.print(f"submission #{result.submission_ref}: {result.kernel_id} v{result.kernel_version} → {result.competition}",
                  highlight=False)
    console.print(f"[bold green]public score {result.public_score}[/bold green]", highlight=False)


@app.command()
def status(
    kernel_dir: Path = _KERNEL_ARG,
    version: Optional[int] = typer.Option(None, "--version", help="Kernel version (default: the last pushed)."),
    owner: Optional[str] = _OWNER_OPT,
) -> None:
    """The last push, its kernel run, and the last submission's state on Kaggle."""
    from builder.push import QuerySettings
    from builder.push import status as kernel_status

    result = kernel_status(QuerySettings(kernel_dir=kernel_dir, version=version, owner=owner))
    console.print(f"{result.kernel_id} v{result.kernel_version}: run {result.run_status or 'unknown'}", highlight=False)
    if result.failure_message:
        console.print(f"  [red]{_escape(result.failure_message)}[/red]", highlight=False)
    if result.last_push:
        console.print(f"  last push {result.last_push.get('time')}", highlight=False)
    if result.submission is not None:
        sub = result.submission
        detail = sub.public_score or sub.error_description
        console.print(f"  submission #{sub.ref}: {sub.status} {_escape(detail)}", highlight=False)


@app.command()
def logs(
    kernel_dir: Path = _KERNEL_ARG,
    version: Optional[int] = typer.Option(None, "--version", help="Kernel version (default: the last pushed)."),
    owner: Optional[str] = _OWNER_OPT,
) -> None:
    """Print the log of a kernel run on Kaggle."""
    from builder.push import QuerySettings
    from builder.push import logs as kernel_logs

    result = kernel_logs(QuerySettings(kernel_dir=kernel_dir, version=version, owner=owner))
    err_console.print(f"[dim]log of {result.kernel_id} v{result.kernel_version}[/dim]", highlight=False)
    for entry in result.entries:
        style = "red" if entry.get("stream_name") == "stderr" else None
        console.print(str(entry.get("data", "")), end="", style=style, markup=False, highlight=False)


@app.command()
def history(kernel_dir: Path = _KERNEL_ARG) -> None:
    """A table of every push and submission of the project."""
    from rich.table import Table

    from builder.push import history as kernel_history

    rows = kernel_history(kernel_dir)
    if not rows:
        console.print(f"no pushes recorded for {kernel_dir} yet")
        return
    table = Table("when", "what", "kernel", "code", "weights", "datasets", "submission", "status", "score")
    for row in rows:
        datasets = f"code v{row.code_version or '?'}" + (f", weights v{row.weights_version or '?'}" if row.weights_hash else "")
        table.add_row(row.when, row.kind, f"v{row.kernel_version}", row.code_hash[7:19], row.weights_hash[7:19],
                      datasets, f"#{row.submission_ref}" if row.submission_ref else "", row.status, row.score)
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` and return the exit code (the one error boundary)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        app(args=args, prog_name="kkb", standalone_mode=False)
    except KkbError as exc:
        _show_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/red]")
        return EXIT_INTERRUPTED
    except SystemExit as exc:  # click's own exits (--help, usage errors) arrive here
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USER
    except Exception as exc:  # click usage errors and anything unexpected
        return _unexpected(exc)
    return EXIT_OK


def _show_error(exc: KkbError) -> None:
    if _state["verbose"]:
        err_console.print_exception()
    err_console.print(f"[bold red]error:[/bold red] {_escape(exc.message)}", highlight=False)
    if exc.hint:
        err_console.print(f"[yellow]hint:[/yellow] {_escape(exc.hint)}", highlight=False)


def _unexpected(exc: Exception) -> int:
    # typer vendors its own click, so its usage errors are matched by shape, not by class.
    if type(exc).__name__ == "Abort":
        err_console.print("[red]interrupted[/red]")
        return EXIT_INTERRUPTED
    if hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):
        exc.show()
        return int(exc.exit_code)
    if _state["verbose"]:
        err_console.print_exception()
    err_console.print(f"[bold red]internal error:[/bold red] {type(exc).__name__}: {_escape(str(exc))}")
    err_console.print("run again with --verbose for the traceback, and report it")
    return EXIT_USER


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def entrypoint() -> None:
    sys.exit(main())
