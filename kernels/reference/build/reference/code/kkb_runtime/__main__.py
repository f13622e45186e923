"""``python -m kkb_runtime COMMAND``: what a step runs in its own process.

    python -m kkb_runtime predict --model NAME [--out FILE]   # FILE defaults to $KKB_STEP_OUT
    python -m kkb_runtime device                              # the device this machine would use

A known failure prints one ``kkb_runtime: error: ...`` line (the notebook shows the step's stderr
tail) and exits 1; anything else keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .cards.common.checkpoints import FoldsMalformed
from .cards.common.device import DeviceError, choose_device, summary
from .cards.common.models import ModelLoadError
from .cards.common.tables import PredictError, TableError
from .cards.image.transforms import TransformsError
from .cards.image.tta import TtaError
from .inputs import InputNotFound
from .predict import predict
from .typed import ConfigMalformed

KNOWN_ERRORS = (PredictError, ModelLoadError, TransformsError, TtaError, DeviceError, InputNotFound, TableError,
                FoldsMalformed, ConfigMalformed)


def _predict(args: argparse.Namespace) -> int:
    predict(args.model, Path(args.out) if args.out else None)
    return 0


def _device(args: argparse.Namespace) -> int:
    choice = choose_device()
    print(json.dumps({**choice.describe(), "summary": summary(choice)}))
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m kkb_runtime", description="kkb's kernel-side runtime")
    commands = root.add_subparsers(dest="command", required=True)
    run = commands.add_parser("predict", help="run one [[models]] card over the test images or table")
    run.add_argument("--model", required=True, help="the card's name in kkb_kernel.json")
    run.add_argument("--out", help="CSV to write (default: $KKB_STEP_OUT)")
    run.set_defaults(handler=_predict)
    commands.add_parser("device", help="print the device choice as JSON").set_defaults(handler=_device)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except KNOWN_ERRORS as exc:
        print(f"kkb_runtime: error: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
