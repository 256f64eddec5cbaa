"""Delegation flags: for a person to review, never a deduction.

An exercise that asks for your own softmax or attention cannot stop an answer from calling
torch's (the sandbox runs whatever the answer calls, and a right result is a right result).
So delegation is a *flag*: the grade stands, and the run's summary and the result file name
the student, the test and what was seen, from two sources:

- what the sandbox saw: the checks' notice in a call's verdict (the answer called what the
  exercise asks you to write, seen through torch's public API while it ran);
- a static reading of the student's code (answer cells and cells they added), here in the
  parent, of the code the answer's name reaches (:mod:`.uses`): a reference to torch's softmax
  or attention where the exercise forbids it, or any use of the course's reference package
  ``qkv`` (``qkv.checks`` aside, nothing of it belongs in an answer); and, wherever it is,
  code the reading cannot follow (``exec``, torch's hooks switched off).
"""

from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Optional, Set, Tuple

from .names import NotRead, names_in, parse
from .uses import Code

SOFTMAX = ("softmax",)
_NOTICES = 16  # a test's sandbox notices kept as flags
ATTENTION = ("scaled_dot_product_attention", "multiheadattention", "multi_head_attention",
             "flex_attention", "_safe_softmax", "_masked_softmax", "transformer")
# What each exercise may not call, beyond the course's reference (checks not listed: attention).
FORBIDDEN = {"softmax": SOFTMAX, "question": (), "dot_product_variance": (),
             # torch's ready-made causal masks; not tril or triu, the way the exercise is done
             "split_heads": (), "merge_heads": (),
             "causal_mask": ("causal_lower_right", "causal_upper_left", "subsequent_mask"),
             "padding_mask": (), "sinusoidal_encoding": ("sinusoid", "rotary", "rope", "alibi"),
             "apply_rope": ("sinusoid", "rotary", "rope", "alibi"),
             "alibi_bias": ("sinusoid", "rotary", "rope", "alibi"),
             "repeat_kv": ("repeat_kv",),
             "causal_mask_bottom_right": ("lower_right", "upper_left", "subsequent_mask")}


#: What an exercise's text tells the student to call, by exercise: an answer's use of it is
#: no delegation (assignment 11's ablation starts from ``qkv.ablation_baseline()``, measures
#: with ``qkv.ablation_loss`` and may avoid the chapter's own changes).
HANDED = {"ablation": {"qkv.ablation_baseline", "qkv.ablation_loss", "qkv.chapter_ablations"}}


def _public_check(name: str) -> bool:
    """``qkv.checks`` and what a notebook calls of it (``qkv.checks.check_softmax``): a student
    may check an answer in its own cell. The rest of the checks (``qkv.checks.grading``, the
    catalogues of mistakes) holds the references."""
    rest = name.split(".")[2:] if name.startswith("qkv.checks") else None
    return rest is not None and (not rest or rest[0].startswith("check_")
                                 or rest[0] in ("in_notebook", "CheckFailed"))


def _delegates(check: str, names: Iterable[str]) -> List[str]:
    check = check[len("check_"):] if check.startswith("check_") else check
    patterns = FORBIDDEN.get(check, ATTENTION)
    seen = []
    for name in sorted(names):
        if name.split(".")[-1].startswith("check_") and (
                "." not in name or _public_check(name)):
            continue  # a check, called to try the answer
        if name == "qkv" or (name.startswith("qkv.") and not _public_check(name)):
            seen.append(f"uses the course's reference ({name})")
        elif check != "softmax" and check in FORBIDDEN and not patterns:
            continue
        elif any(p in name.lower() for p in patterns) and name != check:
            seen.append(f"names {name}")
    return seen


#: Characters of a submission's added cells read for flags: a flag is for a person, and a
#: submission's size must not buy it the grader's time (each cell is parsed once, up to this).
STATIC_CHARS = 1 << 20


