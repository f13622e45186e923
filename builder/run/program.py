"""One of kkb's own programs run in a sandbox of its own over a few read-only folders: how kkb calls user code it must
run outside a kernel (the competition's metric file, a card's view for ``--show-inputs``) without running it here.

The program is ``python -m MODULE REQUEST ANSWER`` in a new sandbox (:func:`builder.run.sandbox.prepare_sandbox`: no
network, nothing of this machine but what a Kaggle image has, the kernel's environment: no credential), its folders
mounted read-only where ``request`` says (``where(target)`` gives the path the program sees), bounded per call of user
code (:mod:`builder.run.calls`: the one past its bound is named) and in all. Its answer is one JSON object it writes to
ANSWER (:func:`write_answer`), read back without following a link and within a size. What it prints stays in its own
files: nothing reaches kkb's output.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.kkb_runtime.vocabulary import Layout
from builder.run.process import ProgramRun, inside, run_in
from builder.run.sandbox import Mount, SandboxSpec, prepare_sandbox, remove_sandbox
from builder.run.sandbox_files import read_regular

ANSWER_LIMIT = 16 << 20  # an answer larger than this is no answer


@dataclass(frozen=True)
class ProgramCall:
    """A program of kkb's (``module``), what it reads (``mounts``), its variables and its bounds."""

    module: str
    mounts: tuple[Mount, ...]
    call_seconds: float
    run_seconds: float
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProgramAnswer:
    """How the program ended, and the JSON object it answered (None: none, or not one)."""

    run: ProgramRun
    answer: dict[str, Any] | None


Request = Callable[[Callable[[str], Path]], dict[str, Any]]


def call_program(call: ProgramCall, request: Request) -> ProgramAnswer:
    """Run ``call`` with the request ``request(where)`` makes (``where``: a mount's target -> the program's path);
    its sandbox is removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix="kkb-program-"))
    try:
        box = prepare_sandbox(SandboxSpec(mounts=call.mounts, rerun=False), work / "kaggle")
        asked, answered = box.private_dir / "request.json", box.private_dir / "answer.json"
        asked.write_text(json.dumps(request(lambda target: inside(box, target, Layout.CURRENT))), encoding="utf-8")
        run = run_in(box, ["-m", call.module, str(asked), str(answered)], env=call.env, call_seconds=call.call_seconds,
                     run_seconds=call.run_seconds)
        return ProgramAnswer(run, _answer(answered))
    finally:
        remove_sandbox(work)


def _answer(path: Path) -> dict[str, Any] | None:
    data = read_regular(path, ANSWER_LIMIT)
    if data is None:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def write_answer(path: Path, answer: Mapping[str, Any]) -> None:
    """The program's side: its answer, whole or not at all (a crash leaves no half answer)."""
    partial = Path(path).with_name(Path(path).name + ".partial")
    partial.write_text(json.dumps(answer, default=str), encoding="utf-8")
    partial.replace(path)


def read_request(path: Path) -> dict[str, Any]:
    """The program's side: its request."""
    value = json.loads(Path(path).read_text(encoding="utf-8"))
    return value if isinstance(value, dict) else {}


__all__ = ["ProgramAnswer", "ProgramCall", "call_program", "read_request", "write_answer"]
