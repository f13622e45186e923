"""How kkb calls a user's function (an encode, feature or post-processing function): kkb's own positional arguments,
the card's (or stage's) arguments as keyword arguments, and the kernel's context to a parameter named ``ctx``.

``encode_args = {max_len = 256}`` on a text card calls ``encode(table, tokenizer, max_len=256)``; a second card
naming the same function with ``encode_args = {max_len = 512}`` calls it with 512: no ``functools.partial`` in the
user's code. A parameter named :data:`CONTEXT_PARAMETER` gets a :class:`~.context.Context` (the competition, weights
and code folders, the card's name and settings, the steps' outputs), so no user line rebuilds a path.

The arguments are checked against the function's signature before it runs (:func:`argument_problems`): an argument
the function lacks, or one it needs that nobody gives, is named. The build runs the same check on the function's
source (``builder.bundle.function_args``), so a port learns it at ``kkb build``, not in the kernel. Standard library only.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONTEXT_PARAMETER = "ctx"

POSITIONAL = "positional"  # positional-only or positional-or-keyword
KEYWORD = "keyword"  # keyword-only
VAR_POSITIONAL = "*args"
VAR_KEYWORD = "**kwargs"


@dataclass(frozen=True)
class Parameter:
    """One parameter of a user's function, as ``inspect`` (in the kernel) or ``ast`` (at build) reads it."""

    name: str
    kind: str  # POSITIONAL, KEYWORD, VAR_POSITIONAL or VAR_KEYWORD
    has_default: bool


def parameters_of(function: Callable[..., Any]) -> list[Parameter]:
    """The parameters of a callable, as :func:`argument_problems` reads them."""
    kinds = {inspect.Parameter.POSITIONAL_ONLY: POSITIONAL, inspect.Parameter.POSITIONAL_OR_KEYWORD: POSITIONAL,
             inspect.Parameter.KEYWORD_ONLY: KEYWORD, inspect.Parameter.VAR_POSITIONAL: VAR_POSITIONAL,
             inspect.Parameter.VAR_KEYWORD: VAR_KEYWORD}
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return [Parameter("args", VAR_POSITIONAL, False), Parameter("kwargs", VAR_KEYWORD, False)]
    return [Parameter(name, kinds[parameter.kind], parameter.default is not inspect.Parameter.empty)
            for name, parameter in signature.parameters.items()]


def argument_problems(parameters: Sequence[Parameter], passed: Sequence[str], args: Mapping[str, object],
                      key: str) -> list[str]:
    """What keeps ``function(*passed, **args[, ctx=...])`` from being the call the user meant, in words (none: fine).

    ``passed`` names kkb's own positional arguments (``table``, ``tokenizer``); ``key`` is the spec's key of the
    arguments (``encode_args``), named in the fix."""
    positional = [parameter for parameter in parameters if parameter.kind == POSITIONAL]
    takes_any = any(parameter.kind == VAR_POSITIONAL for parameter in parameters)
    problems = []
    if len(positional) < len(passed) and not takes_any:
        problems.append(f"it takes {len(positional)} positional argument(s), kkb passes {len(passed)} "
                        f"({', '.join(passed)})")
    rest = [parameter for parameter in parameters[len(passed):] if parameter.kind in (POSITIONAL, KEYWORD)]
    names = {parameter.name for parameter in rest}
    needed = [parameter.name for parameter in rest
              if not parameter.has_default and parameter.name != CONTEXT_PARAMETER and parameter.name not in args]
    if needed:
        problems.append(f"it needs {', '.join(map(repr, needed))}: add {'it' if len(needed) == 1 else 'them'} to {key}")
    if CONTEXT_PARAMETER in args:
        problems.append(f"{key} names '{CONTEXT_PARAMETER}', the parameter kkb fills with the kernel's context: "
                        "rename the argument")
    unknown = [name for name in args if name not in names and name != CONTEXT_PARAMETER]
    if unknown and not any(parameter.kind == VAR_KEYWORD for parameter in parameters):
        shown = ", ".join(sorted(names)) or "none"
        problems.append(f"it takes no argument {', '.join(map(repr, unknown))} (its arguments after "
                        f"{', '.join(passed)}: {shown})")
    return problems


def takes_context(parameters: Sequence[Parameter]) -> bool:
    return any(parameter.name == CONTEXT_PARAMETER and parameter.kind in (POSITIONAL, KEYWORD) for parameter in parameters)


class ArgumentsRefused(TypeError):
    """The card's (or stage's) arguments do not fit the function's signature: :func:`argument_problems`."""


def call_with(function: Callable[..., Any], reference: str, passed: Mapping[str, object], args: Mapping[str, object],
              key: str, context: object | None) -> Any:
    """``function(*passed.values(), **args)``, and ``ctx=context`` where it takes ``ctx``; refused (naming the
    arguments) when they do not fit its signature."""
    parameters = parameters_of(function)
    problems = argument_problems(parameters, list(passed), args, key)
    if problems:
        raise ArgumentsRefused(f"{reference}: {'; '.join(problems)}")
    keywords = dict(args)
    if context is not None and takes_context(parameters):
        keywords[CONTEXT_PARAMETER] = context
    return function(*passed.values(), **keywords)


__all__ = ["CONTEXT_PARAMETER", "ArgumentsRefused", "Parameter", "argument_problems", "call_with", "parameters_of",
           "takes_context"]
