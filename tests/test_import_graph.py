"""The package's import graph, read from the source (AST), not by importing it.

Data flows one way (design.md, section 1): the reference ``qkv`` (everything but
``qkv.checks``) knows nothing of the checks, and neither knows the book, the
notebooks or nbgrader; the checks use the reference's public API only. Lazy
imports inside functions count like the ones at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

import qkv

SRC = Path(__file__).resolve().parents[1] / "src"
FORBIDDEN = ("nbgrader", "qkv_course", "jupytext", "nbformat", "sphinx", "myst_nb", "book")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> Dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / "qkv").rglob("*.py"))}


MODULES = _modules()


def _imports(name: str) -> List[Tuple[str, List[str]]]:
    """Every import in module ``name``, anywhere in it: ``(absolute module, names imported from it)``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((module, [a.name for a in node.names]))
    return found


def _qkv_edges(name: str) -> Set[str]:
    """The ``qkv`` modules that ``name`` imports (``from . import x`` names module ``x``)."""
    out = set()
    for module, names in _imports(name):
        # ``from pkg import sub`` depends on the submodule, not on the (already importing) package;
        # ``from pkg import name`` on the package itself.
        submodules = [f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES]
        for target in submodules or [module]:
            if target in MODULES and target != name:
                out.add(target)
    return out


def _find_cycle(graph: Dict[str, Set[str]]) -> List[str]:
    state: Dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def _is_checks(name: str) -> bool:
    return name == "qkv.checks" or name.startswith("qkv.checks.")


def test_the_parser_sees_lazy_and_relative_imports():
    assert "qkv.triton_kernel" in _qkv_edges("qkv.efficient")  # imported inside a function
    assert "qkv._validate" in _qkv_edges("qkv.scaling")  # from . import _validate as v
    assert {"qkv.lookup", "qkv.masking"} <= _qkv_edges("qkv.scaling")


def test_no_import_cycle_among_qkv_modules():
    # The package's __init__ imports every concept module: leave it out, or every
    # `from . import x` inside the package would look like a cycle through it.
    graph = {m: _qkv_edges(m) - {"qkv"} for m in MODULES if m != "qkv"}
    assert _find_cycle(graph) == []


@pytest.mark.parametrize("name", [m for m in MODULES if not _is_checks(m)])
def test_the_reference_never_imports_the_checks(name):
    assert not [m for m in _qkv_edges(name) if _is_checks(m)]
    assert not [m for m, _ in _imports(name) if _is_checks(m)]


@pytest.mark.parametrize("name", list(MODULES))
def test_no_course_tooling_or_book_imports(name):
    bad = [m for m, _ in _imports(name) if m.split(".")[0] in FORBIDDEN]
    assert not bad, f"{name} imports {bad}: the package must not depend on the course's tooling"


def _private_uses(name: str) -> List[str]:
    """What checks module ``name`` takes from the reference other than ``qkv.<public name>``."""
    bad = []
    for module, names in _imports(name):
        if module == "qkv" or (module.startswith("qkv.") and not _is_checks(module)):
            if module != "qkv":
                bad.append(f"import from {module}")
            bad += [f"qkv.{n}" for n in names if n not in qkv.__all__ and not _is_checks(f"qkv.{n}")]
    tree = ast.parse(MODULES[name].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "qkv":
            if node.attr not in qkv.__all__ and node.attr not in ("checks", "__all__"):
                bad.append(f"qkv.{node.attr}")
    return bad


@pytest.mark.parametrize("name", [m for m in MODULES if _is_checks(m)])
def test_checks_use_only_the_public_api(name):
    assert _private_uses(name) == []
