"""Build-time check of the arguments kernel.toml gives the user's functions: ``encode_args``, ``feature_args`` and a
``[[postprocess]]`` function stage's ``args`` against the function's signature, read from its source (``ast``: the
build runs no user code for it).

The kernel runs the same check on the imported function (``builder.kkb_runtime.user_calls.argument_problems``), so a
function defined some other way than a ``def`` in its module (assigned, imported, a ``functools.partial``) is checked
there, and where the build runs it on the public test.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

from builder.bundle.submission_checks import module_source
from builder.errors import BundleError
from builder.kkb_runtime.postprocess import passed_names
from builder.kkb_runtime.user_calls import KEYWORD, POSITIONAL, VAR_KEYWORD, VAR_POSITIONAL, Parameter, argument_problems
from builder.project.cards import TabularCard, TextCard, TorchCard
from builder.project.spec import SPEC_FILE, KernelSpec

ENCODE_PASSED = ("table", "tokenizer")
FEATURE_PASSED = ("table",)


def function_parameters(reference: str, code_files: Mapping[str, Path]) -> list[Parameter] | None:
    """The parameters of ``module:function`` as its ``def`` in the code dataset declares them; None where the source
    does not say (no such module or ``def``: the module check and the kernel say it)."""
    module, _, name = reference.partition(":")
    source = module_source(module, code_files)
    if source is None:
        return None
    try:
        tree = ast.parse(source.read_bytes(), filename=str(source))
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return _parameters(node.args)
    return None


def _parameters(arguments: ast.arguments) -> list[Parameter]:
    positional = [*arguments.posonlyargs, *arguments.args]
    first_default = len(positional) - len(arguments.defaults)
    found = [Parameter(arg.arg, POSITIONAL, index >= first_default) for index, arg in enumerate(positional)]
    if arguments.vararg is not None:
        found.append(Parameter(arguments.vararg.arg, VAR_POSITIONAL, False))
    found += [Parameter(arg.arg, KEYWORD, default is not None)
              for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)]
    if arguments.kwarg is not None:
        found.append(Parameter(arguments.kwarg.arg, VAR_KEYWORD, False))
    return found


def _calls(spec: KernelSpec) -> Iterator[tuple[str, str, Mapping[str, object], list[str] | None]]:
    """(where, function, its arguments, kkb's positional arguments or None for a post-processing function)."""
    for card in spec.models:
        if isinstance(card, TextCard) and card.encode_function:
            yield f"models.{card.name}.encode_args", card.encode_function, card.encode_args, list(ENCODE_PASSED)
        if isinstance(card, (TabularCard, TorchCard)) and card.feature_function:
            yield f"models.{card.name}.feature_args", card.feature_function, card.feature_args, list(FEATURE_PASSED)
    for index, stage in enumerate(spec.postprocess):
        if stage.function:
            yield f"postprocess[{index}].args", stage.function, stage.args, None


def check_function_args(spec: KernelSpec, kernel_dir: Path, code_files: Mapping[str, Path]) -> None:
    """Every function kernel.toml names takes the arguments it gives it, and gets every one it needs."""
    for where, reference, args, passed in _calls(spec):
        parameters = function_parameters(reference, code_files)
        if parameters is None:
            continue
        names = passed if passed is not None else passed_names(parameters, args)
        problems = argument_problems(parameters, names, args, where.rsplit(".", 1)[1])
        if problems:
            raise BundleError(f"{kernel_dir / SPEC_FILE}: {where}: {reference}: {'; '.join(problems)}",
                              hint=f"{where.rsplit('.', 1)[1]} are passed to the function as keyword arguments, after "
                                   f"{', '.join(names)}; a parameter named ctx gets the kernel's context")


__all__ = ["check_function_args", "function_parameters"]
