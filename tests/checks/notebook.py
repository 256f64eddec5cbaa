"""Running notebook cells as nbgrader does, in a fresh interpreter, for the attack corpus.

:func:`run_cells` executes cells one after the other in one namespace, each compiled as
its own piece of code (as IPython does), and says for each whether it raised. The
interpreters come from a fork server that has imported torch and :mod:`qkv` but not
:mod:`qkv.checks`: each run is a fresh kernel, without paying for torch's import each time.
"""

from __future__ import annotations

import multiprocessing
import traceback
from typing import List, Optional, Tuple

#: The locked set-up cell of every assignment, as far as the checks are concerned.
SETUP = ("import math\nimport torch\nimport qkv\nimport qkv.checks\n"
         "qkv.checks.warnings_to_stdout()\n")

_CONTEXT = None


def _context():
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(["torch", "qkv", "scipy.special"])
    return _CONTEXT


def _run(cells: List[str], conn) -> None:
    namespace = {"__name__": "__main__"}
    outcomes = []
    for i, cell in enumerate(cells):
        try:
            exec(compile(cell, f"<cell {i}>", "exec"), namespace)  # noqa: S102 (test input)
            outcomes.append(None)
        except BaseException as e:  # noqa: BLE001 (a cell may raise anything)
            outcomes.append(f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exc(limit=3)))
    conn.send(outcomes)
    conn.close()


def run_cells(cells: List[str], timeout: float = 120) -> List[Optional[str]]:
    """Run ``cells`` in a fresh interpreter; ``None`` for each cell that ran, else its error."""
    ctx = _context()
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_run, args=(cells, child))
    proc.start()
    child.close()
    if not parent.poll(timeout):
        proc.kill()
        raise TimeoutError(f"cells did not finish in {timeout} s")
    outcomes = parent.recv()
    proc.join()
    return outcomes


def run_notebook(answer: str, test: str) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """Set-up cell, answer cell, test cell: the outcome of each."""
    return tuple(run_cells([SETUP, answer, test]))
