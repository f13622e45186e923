"""The ``kkb`` command: parse, build a settings object, call one library function, show the result.

This is the only module that prints for people and exits. Every command runs inside
:func:`main`'s error boundary, which maps :class:`~builder.errors.KkbError` to its exit code
(table in ``builder/errors.py``). Tracebacks only with ``--verbose``.
"""

from __future__ import annotations

import sys
import time
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
    owner: Optional[str] = typer.Option(None, "--owner", help="Kaggle username (default: \\[kernel] owner, then credentials)."),
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
        took = f" [dim]({event.elapsed:.0f}s)[/dim]" if event.elapsed >= 1.0 else ""
        err_console.print(f"[dim]{event.stage:>10}[/dim] {text}{took}", highlight=False)

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


_KERNEL_ARG = typer.Argument(..., help="The kernel project folder (holds kernel.toml).")
_OWNER_OPT = typer.Option(None, "--owner", help="Kaggle username (default: \\[kernel] owner, then credentials).")


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
    servers = sorted({row.server for row in rows})
    mixed = len(servers) > 1
    caption = None if mixed or servers == ["kaggle.com"] else f"server: {servers[0]}"
    table = Table(box=None, header_style="bold", caption=caption)
    for name in ("when (UTC)", "what", "kernel", "code", "weights", "ref", "result", *(["server"] if mixed else [])):
        table.add_column(name, no_wrap=name in ("when (UTC)", "what"), overflow="fold")
    for row in rows:
        code = f"v{row.code_version or '?'} {row.code_hash[7:15]}"
        weights = f"v{row.weights_version or '?'} {row.weights_hash[7:15]}" if row.weights_hash else "-"
        result = f"{row.status} {row.score}".strip()
        table.add_row(row.when.replace("T", " ")[:16], row.kind, f"v{row.kernel_version}", code, weights,
                      f"#{row.submission_ref}" if row.submission_ref else "", result, *([row.server] if mixed else []))
    console.print(table)


@app.command("dry-run")
def dry_run(
    kernel_dir: Path = _KERNEL_ARG,
    data: Optional[Path] = typer.Option(None, "--data", help="Competition data to mount (default: [competition] data)."),
    scenario: str = typer.Option("both", "--scenario", help="commit, rerun or both."),
    rerun_scale: int = typer.Option(1, "--rerun-scale", help="Replicate the test N times (new ids) for the rerun."),
    hidden_rows: Optional[int] = typer.Option(None, "--hidden-rows", help="Rows of the hidden test (default: [competition] hidden_rows)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Kill each run after this many seconds."),
    legacy_layout: bool = typer.Option(False, "--legacy-layout", help="Mount inputs at input/<slug> (Kaggle's old layout)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Build folder (default: build/<name>)."),
    owner: Optional[str] = _OWNER_OPT,
    keep_sandbox: bool = typer.Option(False, "--keep-sandbox", help="Leave each sandbox on disk for inspection."),
    rerun_data: Optional[Path] = typer.Option(None, "--rerun-data", help="Data for the rerun (a hidden stand-in); "
                                              "the commit keeps --data."),
    memory: Optional[str] = typer.Option(None, "--memory", help="RAM limit, e.g. 16G (default: the machine shape's)."),
    as_json: bool = typer.Option(False, "--json", help="Print report.json on stdout (for CI scripts), nothing else."),
) -> None:
    """Run the kernel locally as Kaggle's commit run and scoring rerun would, and say what Kaggle would say."""
    import json

    from builder.dryrun import DryRunSettings
    from builder.dryrun import dry_run as run_dry_run
    from builder.errors import KernelFailed, NotRehearsed
    from builder.limits import parse_size

    memory_bytes = parse_size(memory) if memory else None
    with _DryRunProgress(enabled=not as_json) as progress:
        report = run_dry_run(DryRunSettings(kernel_dir=kernel_dir, data_dir=data, scenario=scenario,  # type: ignore[arg-type]
                                            rerun_scale=rerun_scale, hidden_rows=hidden_rows, timeout_seconds=timeout,
                                            layout="legacy" if legacy_layout else "current", out_dir=out, owner=owner,
                                            keep_sandbox=keep_sandbox, rerun_data_dir=rerun_data, memory_bytes=memory_bytes,
                                            progress=progress))
    if as_json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        _show_dry_run(report)
    failed = [s.scenario for s in report.scenarios if not s.ok and s.rehearsed]
    if failed:
        raise KernelFailed(f"dry run: {', '.join(failed)} would fail on Kaggle",
                           hint=f"read the executed notebooks and {report.report_path}")
    unrehearsed = [s.scenario for s in report.scenarios if not s.rehearsed]
    if unrehearsed:
        raise NotRehearsed(f"dry run: {', '.join(unrehearsed)} not rehearsed here",
                           hint=f"see the reasons above and {report.report_path}")


class _DryRunProgress:
    """Progress while a dry run goes: the current event and the time since the run started (rich, on stderr)."""

    def __init__(self, enabled: bool = True) -> None:
        from rich.console import Console
        from rich.status import Status

        self.enabled = enabled
        self.started = time.monotonic()
        self.status = Status("dry run: building", console=Console(stderr=True)) if enabled else None

    def __enter__(self) -> "_DryRunProgress":
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()

    def __call__(self, line: str) -> None:
        if self.status is not None:
            elapsed = time.monotonic() - self.started
            self.status.update(f"dry run [{elapsed:5.0f} s] {_escape(line)}")
            self.status.console.print(f"[dim]{elapsed:6.1f} s[/dim] {_escape(line)}", highlight=False)


