"""What a test cell calls: every ``check_x(answer, ...)`` call, read with :mod:`ast`.

One reader for both places that need it: ``qkv grade`` (:mod:`.grade.plan`, from the
instructor's source, where a call it cannot read is an error) and ``in_notebook()``
(:mod:`.progress`, from the student's notebook, where such a cell is passed over).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Dict, Tuple

from .usage import UsageError

QUESTION = "check_question"
DEFAULT = object()  # a call that passes no seed: the check's own default (the visible inputs)


@dataclass(frozen=True)
class Call:
    """One ``check_x(answer, ...)`` call of a test cell.

    Args:
        check: the check's name as the cell calls it, e.g. ``check_softmax``.
        answer: the name the cell passes: the student's function, class or variable.
        seed: the literal seed the cell passes; None for ``seed=None`` (drawn when grading);
            absent (:data:`DEFAULT`) when the cell passes none.
        options: the other keyword arguments, as literals (``{"masks": False}``).
        question: for ``check_question("id", answer)``, the question's id.
    """

    check: str
    answer: str
    seed: Any = DEFAULT
    options: Dict[str, Any] = field(default_factory=dict)
    question: str = ""

    def describe(self) -> str:
        """The call as the cell writes it (for messages)."""
        if self.check == QUESTION:
            params = "".join(f", {k}={v}" for k, v in self.options.items())
            return f'{QUESTION}("{self.question}", {self.answer}{params})'
        args = [self.answer] + ([] if self.seed is DEFAULT else [f"seed={self.seed!r}"])
        args += [f"{k}={v!r}" for k, v in self.options.items()]
        return f"{self.check}({', '.join(args)})"


def _literal(node: ast.AST, test: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise UsageError(f"test cell {test} passes {ast.unparse(node)!r} to a check: qkv grade "
                         "needs literal arguments (numbers, strings, True/False, None)") from None


def check_calls(source: str, test: str) -> Tuple[Call, ...]:
    """Every ``check_x(answer, ...)`` call of a test cell, in order, with its arguments.

    Raises:
        UsageError: a call whose arguments are not a name and literals.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise UsageError(f"test cell {test} of the source is not valid Python: {e}") from None
    found = []
    nodes = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)),
                   key=lambda n: (n.lineno, n.col_offset))  # the cell's order
    for node in nodes:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id.startswith("check_")):
            continue
        name = node.func.id
        if name == QUESTION:
            # A per-student question passes its parameters as the notebook's variables
            # (``embed_dim=embed_dim``): options map each parameter to its variable's name.
            if (len(node.args) != 2 or not isinstance(node.args[1], ast.Name)
                    or not isinstance(node.args[0], ast.Constant)
                    or any(kw.arg is None or not isinstance(kw.value, ast.Name)
                           for kw in node.keywords)):
                raise UsageError(f"test cell {test}: check_question takes (\"id\", answer) and, "
                                 "for a per-student question, its parameters as variables "
                                 "(embed_dim=embed_dim)")
            found.append(Call(QUESTION, node.args[1].id, question=str(node.args[0].value),
                              options={kw.arg: kw.value.id for kw in node.keywords}))
            continue
        if not node.args or not isinstance(node.args[0], ast.Name):
            raise UsageError(f"test cell {test}: {ast.unparse(node)} does not pass an answer "
                             "by its name as the first argument")
        seed: Any = DEFAULT
        if len(node.args) > 1:
            seed = _literal(node.args[1], test)
        if len(node.args) > 2:
            raise UsageError(f"test cell {test}: {ast.unparse(node)} passes more than "
                             "(answer, seed) by position")
        options = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise UsageError(f"test cell {test}: {ast.unparse(node)} passes **kwargs")
            if kw.arg == "seed":
                seed = _literal(kw.value, test)
            else:
                options[kw.arg] = _literal(kw.value, test)
        found.append(Call(name, node.args[0].id, seed, options))
    return tuple(found)
