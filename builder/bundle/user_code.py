"""The user's code at build time: each piece of it named while it runs, and its errors shown as the user's.

The build runs the user's code (feature and encode functions, factories, pickles, model files) only inside its
sandboxed run (:mod:`builder.bundle.card_run`). Each piece runs inside :func:`user_code`, which records the call
(:func:`builder.run.calls.calling`: what names a function that does not return, or a file that crashes its loader)
and turns an exception into kkb's error (a :class:`~builder.errors.BundleError`, or the class the caller names)
with the user's own frames (:func:`user_frames`: file, line and code, innermost last), the exception's type and its
message: the user's error, never kkb's "internal error". :func:`from_user_code` tells such an error apart.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from builder.errors import BundleError, KkbError
from builder.kkb_runtime.cards.common import checkpoints
from builder.kkb_runtime.cards.common.models import ModelLoadError
from builder.kkb_runtime.cards.common.tables import TableError
from builder.run.calls import calling

# kkb's own words about the user's data or model: the caller words them (they are no exception of the user's code).
WORDED = (KkbError, TableError, ModelLoadError)


_MARK = "kkb_user_code"  # set on an error made from an exception of the user's code


@contextmanager
def user_code(where: str, context: str, roots: Sequence[Path], *, card: str | None = None, function: str | None = None,
              file: str | None = None, hint: str, error: type[KkbError] = BundleError) -> Iterator[None]:
    """Run the body as the user's code: ``where`` (``.../kernel.toml: models.NAME``) and ``context`` (``on the public
    test``) start the message of an exception it raises, ``roots`` are the folders of the user's files."""
    with calling(context, card=card, function=function, file=file, hint=hint):
        try:
            yield
        except WORDED:
            raise
        except Exception as exc:
            frames = user_frames(exc, roots)
            raised = error(f"{where}: {context}: {type(exc).__name__}: {checkpoints.plain(str(exc))}"
                           + (f"\nin your code (most recent call last):\n{frames}" if frames else ""), hint=hint)
            setattr(raised, _MARK, True)
            raise raised from None


def from_user_code(error: BaseException) -> bool:
    """Whether ``error`` was made by :func:`user_code` from an exception of the user's code."""
    return bool(getattr(error, _MARK, False))


def user_frames(error: BaseException, roots: Sequence[Path]) -> str:
    """The traceback's frames in files under ``roots`` (the user's code), innermost last, as Python prints them
    (``File "features.py", line 12, in make_features`` and the line); "" when none is the user's."""
    folders = [Path(root).absolute() for root in roots]
    lines = []
    for frame in traceback.extract_tb(error.__traceback__):
        path = Path(frame.filename).absolute()
        base = next((folder for folder in folders if path.is_relative_to(folder)), None)
        if base is None:
            continue
        lines.append(f'  File "{path.relative_to(base)}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    return "\n".join(lines)


__all__ = ["from_user_code", "user_code", "user_frames"]
