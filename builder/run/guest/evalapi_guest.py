"""The scoring rerun of an evaluation-API kernel, run inside the dry run's sandbox (never imports ``builder``).

    python evalapi_guest.py supervise --notebook N.py --working DIR --gateway-dir DIR --competition DIR
                                      --gateway-module M --paths JSON --record FILE [--grace S]
    python evalapi_guest.py gateway   --competition DIR --gateway-module M --paths JSON --record FILE

``supervise`` does what Kaggle does with two containers: it starts the notebook with
``KAGGLE_IS_COMPETITION_RERUN`` set (it should block in ``serve()``), starts the competition's gateway
in a separate process at the same moment, waits for the gateway, then ends the notebook. Both run in
the same sandbox (namespace), so the gateway reaches the server on loopback where Kaggle uses the
host name ``inference_server``. ``gateway`` is that second process: the competition's own gateway
class, with its calls timed. Every fact goes into small JSON records the host reads afterwards.
Standard library only in this file; the gateway process imports what the competition's package needs.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# The notebook's code runs as __main__ with the working dir first on sys.path, as in a Jupyter kernel.
RUN_NOTEBOOK = "import sys; p = sys.argv[1]; sys.argv = sys.argv[1:]; exec(compile(open(p).read(), p, 'exec'))"
POLL_SECONDS = 0.05
# The gateway's errors that end a run at a limit, and the limit's name in the gateway's record.
LIMITS = {"GRPC_DEADLINE_EXCEEDED": "response_timeout_seconds", "SERVER_NEVER_STARTED": "startup_limit_seconds"}
MAX_RUN_ON_SECONDS = 300.0


def _write(path: Path, data: dict[str, Any]) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=1))
    os.replace(partial, path)


# --- the supervisor -----------------------------------------------------------------------------

def supervise(args: argparse.Namespace) -> int:
    record_path = Path(args.record)
    logs = record_path.parent
    record: dict[str, Any] = {"launched": time.time()}
    with open(logs / "notebook.stdout", "wb") as out, open(logs / "notebook.stderr", "wb") as err:
        notebook = subprocess.Popen([sys.executable, "-u", "-c", RUN_NOTEBOOK, args.notebook], cwd=args.working,
                                    stdout=out, stderr=err)
    with open(logs / "gateway.log", "wb") as log:
        gateway = subprocess.Popen(_gateway_argv(args), cwd=args.gateway_dir, env=_gateway_env(args.competition),
                                   stdout=log, stderr=subprocess.STDOUT)
    record["pids"] = {"notebook": notebook.pid, "gateway": gateway.pid}
    _write(record_path, record)
    _wait_for_gateway(notebook, gateway, record, args.grace)
    record["gateway_exit"] = gateway.returncode
    record["gateway_finished"] = time.time()
    record["ran_on_seconds"] = _run_on_past_a_limit(args, notebook)
    if notebook.poll() is None:
        record["notebook_stopped"] = time.time()  # blocked in serve(), as it should be: Kaggle ends the container
        _stop(notebook)
    record.setdefault("notebook_exit", notebook.returncode if not record.get("notebook_stopped") else None)
    _write(record_path, record)
    return 0


def _run_on_past_a_limit(args: argparse.Namespace, notebook: subprocess.Popen) -> float | None:
    """The gateway gave up on a limit (a response deadline, the startup limit): let the notebook run on until the call
    (or its way to serve()) ends, or its own time (its wait for a CPU left out, as kkb's runtime records it) passes the
    limit, for at most the limit again (:data:`MAX_RUN_ON_SECONDS`). Kaggle's gateway ends it at once; the dry run
    then tells the kernel's own time from the machine's load (``builder.run.deadlines``)."""
    key = LIMITS.get(str(_read(Path(args.gateway_dir) / "result.json").get("ErrorName")))
    limit = _read(Path(args.record).parent / "gateway.json").get(key) if key else None
    if not limit:
        return None
    started, state = time.time(), Path(args.working) / "kkb_evaluation.json"
    while notebook.poll() is None and time.time() - started < min(float(limit), MAX_RUN_ON_SECONDS) + args.grace:
        record = _read(state)
        stats = record.get("predict") or {}
        if key == "startup_limit_seconds" and record.get("mode") == "serve":
            break
        since = stats.get("in_flight_since")
        if key == "response_timeout_seconds" and (since is None or
                                                  time.time() - since - (stats.get("in_flight_waited_seconds") or 0) > limit):
            break
        time.sleep(POLL_SECONDS)
    return round(time.time() - started, 3)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _gateway_argv(args: argparse.Namespace) -> list[str]:
    return [sys.executable, "-u", str(Path(__file__).resolve()), "gateway", "--competition", args.competition,
            "--gateway-module", args.gateway_module, "--paths", args.paths, "--record", str(Path(args.record).parent / "gateway.json")]


def _gateway_env(competition: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(part for part in (competition, env.get("PYTHONPATH")) if part)
    return env


def _wait_for_gateway(notebook: subprocess.Popen, gateway: subprocess.Popen, record: dict[str, Any], grace: float) -> None:
    """Until the gateway ends. A notebook that exits first takes its server with it: on Kaggle the
    gateway then fails at once (the container's name stops resolving), so stop it after ``grace``."""
    stop_at = None
    while gateway.poll() is None:
        if stop_at is None and notebook.poll() is not None:
            record["notebook_exit"], record["notebook_exited"] = notebook.returncode, time.time()
            stop_at = time.time() + grace
        if stop_at is not None and time.time() > stop_at:
            record["gateway_stopped"] = True
            _stop(gateway)
            break
        time.sleep(POLL_SECONDS)


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=3)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# --- the gateway --------------------------------------------------------------------------------

def run_gateway(args: argparse.Namespace) -> int:
    record_path = Path(args.record)
    record: dict[str, Any] = {"started": time.time(), "calls": 0}
    sys.path.insert(0, args.competition)
    module = importlib.import_module(args.gateway_module)
    from kaggle_evaluation.core import relay, templates  # the competition's own package

    gateway = _gateway_class(module, templates.Gateway)(*([tuple(json.loads(args.paths))] if json.loads(args.paths) else []))
    # Kaggle's gateway reaches the server as the host "inference_server" in another container; here both
    # run in one sandbox, so the same client on loopback, keeping the competition's deadline.
    deadline = gateway.client.endpoint_deadline_seconds
    gateway.client = relay.Client("localhost")
    gateway.client.endpoint_deadline_seconds = deadline
    record.update(startup_limit_seconds=relay.STARTUP_LIMIT_SECONDS,
                  response_timeout_seconds=getattr(gateway, "timeout_seconds", None) or deadline,
                  gateway_class=f"{type(gateway).__module__}.{type(gateway).__name__}")
    _write(record_path, record)
    _time_calls(gateway, record, record_path)
    gateway.run()
    record["finished"] = time.time()
    _write(record_path, record)
    return 0


def _gateway_class(module: Any, base: type) -> type:
    found = [cls for _, cls in inspect.getmembers(module, inspect.isclass)
             if issubclass(cls, base) and cls is not base and cls.__module__ == module.__name__]
    if len(found) != 1:
        raise SystemExit(f"kkb: expected one Gateway subclass in {module.__name__}, found {[c.__name__ for c in found]}")
    return found[0]


def _time_calls(gateway: Any, record: dict[str, Any], record_path: Path) -> None:
    """The gateway's view of each answered predict call (the first one includes waiting for the server)."""
    original = gateway.predict

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.time()
        answer = original(*args, **kwargs)  # a failed call raises the gateway's error: not an answered call
        if record["calls"] == 0:
            record["first_answer"] = time.time()
        else:
            record["slowest_seconds"] = max(record.get("slowest_seconds") or 0.0, time.time() - started)
            record["later_seconds"] = (record.get("later_seconds") or 0.0) + time.time() - started  # predict + relay
        record["calls"] += 1
        _write(record_path, record)
        return answer

    gateway.predict = timed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="evalapi_guest")
    parser.add_argument("mode", choices=("supervise", "gateway"))
    for name in ("--competition", "--gateway-module", "--paths", "--record"):
        parser.add_argument(name, required=True)
    for name in ("--notebook", "--working", "--gateway-dir"):
        parser.add_argument(name)
    parser.add_argument("--grace", type=float, default=2.0)
    args = parser.parse_args(argv)
    return supervise(args) if args.mode == "supervise" else run_gateway(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
