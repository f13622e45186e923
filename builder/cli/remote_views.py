"""What ``kkb status``, ``kkb history`` and ``kkb stop`` print (the CLI's output code for Kaggle's side)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.table import Table

from builder.cli.views import _escape, _print_json, console
from builder.remote.history import HistoryRow
from builder.remote.limits import Limits, duration, hours, now_utc
from builder.remote.queries import StatusResult, StopResult


def show_status(result: StatusResult, as_json: bool) -> None:
    if as_json:
        payload: dict[str, Any] = dataclasses.asdict(result)
        payload["limits"] = result.limits.to_json() if result.limits is not None else None
        _print_json("status", payload)
        return
    console.print(f"{result.kernel_id} v{result.kernel_version}: run {result.run_status or 'unknown'}", highlight=False)
    if result.failure_message:
        console.print(f"  [red]{_escape(result.failure_message)}[/red]", highlight=False)
    if result.last_push:
        console.print(f"  last push {result.last_push.get('time')}", highlight=False)
    if result.submission is not None:
        sub = result.submission
        detail = sub.public_score or sub.error_description
        console.print(f"  submission #{sub.ref}: {sub.status} {_escape(detail)}", highlight=False)
    if result.limits is not None:
        for line in limit_lines(result.limits):
            console.print(f"  {_escape(line)}", highlight=False)


def limit_lines(limits: Limits) -> list[str]:
    """The platform around the kernel, one line each: submissions, quota, sessions, and what Kaggle did not say."""
    lines = []
    now = now_utc()
    left = limits.submissions
    if left is not None and left.no_team:
        lines.append(f"submissions: Kaggle counts none for you in {limits.competition} yet (not on a team of it)")
    elif left is not None:
        when = "no more: the competition's lifetime cap" if left.limited_by_total else f"resets {left.reset_words(now)}"
        lines.append(f"submissions: {left.left_today} left today ({left.used_today} made today); {when}")
    for name, line in (("GPU", limits.gpu), ("TPU", limits.tpu)):
        if line is not None:
            refresh = f"; refreshes {limits.quota_refresh:%a %d %b %H:%M} UTC" if limits.quota_refresh else ""
            lines.append(f"{name} quota: {hours(line.left_s)} left of {hours(line.total_s)} this week{refresh}")
    gpu = [session for session in limits.sessions if session.accelerator == "GPU"]
    running = "; ".join(session.label for session in limits.sessions) or "none"
    lines.append(f"sessions: {len(gpu)} of {limits.session_cap} GPU sessions running ({running})")
    lines += [f"note: {note}" for note in limits.notes]
    return lines


def show_history(rows: list[HistoryRow], kernel_dir: str, as_json: bool) -> None:
    if as_json:
        _print_json("history", {"rows": [dataclasses.asdict(row) for row in rows]})
        return
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
        table.add_row(row.when.replace("T", " ")[:16], row.kind, f"v{row.kernel_version}", *_columns(row),
                      *([row.server] if mixed else []))
    console.print(table)


def _columns(row: HistoryRow) -> tuple[str, str, str, str]:
    """code, weights, ref, result."""
    if row.kind == "run":  # a run: how it ended, its session, what it billed
        billed = f", billed {duration(row.billed_seconds)}" if row.billed_seconds is not None else ""
        return "", "", "", f"{row.status} ({row.session}{billed})"
    code = f"v{row.code_version or '?'} {row.code_hash[7:15]}"
    weights = f"v{row.weights_version or '?'} {row.weights_hash[7:15]}" if row.weights_hash else "-"
    return code, weights, f"#{row.submission_ref}" if row.submission_ref else "", f"{row.status} {row.score}".strip()


def show_stop(result: StopResult, as_json: bool) -> None:
    if as_json:
        _print_json("stop", dataclasses.asdict(result))
        return
    if not result.stopped:
        console.print(f"nothing of {result.kernel_id} runs on Kaggle: nothing stopped", highlight=False)
        return
    versions = ", ".join(f"v{run.version}" for run in result.stopped)
    console.print(f"[green]stopped[/green] {result.kernel_id} {versions}: the kernel was deleted on Kaggle (its API "
                  "stops a run no other way); the next push creates it again", highlight=False)
