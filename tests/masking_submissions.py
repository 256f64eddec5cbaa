"""Students' answers to assignment 06-masking, as notebook cell sources, and submissions made
from them, and nbgrader run on a course folder: the material of tests/test_progress.py,
tests/test_report.py.

Each wrong answer is one known mistake, written the way a student would write it; the
``(test, outcome)`` it must produce is stated beside it, so a report's counts are known by
construction.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import nbformat

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "06-masking"
SOLUTION = ROOT / "solutions" / ASSIGNMENT / "masking.ipynb"
EXERCISE = ROOT / "exercises" / ASSIGNMENT / "masking.ipynb"

INVERTED_CAUSAL = '''
def causal_mask(L, S=None, device=None):
    S = L if S is None else S
    return ~torch.ones(L, S, dtype=torch.bool, device=device).tril()
'''

DIAGONAL_MASKED = '''
def causal_mask(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(-1)
'''

MISSING_CAUSAL = "# I did not get to this one\n"

LOOPS_WITHOUT_S = '''
def padding_mask(lengths, S=None):
    lengths = torch.as_tensor(lengths)
    while S is None:  # meant to be S = max(lengths): never ends when S is omitted
        pass
    return torch.arange(S, device=lengths.device)[None, :] < lengths[:, None]
'''

INVERTED_PADDING = '''
def padding_mask(lengths, S=None):
    lengths = torch.as_tensor(lengths)
    S = int(lengths.max()) if S is None else S
    return torch.arange(S, device=lengths.device)[None, :] >= lengths[:, None]
'''

ZERO_FILL = '''
def masked_scores(scores, attn_mask=None, is_causal=False):
    if is_causal and attn_mask is not None:
        raise ValueError("pass either attn_mask or is_causal=True")
    if is_causal:
        L, S = scores.shape[-2], scores.shape[-1]
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=scores.device).tril()
    if attn_mask is None:
        return scores
    if attn_mask.dtype == torch.bool:
        return scores.masked_fill(~attn_mask, 0.0)  # hidden keys still get exp(0) = 1
    return scores + attn_mask
'''

MISTAKE_NAMES = {
    INVERTED_CAUSAL: "inverted mask (True marks the future)",
    DIAGONAL_MASKED: "causal mask off by one (the diagonal is masked)",
    INVERTED_PADDING: "inverted mask (True marks padding)",
    ZERO_FILL: "hidden scores set to 0 instead of -inf",
}


def grade_id(cell) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def solution_answer(grade: str) -> str:
    """The model answer of a cell, as a student would write it (no nbgrader markers)."""
    nb = nbformat.read(str(SOLUTION), as_version=4)
    source = next(c.source for c in nb.cells if grade_id(c) == grade)
    return re.sub(r"^\s*### (BEGIN|END) SOLUTION\n", "", source, flags=re.MULTILINE)


def masked_scores_with_its_own_causal_mask() -> str:
    """The model masking step, building its causal mask inline: a student's ``causal_mask``
    is then called by nothing graded after its own test (a missing one cannot break the
    notebook's later cells), which keeps a class's counts simple."""
    source = solution_answer("masked_scores")
    call = "causal_mask(L, S, device=scores.device)"
    assert call in source, "the solution's masking step no longer calls causal_mask like this"
    return source.replace(call, "torch.ones(L, S, dtype=torch.bool, device=scores.device).tril()")


def submission(answers: Dict[str, str], base: Path = EXERCISE):
    """The released exercise with the answer cells ``answers`` (grade_id -> source) filled in.

    Answer cells not named keep the model answer; ``base`` is the notebook to start from.
    """
    nb = copy.deepcopy(nbformat.read(str(base), as_version=4))
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            cell.source = answers.get(grade_id(cell), solution_answer(grade_id(cell)))
    return nb


def nbgrader(course: Path, *args: str) -> subprocess.Popen:
    """Start ``nbgrader ARGS`` in ``course`` (output captured, read it with :func:`finish`)."""
    bin_dir = Path(sys.executable).parent  # nbgrader runs alembic from the venv's bin
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.Popen([str(bin_dir / "nbgrader"), *args], cwd=course, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, ok: bool = True) -> str:
    """Wait for an nbgrader run; assert it succeeded (or, ``ok=False``, failed); its log."""
    log = proc.communicate(timeout=600)[0]
    assert (proc.returncode == 0) == ok, where_it_failed(log)
    return log


def where_it_failed(log: str) -> str:
    """The part of an nbgrader log that says why it failed: from its first traceback (nbgrader
    prints it where the failing notebook ran, long before the summary at the end) plus the end."""
    first = min((i for i in (log.find("Traceback"), log.find("| ERROR]")) if i >= 0), default=-1)
    head = log[max(first - 500, 0):first + 3000] if first >= 0 else ""
    return f"{head}\n[...]\n{log[-1500:]}"


def masking_course(base: Path) -> Path:
    """An nbgrader course at ``base`` with this assignment generated; its released notebook."""
    (base / "solutions").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", base)
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, base / "solutions" / ASSIGNMENT)
    finish(nbgrader(base, "generate_assignment", ASSIGNMENT, "--force", "--create"))
    return base / "exercises" / ASSIGNMENT / "masking.ipynb"
