"""What kkb prints: result views, progress, the error's look, readable --help (the CLI's only output code)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.status import Status
from rich.table import Table

from builder.bundle.cards.settings import ResolvedSetting
from builder.bundle.wheels import WheelsResult
from builder.errors import KkbError
from builder.project.init import InitResult
from builder.rehearse.card_inputs import lines as input_lines
from builder.rehearse.report import DryRunReport, ScenarioReport
from builder.remote.push import PushResult
from builder.remote.rehearsal import RehearsalResult
from builder.remote.session import ProgressEvent

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


# --debug (and -v): kkb's own traceback and the kernel's frames are shown; set by the root callback.
_state = {"verbose": False}


def _show_init(result: InitResult) -> None:
    console.print(f"[green]created[/green] {_escape(str(result.kernel_dir))}: "
                  + ", ".join(_escape(_shown_path(path, result.kernel_dir)) for path in result.written))
    if result.targets:
        columns = ", ".join(f"{c.name} ({c.dtype}{' -> float' if c.name in result.float_columns else ''})"
                            for c in result.targets)
        console.print(f"  submission: id column {_escape(str(result.id_column))}, targets {_escape(columns)}")
    if result.reads:
        console.print("  reads under /kaggle/input:")
        for read in result.reads:
            mapped = _escape(read.input) if read.input else "[yellow]NOT MAPPED[/yellow]"
            console.print(f"    {_escape(read.path)} → {mapped}", highlight=False)
    for line in result.unmapped:
        console.print(f"  [yellow]not mapped:[/yellow] {_escape(line)}", highlight=False)
    for note in result.notes:
        console.print(f"  [dim]note:[/dim] {_escape(note)}", highlight=False)
    for index, step in enumerate(result.next_steps):
        console.print(f"{'next:' if index == 0 else '     '} {_escape(step)}", highlight=False)


def _show_card_settings(settings: tuple[ResolvedSetting, ...]) -> None:
    """Per card, the settings the user did not write, one line each (the ones that are off in one line)."""
    for card in dict.fromkeys(setting.card for setting in settings):
        own = [setting for setting in settings if setting.card == card]
        console.print(f"  card     models.{card}: not set on the card, the kernel uses", markup=False, highlight=False)
        shown = [setting for setting in own if not setting.unset and not setting.unused]
        width = max((len(setting.key) for setting in shown), default=0)
        for setting in shown:
            console.print(f"             {setting.key:<{width}} = {setting.value}  ({setting.origin})", markup=False,
                          highlight=False)
        off = [setting.key for setting in own if setting.unset and not setting.unused]
        if off:
            console.print(f"             unset: {', '.join(off)}", markup=False, highlight=False)
        for why in dict.fromkeys(setting.unused for setting in own if setting.unused):
            keys = [setting.key for setting in own if setting.unused == why]
            console.print(f"             unused ({why}): {', '.join(keys)}", markup=False, highlight=False)


def _shown_path(path: Path, kernel_dir: Path) -> str:
    return path.name if path.parent == kernel_dir else str(path)


class _ProgressView:
    """Push/submit progress on stderr: a line per step, a spinner for any wait longer than a second."""

    def __init__(self) -> None:
        self._status: Status | None = None

    def __enter__(self) -> _ProgressView:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def __call__(self, event: ProgressEvent) -> None:
        text = _escape(event.message)
        if event.waiting:
            # A heartbeat between polls (they are up to 30 s apart): the line's clock counts on from the event.
            line = _Ticking(lambda since: waiting_line(dataclasses.replace(event, elapsed=event.elapsed + since)))
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


def waiting_line(event: ProgressEvent) -> str:
    """``kernel run …: running (12s / 1800s)``: how long it has waited, and for how long it may."""
    limit = f" / {event.limit:.0f}s" if event.limit else ""
    return f"{_escape(event.message)} [dim]({event.elapsed:.0f}s{limit})[/dim]"


def _show_push(result: PushResult) -> None:
    for dataset in (result.weights, result.code):
        if dataset is not None:
            version = f" v{dataset.version}" if dataset.version else ""
            console.print(f"  {dataset.ref}{version}  {dataset.action}  {dataset.content_hash[:19]}…", highlight=False)
    console.print(f"  uploaded {result.uploaded_bytes:,} bytes", highlight=False)
    console.print(f"[green]{result.kernel_action}[/green] {result.kernel_id} v{result.kernel_version}  {result.kernel_url}",
                  highlight=False)


class _DryRunProgress:
    """Progress while a dry run goes: the current event and the time since the run started (rich, on stderr)."""

    def __init__(self, enabled: bool = True) -> None:
        from rich.console import Console
        from rich.status import Status

        self.enabled = enabled
        self.started = time.monotonic()
        self.status = Status("dry run: building", console=Console(stderr=True)) if enabled else None

    def __enter__(self) -> _DryRunProgress:
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()

    def __call__(self, line: str) -> None:
        if self.status is not None:
            elapsed = time.monotonic() - self.started
            text = _escape(line)
            # The clock moves between events (a long step prints nothing): rich renders the line ~12 times a second.
            self.status.update(_Ticking(lambda _: f"dry run [{time.monotonic() - self.started:5.0f} s] {text}"))
            self.status.console.print(f"[dim]{elapsed:6.1f} s[/dim] {text}", highlight=False)


class _Ticking:
    """A status line computed at each render, so its clock ticks every second without an event."""

    def __init__(self, render: Callable[[float], str]) -> None:
        self.render = render
        self.since = time.monotonic()

    def __rich__(self) -> str:
        return self.render(time.monotonic() - self.since)


def _show_rehearsal(result: RehearsalResult) -> None:
    version = f" v{result.kernel_version}" if result.kernel_version else ""
    if result.action == "reused":
        console.print(f"[dim]nothing changed since the rehearsal of {_escape(result.when)} ({result.plan.rehearsal_id}"
                      f"{version}): its result; --again rehearses again[/dim]", highlight=False)
    else:
        console.print(f"rehearsed {result.plan.rehearsal_id}{version} ({result.status}); never submitted", highlight=False)


def _show_steps(s: ScenarioReport) -> None:
    for step in s.steps:
        console.print(f"  [dim]step {step.get('name')}: {float(step.get('seconds') or 0):.1f} s, "
                      f"{int(step.get('peak_rss_bytes') or 0) / 2**20:.0f} MiB[/dim]", highlight=False)
    for shared in s.shared_features:  # a feature function the table cards share: computed once
        console.print(f"  [dim]{_escape(shared['line'])}[/dim]", highlight=False)


def _show_heading(report: DryRunReport, heading: str | None) -> None:
    if heading:
        console.print(f"[bold]{_escape(heading)}[/bold]", highlight=False)
    if report.environment:  # --image-env: the kernel ran with the image's versions
        console.print(f"environment: {_escape(report.environment)}", highlight=False)
    for note in report.image:  # Kaggle's image: its description's age, a newer image a run recorded, Python here
        console.print(f"[yellow]image:[/yellow] {_escape(note)}", highlight=False)


def _show_dry_run(report: DryRunReport, heading: str | None = None, show_inputs: bool = False,
                  all_columns: bool = False) -> None:
    _show_heading(report, heading)
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
        _show_steps(s)
        for warning in s.warnings:
            console.print(f"  [yellow]warning:[/yellow] {_escape(warning)}", highlight=False)
        for line in filter(None, [s.stand_in, *(s.metric or {}).get("lines", [])]):  # what --rerun-scale replicated; the metric
            console.print(f"  {_escape(line)}", highlight=False)
        if s.projection:  # its basis (what was measured, per step) is in report.json and report.html
            console.print(f"  [dim]projection: {_escape(s.projection['summary'].split('; basis:')[0])}[/dim]", highlight=False)
        if not s.ok and s.verdict.detail:
            detail = s.verdict.detail if _state["verbose"] else without_kkb_frames(s.verdict.detail)
            console.print(_escape(detail), style="dim", highlight=False)
    if report.scenarios:  # one line: the isolation and the memory accounting (the details: report.json)
        last = report.scenarios[-1]
        console.print(f"[dim]sandbox: {_escape(last.isolation_note.split(';')[0])}; memory: "
                      f"{_escape(last.memory_limit.split(',')[0])}[/dim]", highlight=False)
        if last.variables_summary:  # every variable with its value and origin: report.json
            console.print(f"[dim]kernel environment: {_escape(last.variables_summary)}[/dim]", highlight=False)
    _show_reference(report.reference)
    _show_inputs(report.inputs if show_inputs else [], all_columns)
    console.print(f"notebooks and report: {report.out_dir} (report.html)", highlight=False)


def _show_inputs(inputs: list[dict[str, Any]], all_columns: bool = False) -> None:
    """``--show-inputs``: what each card feeds its model, for the first test rows (every value with ``--all-columns``)."""
    if inputs:
        console.print("[bold]inputs[/bold] (what each card feeds its model)", highlight=False)
    shown = (input_lines(entry, None) if all_columns else entry.get("lines", []) for entry in inputs)
    for line in (line for entry_lines in shown for line in entry_lines):
        console.print(f"  {_escape(line)}", highlight=False, soft_wrap=True)


def _show_reference(reference: dict[str, Any] | None) -> None:
    """``--reference``: equal or not, and the comparison table (worst columns first)."""
    if reference is None:
        return
    style = "green" if reference.get("ok") else "bold red"
    console.print(f"[bold]reference[/bold] ({reference.get('scenario')}): "
                  f"[{style}]{'equal' if reference.get('ok') else 'differs'}[/{style}]", highlight=False)
    for line in reference.get("lines", []):
        console.print(f"  {_escape(line)}", highlight=False, soft_wrap=True)


def _show_wheels(result: WheelsResult) -> None:
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
        console.print(f"  key {(result.key or '')[:19]}…  content {(result.content_hash or '')[:19]}…", highlight=False)
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


def _show_error(exc: KkbError) -> None:
    if _state["verbose"]:
        err_console.print_exception()
    err_console.print(f"[bold red]error:[/bold red] {_escape(exc.message)}", highlight=False)
    if exc.hint:
        err_console.print(f"[yellow]hint:[/yellow] {_escape(exc.hint)}", highlight=False)


def _escape(text: str) -> str:
    return escape(text)


JSON_SCHEMA_VERSION = 1  # bump when a field of any --json output changes meaning or goes away


def _print_json(command: str, payload: dict[str, Any]) -> None:
    """One JSON object on stdout: ``schema`` first (``kkb.push/1``), then the command's result."""
    print(json.dumps({"schema": f"kkb.{command}/{JSON_SCHEMA_VERSION}", **payload}, indent=1, default=str))