def _within(added: List[str]) -> Tuple[List[str], bool]:
    """The added cells read for flags, :data:`STATIC_CHARS` characters in all; whether some
    were left unread."""
    kept: List[str] = []
    budget = STATIC_CHARS
    for source in added:
        if len(source) > budget:
            return kept, True
        budget -= len(source)
        kept.append(source)
    return kept, False


def _given_names(given: str) -> Set[str]:
    """The names of the code the release wrote in an answer cell (none where it cannot be
    read): what the student was handed is no delegation."""
    try:
        return names_in(given)
    except NotRead:
        return set()


def _unread(why: str) -> str:
    return (f"a cell could not be read: {why} (what it calls was not looked at: read it)")


def given_by_setup(setup: str) -> Set[str]:
    """``{"qkv.split_heads", ...}``: what the instructor's set-up cell imports from ``qkv``
    (an answer that reaches it as ``qkv.split_heads`` uses what the assignment gives)."""
    try:
        tree = parse(setup)
    except NotRead:
        return set()  # the instructor's own cell: then nothing is given
    return {f"qkv.{a.name}" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "qkv" for a in node.names}


def _less_given(names: Set[str], given: Set[str]) -> Set[str]:
    """``names`` without the set-up's given pieces (and without ``qkv`` itself when every use
    of it was one of them)."""
    left = names - given
    if given and "qkv" in left and not any(n.startswith("qkv.") for n in left) \
            and any(n in given for n in names):
        left.discard("qkv")
    return left


def flags_for(record_tests: List[Dict], answers: Dict[str, str], added: List[str],
              calls_by_test: Dict[str, List[tuple]],
              given: Optional[Dict[str, str]] = None, setup: str = "") -> List[Dict[str, str]]:
    """Every flag of a submission: ``{"test", "source", "detail"}``.

    Args:
        record_tests: the tests' verdicts (their calls' ``notice`` fields).
        answers: the student's answer cells by id.
        added: the cells the student added.
        calls_by_test: test id -> ``[(check, answer name)]`` from the instructor's plan.
        given: answer id -> the code the release wrote in that answer cell (not flagged).
        setup: the instructor's set-up cell: what it imports from ``qkv`` is given, not
            delegation, however the answer reaches it (``qkv.split_heads``).
    """
    from_setup = given_by_setup(setup)
    flags = []
    added, unread = _within(list(added))
    if unread:
        flags.append({"test": "", "source": "static", "detail": (
            f"the added cells hold more than {STATIC_CHARS:,} characters: the rest was not "
            "read for flags")})
    # Every cell of the student's is read once, on one budget; an answer's names are those of
    # the code its name reaches (:mod:`.uses`).
    ids = list(answers)
    code = Code([answers[a] for a in ids] + added)
    failed = [(f"the answer cell {ids[i]}" if i < len(ids) else "an added cell") + f", {why}"
              for i, why in code.unread]
    if code.unfollowed:
        flags.append({"test": "", "source": "static", "detail": (
            "the code uses " + ", ".join(code.unfollowed[:8]) + ": names or code built at run "
            "time, or torch's own hooks for seeing calls, which neither the static reading nor "
            "the sandbox's notice can follow: read what the answers call")})
    names: Dict[str, Set[str]] = {}  # answer name -> the names its code uses, read once
    for test in record_tests:
        for notice in list(dict.fromkeys(test.get("notices", [])))[:_NOTICES]:
            flags.append({"test": test["grade_id"], "source": "sandbox", "detail": notice[:300]})
        for check, answer in calls_by_test.get(test["grade_id"], []):
            if check == "check_question":
                continue
            if answer not in names:
                names[answer] = code.uses(answer) - _given_names((given or {}).get(answer, ""))
            handed = HANDED.get(check[len("check_"):], set())
            for detail in _delegates(check, _less_given(names[answer], from_setup | handed)):
                flags.append({"test": test["grade_id"], "source": "static",
                              "detail": f"{answer}: {detail}"})
    # A cell that could not be read is a flag for a person, never the end of grading.
    flags += [{"test": "", "source": "static", "detail": _unread(why)} for why in failed]
    unique = {(f["test"], f["source"], f["detail"]): f for f in flags}
    return list(unique.values())
