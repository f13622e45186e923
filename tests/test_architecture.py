"""The architecture's rules that import-linter cannot see (docs/ARCHITECTURE.md).

import-linter checks the stage layers and the forbidden imports (``make lint``). It reads imports inside
functions too, but a deferred import is how a cycle is hidden, so these tests forbid the hiding itself:
no ``builder`` import inside a function, and no cycle among ``builder``'s modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.files import REPO

PACKAGE = REPO / "builder"
# Code that runs elsewhere (inside the kernel, the sandbox or the `kaggle` command): import-linter keeps builder out of it.
GUESTS = ("builder/kkb_runtime/", "builder/run/guest/", "builder/local_kaggle/shim/")


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    # `from package import module` depends on that module; `from module import name` on the module.
    return [f"{base}.{alias.name}" for alias in node.names]


def _edges() -> dict[str, set[str]]:
    modules = _modules()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(node, name, path.name == "__init__.py"):
                    while target and target not in modules:
                        target = target.rpartition(".")[0]
                    if target and target != name and target != "builder":
                        edges[name].add(target)
    return edges


def test_no_builder_import_inside_a_function() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == "builder"):
                    if not relative.startswith(GUESTS):
                        found.append(f"{relative}:{node.lineno}")
                elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "builder" for a in node.names):
                    found.append(f"{relative}:{node.lineno}")
    assert found == [], "move the import to the top of the module (and the code to the stage it belongs to)"


def test_no_import_cycles() -> None:
    edges = _edges()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, [*stack, target])
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert cycles == []



MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def test_no_module_over_500_lines_and_no_function_over_60() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found.append(f"{relative}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{relative}:{node.lineno} {node.name}: {lines} lines")
    assert not found, ("cut it along its sections (a module) or into named steps (a function): " + "; ".join(found))