def _show_dry_run(report) -> None:  # builder.dryrun.DryRunReport
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for name in ("scenario", "verdict", "time", "projected", "limit", "peak RAM", "peak GPU"):
        table.add_column(name)
    for s in report.scenarios:
        style = "green" if s.ok else "bold red"
        gpu = f"{s.peak_gpu_bytes / 2**30:.1f} GiB" if s.peak_gpu_bytes else "-"
        table.add_row(s.scenario, f"[{style}]{_escape(s.verdict.name)}[/{style}]", f"{s.wall_seconds:.1f} s",
                      f"{s.projected_seconds:.1f} s" + (f" ({s.hidden_rows} rows)" if s.hidden_rows else ""),
                      f"{s.time_limit_seconds / 3600:g} h", f"{s.peak_rss_bytes / 2**30:.2f} GiB", gpu)
    console.print(table)
    for s in report.scenarios:
        console.print(f"[bold]{s.scenario}[/bold]: {_escape(s.verdict.reason)}", highlight=False)
        if s.fast_commit:
            console.print(f"  [dim]fast commit: {_escape(s.fast_commit)}[/dim]", highlight=False)
        for line in (s.evaluation_api or {}).get("lines", []):  # evaluation-API kernels: the gateway's view
            console.print(f"  [dim]{_escape(line)}[/dim]", highlight=False)
        for step in s.steps:
            console.print(f"  [dim]step {step.get('name')}: {float(step.get('seconds') or 0):.1f} s, "
                          f"{int(step.get('peak_rss_bytes') or 0) / 2**20:.0f} MiB[/dim]", highlight=False)
        for warning in s.warnings:
            console.print(f"  [yellow]warning:[/yellow] {_escape(warning)}", highlight=False)
        if s.projection:
            console.print(f"  [dim]projection: {_escape(s.projection['summary'])}[/dim]", highlight=False)
        console.print(f"  [dim]sandbox: {_escape(s.isolation_note)}; memory: {_escape(s.memory_limit)}[/dim]", highlight=False)
        if not s.ok and s.verdict.detail:
            console.print(_escape(s.verdict.detail), style="dim", highlight=False)
    console.print(f"notebooks and report: {report.out_dir} (report.html)", highlight=False)


# `kkb local-kaggle serve|add-competition|add-user` (the sub-app imports the server lazily).
from builder.local_kaggle.cli import app as _local_kaggle_app  # noqa: E402

app.add_typer(_local_kaggle_app, name="local-kaggle")


@app.command()
def wheels(
    kernel_dir: Path = _KERNEL_ARG,
    on_kaggle: bool = typer.Option(False, "--on-kaggle", help="Build every wheel in Kaggle's image with a helper kernel "
                                   "(needs [install] on_kaggle = true)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Build folder (default: build/<name>)."),
    owner: Optional[str] = _OWNER_OPT,
    force: bool = typer.Option(False, "--force", help="Resolve and build again even if nothing changed."),
    no_check: bool = typer.Option(False, "--no-check", help="Skip the offline install check."),
    index_url: Optional[str] = typer.Option(None, "--index-url", help="Package index for the local build."),
    find_links: list[str] = typer.Option([], "--find-links", help="Extra wheel folder or URL for the local build."),
    no_wait: bool = typer.Option(False, "--no-wait", help="--on-kaggle: push the helper kernel and return."),
) -> None:
    """Build the offline wheelhouse of [install] requirements (cached by content)."""
    from builder.wheels import WheelsSettings, build_wheels

    index_args = (*(("--index-url", index_url) if index_url else ()), *(a for link in find_links for a in ("--find-links", link)))
    with _ProgressView() as view:
        result = build_wheels(WheelsSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner, on_kaggle=on_kaggle,
                                             force=force, check=not no_check, index_args=tuple(index_args),
                                             wait=not no_wait, progress=view))
    _show_wheels(result)


def _show_wheels(result) -> None:  # builder.wheels.WheelsResult
    if result.mode == "none":
        console.print(f"{result.kernel_name}: no [install] requirements: nothing to build", highlight=False)
    elif result.mode == "kernel":
        version = f" v{result.kernel_version}" if result.kernel_version else ""
        console.print(f"[green]{result.action}[/green] helper kernel {result.ref}{version} → {result.out_dir}", highlight=False)
        if result.kernel_url:
            console.print(f"  {result.kernel_url}", highlight=False)
    else:
        console.print(f"[green]{result.action}[/green] wheelhouse {result.ref} → {result.out_dir} "
                      f"({len(result.files)} files, {result.total_bytes:,} bytes)", highlight=False)
        console.print(f"  key {result.key[:19]}…  content {result.content_hash[:19]}…", highlight=False)
        if result.left_to_image:
            console.print(f"  left to the Kaggle image: {', '.join(result.left_to_image)}", highlight=False)
        for name in result.replaces_image:
            console.print(f"  [yellow]replaces the image's {name}[/yellow] (named in [install] requirements)", highlight=False)
        for name in result.built_from_sdist:
            console.print(f"  [yellow]built from sdist[/yellow] {name} (no wheel on the index)", highlight=False)
        for name in result.sdists:
            console.print(f"  [yellow]sdist[/yellow] {name}: no wheel for the target; it compiles in the kernel", highlight=False)
    if result.check is not None:
        how = "venv" if result.check.exact else "pip --target with the target's tags"
        console.print(f"  offline install check: [green]ok[/green] (python {result.check.python}, {how}, "
                      f"{len(result.check.installed)} packages, {result.check.seconds:.1f}s)", highlight=False)
    for note in result.notes:
        console.print(f"  {note}", highlight=False)


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
