"""Build-time checks of ``[submission]`` and ``[[postprocess]]`` against the code and the sample submission.

Each of these failed only in the kernel (or, worse, scored wrong) before:

* a ``[[postprocess]]`` ``function = "module:function"`` whose module is not in the code dataset, or has no
  such function: the kernel's import failed after every model had run;
* a ``threshold``/``clip``/``argmax`` stage whose ``columns`` name the id column: "could not convert string
  to float" in the kernel;
* ``[submission] column_types`` naming a column the sample does not have (ignored silently), or ``"int"``/
  ``"float"`` for a column of text (``{id = "int"}`` turned every id into 0).

The function check reads the module's source (``ast``), never imports it: the build runs no user code for it.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from builder.errors import BundleError
from builder.project.spec import SPEC_FILE, KernelSpec

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd


def check_postprocess(spec: KernelSpec, kernel_dir: Path, code_files: dict[str, Path]) -> None:
    """Every stage's function exists in the code dataset, and no stage's columns name the id column."""
    id_column = spec.submission.id_column
    for index, stage in enumerate(spec.postprocess):
        where = f"{kernel_dir / SPEC_FILE}: postprocess[{index}]"
        if stage.kind == "function" and stage.function:
            _check_function(where, stage.function, code_files)
        if stage.pickle_main and module_source(stage.pickle_main, code_files) is None:
            raise BundleError(f"{where}: pickle_main = '{stage.pickle_main}': the code dataset has no module "
                              f"'{stage.pickle_main}'",
                              hint="name the module of your code that defines the pickled classes, and add its file to "
                                   "[code] include")
        if id_column in stage.columns:
            raise BundleError(f"{where} ({stage.kind}): columns names the id column '{id_column}'",
                              hint=f"list only prediction columns in columns (the id column stays as it is), or "
                                   f"leave columns out: {stage.kind} then takes every column but '{id_column}'")


def _check_function(where: str, reference: str, code_files: dict[str, Path]) -> None:
    module, _, name = reference.partition(":")
    base = module.replace(".", "/")
    source = module_source(module, code_files)
    if source is None:
        modules = sorted(_module_name(relative) for relative in code_files if relative.endswith(".py"))
        close = difflib.get_close_matches(module, modules, n=1, cutoff=0.6)
        guess = f"did you mean '{close[0]}:{name}'? " if close else ""
        raise BundleError(f"{where}: function = '{reference}': the code dataset has no module '{module}' "
                          f"(no {base}.py under [code] include)",
                          hint=f"{guess}add the module's file to [code] include, or fix the reference "
                               "('package.module:function')")
    try:
        tree = ast.parse(source.read_bytes(), filename=str(source))
    except (SyntaxError, ValueError) as exc:
        raise BundleError(f"{where}: function = '{reference}': {source.name} does not parse: {exc}",
                          hint="fix the module: the kernel imports it after the models ran") from None
    defined = _top_level_names(tree)
    if name not in defined:
        close = difflib.get_close_matches(name, sorted(defined), n=1, cutoff=0.6)
        guess = f"did you mean '{module}:{close[0]}'? " if close else ""
        raise BundleError(f"{where}: function = '{reference}': {base}.py defines no '{name}'",
                          hint=f"{guess}name a function of the module: DataFrame in, DataFrame out")


def module_source(module: str, code_files: Mapping[str, Path]) -> Path | None:
    """The code dataset's file of ``module`` (``a/b.py`` or ``a/b/__init__.py``), None where it has none."""
    base = module.replace(".", "/")
    return code_files.get(f"{base}.py") or code_files.get(f"{base}/__init__.py")


def _module_name(relative: str) -> str:
    return relative.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _top_level_names(tree: ast.Module) -> set[str]:
    """What ``module.name`` can resolve to without running the module: defs, classes, assignments, imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def check_column_types(spec: KernelSpec, kernel_dir: Path, sample_path: Path, sample: pd.DataFrame) -> None:
    """Each ``column_types`` key is a column of the sample ("*": every target), and a number type names numbers."""
    import pandas as pd
    for column, kind in spec.submission.column_types.items():
        where = f"{kernel_dir / SPEC_FILE}: submission.column_types.{column}"
        if column == "*":
            continue
        if column not in sample.columns:
            close = difflib.get_close_matches(column, [str(c) for c in sample.columns], n=1, cutoff=0.6)
            guess = f"did you mean '{close[0]}'? " if close else ""
            raise BundleError(f"{where}: {sample_path.name} has no column '{column}' (it has: "
                              f"{', '.join(map(str, sample.columns))})",
                              hint=f"{guess}column_types names columns of the sample submission, or \"*\" for "
                                   "every target column")
        if kind in ("int", "float"):
            values = sample[column]
            text = values[pd.to_numeric(values, errors="coerce").isna() & values.notna()]
            if len(text):
                raise BundleError(f"{where} = \"{kind}\": {sample_path.name} holds text in '{column}' (e.g. "
                                  f"{text.iloc[0]!r}), which \"{kind}\" would turn into numbers",
                                  hint="remove the key (or say \"str\"): column_types is for columns whose sample "
                                       "values mislead, and text ids must stay text")


__all__ = ["check_column_types", "check_postprocess", "module_source"]
