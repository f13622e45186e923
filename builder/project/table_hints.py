"""Table headers people write for a kkb table under another name, answered with the table kkb knows.

``[models.defaults]`` is the natural spelling of the defaults every ``[[models]]`` card inherits, but in
TOML it makes ``models`` a table where ``[[models]]`` made it an array ("Cannot overwrite a value (at
line 23)"), or, without cards, a ``models`` table kkb rejects. :func:`misnamed_table` finds such a
header before TOML is parsed, so the message names the line and the table to write instead.
"""

from __future__ import annotations

import re

from builder.errors import SpecError

# A header as written (whitespace and quotes removed) -> the table kkb reads, and what it holds.
MISNAMED = {
    "models.defaults": ("model_defaults", "the keys every [[models]] card inherits (a card's own keys win)"),
    "model.defaults": ("model_defaults", "the keys every [[models]] card inherits (a card's own keys win)"),
    "models_defaults": ("model_defaults", "the keys every [[models]] card inherits (a card's own keys win)"),
    "model": ("[models]", "one model card per [[models]] table (double brackets)"),
    "models": ("[models]", "one model card per [[models]] table (double brackets)"),
    "step": ("[steps]", "one step per [[steps]] table (double brackets)"),
    "steps": ("[steps]", "one step per [[steps]] table (double brackets)"),
    "postprocess": ("[postprocess]", "one stage per [[postprocess]] table (double brackets)"),
    "inputs": ("[inputs]", "one input per [[inputs]] table (double brackets)"),
}
_HEADER = re.compile(r"^\s*\[(?!\[)\s*([^\]]+?)\s*\]\s*(?:#.*)?$")


def misnamed_table(text: str, source: str) -> None:
    """Raise a SpecError naming the line of the first misnamed table header in ``text`` (kernel.toml's)."""
    for number, line in enumerate(text.splitlines(), start=1):
        match = _HEADER.match(line)
        if match is None:
            continue
        name = re.sub(r"[\s\"']", "", match.group(1))
        if name in MISNAMED:
            table, holds = MISNAMED[name]
            raise SpecError(f"{source}: line {number}: [{match.group(1)}] is not a kkb table",
                            hint=f"write [{table}]: {holds}")