_KKB_FRAME = re.compile(r"^(File \S*/kkb_runtime/|Cell In\[\d+\]|-{20,}|Traceback \(most recent call last\))")


def without_kkb_frames(detail: str) -> str:
    """A failed run's detail without kkb's own frames (its runtime's and its cells'): the exception and the
    user's stderr stay. The frames are noise for a user; ``--debug`` shows them."""
    blocks = re.split(r"\n\s*\n", detail.strip("\n"))
    kept = [block for block in blocks if not _KKB_FRAME.match(block.lstrip("\n"))]
    return "\n\n".join(kept) if kept else detail


def _readable_help(typer_app: typer.Typer) -> None:
    """Whole first paragraphs as the command list's summaries (click cuts them at the terminal's width), and
    metavars that read as what to type (``KERNEL_DIR``, ``DIR``, ``TEXT``) instead of ``{kernel_dir}``/``<list[str]>``."""
    for info in typer_app.registered_commands:
        if info.callback is None:
            continue
        doc = inspect.getdoc(info.callback) or ""
        if info.short_help is None and doc:
            info.short_help = " ".join(doc.split("\n\n")[0].split())
        for parameter in inspect.signature(info.callback).parameters.values():
            default = parameter.default
            if isinstance(default, typer.models.ParameterInfo) and default.metavar is None:
                default.metavar = _metavar(parameter.name, str(parameter.annotation),
                                           isinstance(default, typer.models.ArgumentInfo))
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _readable_help(group.typer_instance)
            if isinstance(group.short_help, typer.models.DefaultPlaceholder) or group.short_help is None:
                summary = group.typer_instance.info.help
                if isinstance(summary, str):
                    group.short_help = " ".join(summary.split("\n\n")[0].split())


def _metavar(name: str, annotation: str, argument: bool) -> str | None:
    if argument:
        return name.upper()
    if annotation.startswith(("bool", "Literal")):
        return None  # flags take no value; a choice shows its choices
    if "Path" in annotation:
        return "DIR" if name in ("out", "data", "data_dir", "rerun_data", "source", "competition") else "PATH"
    if "int" in annotation:
        return "N"
    if "float" in annotation:
        return "SECONDS" if name.startswith(("wait", "timeout", "ready", "rerun_timeout")) else "NUMBER"
    if name == "memory":
        return "SIZE"
    return "NAME" if name in ("owner", "user", "competition", "accelerator") else "TEXT"
