"""``kkb local-kaggle ...``: the typer sub-app that ``builder/cli.py`` mounts (CLI layer: it prints).

Errors are :class:`~builder.errors.KkbError` and reach ``builder.cli.main``'s error boundary.
"""

from __future__ import annotations

import json
import secrets
import threading
from pathlib import Path

import typer
from rich.console import Console

from builder.errors import LocalKaggleError
from builder.local_kaggle.admin import AdminClient
from builder.local_kaggle.server import LocalKaggle
from builder.local_kaggle.settings import ServerSettings

DEFAULT_DATA_DIR = Path(".local-kaggle")

app = typer.Typer(
    name="local-kaggle",
    help="A local Kaggle: a loopback server that speaks Kaggle's API to the real kaggle client.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console(soft_wrap=True)  # URLs and credentials must stay on one line

_DATA_DIR = typer.Option(DEFAULT_DATA_DIR, "--data-dir", "-d", help="Where the server keeps its state.")


@app.command()
def serve(
    port: int = typer.Option(8765, "--port", "-p", help="Port on 127.0.0.1 (0 picks a free one)."),
    data_dir: Path = _DATA_DIR,
    user: list[str] = typer.Option([], "--user", "-u", help="Register NAME:KEY before serving (repeatable)."),
    competition: list[Path] = typer.Option([], "--competition", "-c", help="Register a competition folder first (repeatable)."),
    ready_seconds: float = typer.Option(1.0, "--ready-seconds", help="How long a new dataset version is not ready."),
    rerun_timeout: float | None = typer.Option(None, "--rerun-timeout", help="Cap every scoring rerun (seconds)."),
    max_body_bytes: int = typer.Option(ServerSettings.max_body_bytes, "--max-body-bytes", min=1,
                                       help="Largest RPC/admin request body; larger ones get 413."),
    max_upload_bytes: int = typer.Option(ServerSettings.max_upload_bytes, "--max-upload-bytes", min=1,
                                         help="Largest file a blob upload may announce; larger ones get 413."),
    honour_pins: bool = typer.Option(False, "--honour-pins", help="Mount the version a source pins (owner/slug/N); "
                                     "by default a pin is dropped for the latest version, as Kaggle was seen to do."),
    max_page_size: int | None = typer.Option(None, "--max-page-size", min=1, help="The most items one answer of a list "
                                             "call holds, whatever the request asks (a small one: every list spans pages)."),
) -> None:
    """Serve until interrupted (Ctrl-C). Point kkb at it with KKB_KAGGLE_API=<the printed URL>."""
    settings = ServerSettings(dataset_ready_seconds=ready_seconds, rerun_timeout_seconds=rerun_timeout,
                              max_body_bytes=max_body_bytes, max_upload_bytes=max_upload_bytes, honour_pins=honour_pins,
                              max_page_size=max_page_size)
    server = LocalKaggle(data_dir, port=port, settings=settings)
    for entry in user:
        name, sep, key = entry.partition(":")
        if not sep:
            raise typer.BadParameter(f"--user takes NAME:KEY, got {entry!r}")
        server.add_user(name, key)
    for folder in competition:
        server.add_competition(folder)
    server.start()
    console.print(f"[green]local Kaggle[/green] listening on {server.base_url}  (data: {data_dir.resolve()})")
    console.print(f"  export KKB_KAGGLE_API={server.base_url}", highlight=False)
    console.print(f"  admin token (for /_admin, kkb local-kaggle faults): {server.store.root / 'admin-token'}",
                  highlight=False)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        console.print("stopping")
    finally:
        server.stop()


@app.command("add-competition")
def add_competition(
    folder: Path = typer.Argument(..., help="A competition folder: competition.toml, public/, hidden/, answers.csv."),
    data_dir: Path = _DATA_DIR,
) -> None:
    """Register (or refresh) a competition; a running server on the same data dir sees it at once."""
    config = LocalKaggle(data_dir).add_competition(folder)
    console.print(f"[green]registered[/green] competition {config.slug} ({config.title}, metric {config.metric}, "
                  f"{config.daily_submission_limit} submissions a day)")


@app.command("add-user")
def add_user(
    name: str = typer.Argument(..., help="The Kaggle username to create (or whose limits to change)."),
    key: str | None = typer.Option(None, "--key", help="Its API key (default: a new random one)."),
    data_dir: Path = _DATA_DIR,
    gpu_quota_hours: float | None = typer.Option(None, "--gpu-quota-hours", min=0, help="GPU hours a week (default 30)."),
    gpu_used_hours: float | None = typer.Option(None, "--gpu-used-hours", min=0,
                                                help="GPU hours already used this week (default 0)."),
    gpu_sessions: int | None = typer.Option(None, "--gpu-sessions", min=0, help="GPU batch sessions at once (default 2)."),
    cap_answer: str | None = typer.Option(None, "--cap-answer", help="How a GPU push over the cap is refused: "
                                          "'session count' (default), 'too many assignments' or '412'."),
) -> None:
    """Create a user of the local Kaggle (its limits: the GPU quota and session cap) and print its credentials."""
    key = key or secrets.token_hex(16)
    account = {name: value for name, value in (("gpu_quota_hours", gpu_quota_hours), ("gpu_used_hours", gpu_used_hours),
                                               ("gpu_sessions", gpu_sessions), ("cap_answer", cap_answer))
               if value is not None}
    token = LocalKaggle(data_dir).add_user(name, key, account=account)
    console.print(f"KAGGLE_USERNAME={name}\nKAGGLE_KEY={key}\n# or: KAGGLE_API_TOKEN={token}", highlight=False)


@app.command()
def faults(
    url: str = typer.Option(..., "--url", help="The running server's URL (serve prints it)."),
    data_dir: Path = _DATA_DIR,
    set_file: Path | None = typer.Option(None, "--set", help="Replace the faults with this JSON document."),
    clear: bool = typer.Option(False, "--clear", help="Remove every injected fault."),
) -> None:
    """Show, replace or clear a running server's injected faults (the admin token is read from --data-dir)."""
    client = AdminClient(url, data_dir)
    if set_file is not None:
        try:
            document = json.loads(set_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise LocalKaggleError(f"cannot read the faults document {set_file}: {exc}",
                                   hint="give a JSON object with rpc, datasetNotReady, uploadBreak, kernelFail, "
                                        "staleMount lists") from None
        result = client.set_faults(document)
    elif clear:
        result = client.clear_faults()
    else:
        result = client.faults()
    console.print_json(json.dumps(result))


@app.command()
def clock(
    url: str = typer.Option(..., "--url", help="The running server's URL (serve prints it)."),
    data_dir: Path = _DATA_DIR,
    set_to: str | None = typer.Option(None, "--set", help="Make it this UTC time (ISO 8601, e.g. 2026-12-01T23:59:00Z)."),
    advance: float | None = typer.Option(None, "--advance", help="Move it forward this many seconds."),
) -> None:
    """Show or move the clock of a running server's limits (daily submissions, GPU quota, billing)."""
    console.print_json(json.dumps(AdminClient(url, data_dir).clock(now=set_to, advance=advance)))
