"""The Python and torch versions ``pyproject.toml`` states are true to the code.

The lower bounds (``requires-python``, ``torch>=``) must cover everything the code uses: the
Python side is read by vermin (syntax, standard library, by version), the torch side by a table
of the newer torch APIs the course uses or might reach for. The lowest pair itself is run by
``.ci/versions.sh`` (tests.yml's "versions" job), with the tests listed in
``.ci/torch-only-tests.txt``; that list is checked here too.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CODE = [ROOT / d for d in ("src", "tests", "benchmarks")]
#: Where the course's own code also lives: the chapters' and the assignments' cells.
NOTEBOOK_SOURCES = [*(ROOT / "book").glob("[0-9][0-9]-*.md"), *(ROOT / "solutions").glob("*/*.md")]

#: torch APIs newer than torch 2.0, with the release that added them.
TORCH_APIS = {
    r"torch\.accelerator\b": (2, 6),
    r"\bset_stance\(": (2, 6),
    r"\bflex_attention\b": (2, 5),
    r"\benable_gqa\s*=": (2, 5),
    r"torch\.OutOfMemoryError\b": (2, 5),
    r"\bcustom_op\(": (2, 4),
    r"\bRMSNorm\(|\brms_norm\(": (2, 4),
    r"\bsdpa_kernel\b": (2, 3),
    r"torch\.compiler\.is_compiling\b": (2, 3),
    r"\bcausal_lower_right\b": (2, 2),
}


def _bound(requirement: str) -> tuple:
    """``(3, 11)`` from ``">=3.11"``; the requirement must be a plain lower bound."""
    m = re.fullmatch(r">=\s*(\d+)\.(\d+)(?:\.\d+)?", requirement.strip())
    assert m, f"expected a lower bound such as '>=3.11', got {requirement!r}"
    return int(m[1]), int(m[2])


PYTHON_MIN = _bound(PROJECT["requires-python"])
TORCH_MIN = _bound(next(d[len("torch"):] for d in PROJECT["dependencies"] if re.match(r"torch\b", d)))


def test_the_python_code_needs_no_newer_python_than_requires_python():
    vermin = shutil.which("vermin") or str(Path(sys.executable).with_name("vermin"))
    if not Path(vermin).exists():
        pytest.skip("vermin is not installed (requirements.txt has it)")
    target = "%d.%d" % PYTHON_MIN
    out = subprocess.run([vermin, "--no-tips", "--violations", "--eval-annotations", "--no-parse-comments",
                          f"-t={target}-", *map(str, CODE)], capture_output=True, text=True)
    assert out.returncode == 0, (
        f"code needs a newer Python than pyproject.toml's requires-python >={target}:\n{out.stdout}\n"
        f"{out.stderr}\nraise requires-python (and the lowest pair in .github/workflows/tests.yml "
        f"and README.md) or write it for Python {target}")


@pytest.mark.parametrize("path", [p for d in CODE for p in sorted(d.rglob("*.py"))] + NOTEBOOK_SOURCES,
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_code_needs_no_newer_torch_than_pyproject_states(path):
    text = path.read_text()
    newer = {api: v for api, v in TORCH_APIS.items() if v > TORCH_MIN and re.search(api, text)}
    assert not newer, (
        f"{path.relative_to(ROOT)} uses torch APIs newer than pyproject.toml's torch>="
        f"{'%d.%d' % TORCH_MIN}: {newer}; raise the bound (README.md, tests.yml's lowest pair) or "
        f"do without them")


def test_the_lowest_torch_is_what_flex_attention_needs():
    # Chapter 9 and qkv.flex use FlexAttention: a lower bound below 2.5 would be untrue.
    assert TORCH_MIN >= TORCH_APIS[r"\bflex_attention\b"]


def test_readme_and_the_ci_matrix_state_the_same_bounds():
    py, torch_ = "%d.%d" % PYTHON_MIN, "%d.%d" % TORCH_MIN
    readme = (ROOT / "README.md").read_text()
    assert f"Python {py} or later and PyTorch {torch_} or later" in re.sub(r"\s+", " ", readme)
    workflow = (ROOT / ".github" / "workflows" / "tests.yml").read_text()
    assert re.search(rf'python: "{re.escape(py)}"\s*\n\s*torch: "{re.escape(torch_)}\.0"', workflow), (
        f"tests.yml's versions matrix must run the lowest pair (Python {py}, torch {torch_}.0)")


#: What the tests of .ci/torch-only-tests.txt may import: the versions job installs only these.
_ALLOWED = {"torch", "numpy", "pytest", "hypothesis", "qkv", "catalogue", "attacks", "notebook", "conftest"}


def test_the_torch_only_tests_import_nothing_else():
    listed = [ln.strip() for ln in (ROOT / ".ci" / "torch-only-tests.txt").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")]
    assert listed
    for name in listed:
        path = ROOT / name
        assert path.is_file(), f".ci/torch-only-tests.txt lists {name}, which does not exist"
        tree = ast.parse(path.read_text())
        mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        mods |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                 and n.level == 0 and n.module}
        other = sorted(m for m in mods - _ALLOWED - set(sys.stdlib_module_names)
                       if not m.startswith("answers_"))
        assert not other, f"{name} imports {other}: take it off .ci/torch-only-tests.txt or install those"


#: Imported by qkv without being its dependency: what only a notebook (IPython) or a CUDA
#: machine (triton, which comes with CUDA builds of torch) has, imported only there.
_PROVIDED_ELSEWHERE = {"IPython", "triton"}


def test_every_package_qkv_imports_is_declared():
    declared = {re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0].replace("-", "_").lower()
                for d in [*PROJECT["dependencies"], *sum(PROJECT["optional-dependencies"].values(), [])]}
    missing = {}
    for path in sorted((ROOT / "src" / "qkv").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for top in {n.split(".")[0] for n in names}:
                if (top not in sys.stdlib_module_names and top != "qkv" and top not in _PROVIDED_ELSEWHERE
                        and top.lower() not in declared):
                    missing.setdefault(top, path.relative_to(ROOT).as_posix())
    assert not missing, f"qkv imports packages pyproject.toml does not declare: {missing}"
