"""What the checks try and what they refuse: a paragraph made from the checks themselves.

Every assignment's intro ends with this block (:func:`block`), written by
``python -m qkv_course generate`` from the assignment's test cells (hidden tests included) and
the checks they call, as :mod:`qkv.checks.grading` registers them. Nothing in it is typed by
hand, so it cannot drift from what the checks do:

- the inputs: how many calls each check makes and their dtypes, read from the inputs the check
  itself draws (:meth:`~qkv.checks.harness.Check.calls`), float16 and bfloat16 included;
- where it runs: the CPU, and CUDA too when the kernel has a GPU (``Check.every_device``);
- how long one call may take (``Check.seconds``);
- the student's other answers that are the course's while it runs (the exercise's helpers);
- the calls it notes rather than refuses (the exercise's ``Forbidden``), and what it refuses.

``tests/test_checks_intro.py`` checks the block of every notebook against this module and,
by running the checks on a spy, against what the checks actually do.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

BEGIN = ("<!-- BEGIN CHECKS: made from the checks by `python -m qkv_course generate`; "
         "do not edit -->")
END = "<!-- END CHECKS -->"

#: The order dtypes are listed in: the usual ones, then half precision.
DTYPES = ("float64", "float32", "float16", "bfloat16")
HALF = ("float16", "bfloat16")
WIDTH = 100


@dataclass(frozen=True)
class Facts:
    """What one check does with the options a test cell passes (all read from the check).

    Attributes:
        check, answer: the check's name and the name of the answer the test cell passes.
        options: the test cell's options (``{"masks": False}``).
        calls: how many calls of the answer the check makes.
        dtypes: the floating dtypes of the tensors it passes, in :data:`DTYPES` order.
        asked: dtypes it asks for with a ``dtype=`` argument (a function that makes a tensor).
        every_device: also run on CUDA in the kernel when there is a GPU.
        seconds: how long one call may take.
        compared: ``True`` when each result is compared with the reference's result,
            ``False`` for a measurement judged as one (an experiment).
        noted: the torch calls it notes by name; ``patterns``: name fragments it notes too.
        helpers: the student's other answers that are the course's while it runs.
        given: the course's functions the set-up cell gives, which answers may call.
        batched: a measurement whose seeds of one setting go in one call (and one time limit).
        own: the student's own earlier answers it notes a call of (``linear_attention``).
        module: the answer is a class (an ``nn.Module``).
        course: it notes a use of the course's own ``qkv`` (an exercise's check always does;
            a measurement's is asked by calling it once on a probe that names ``qkv``).
    """

    check: str
    answer: str
    options: Tuple[Tuple[str, object], ...]
    calls: int
    dtypes: Tuple[str, ...]
    asked: Tuple[str, ...]
    every_device: bool
    seconds: float
    compared: bool
    noted: Tuple[str, ...]
    patterns: Tuple[str, ...]
    helpers: Tuple[str, ...]
    module: bool
    course: bool = True
    given: Tuple[str, ...] = ()
    batched: bool = False
    own: Tuple[str, ...] = ()


def _dtypes(x: object, found: set, asked: set) -> None:
    import torch

    if isinstance(x, torch.Tensor):
        if x.is_floating_point():
            found.add(str(x.dtype).replace("torch.", ""))
    elif isinstance(x, (tuple, list)):
        for v in x:
            _dtypes(v, found, asked)
    elif isinstance(x, dict):
        for k, v in x.items():
            if k == "dtype" and isinstance(v, str):
                asked.add(v)
            else:
                _dtypes(v, found, asked)


def _ordered(names: Iterable[str]) -> Tuple[str, ...]:
    return tuple(sorted(set(names), key=lambda n: (DTYPES.index(n) if n in DTYPES else 99, n)))


def facts(check: str, answer: str, options: Optional[Dict[str, object]] = None) -> Facts:
    """The :class:`Facts` of ``check`` called with ``options``, read from the registry.

    Raises:
        KeyError: a check :mod:`qkv.checks.grading` does not know.
    """
    from qkv.checks import grading
    from qkv.checks.harness import ExerciseCheck

    options = dict(options or {})
    c = grading.CHECKS[check]
    found: set = set()
    asked: set = set()
    inputs = c.calls(0, **options)
    _dtypes(inputs, found, asked)
    noted: List[str] = []
    patterns: List[str] = []
    helpers: List[str] = []
    own: List[str] = []
    if isinstance(c, ExerciseCheck):
        for e in c.exercises(**options):
            noted += [n for n in e.forbid.names.values() if n not in noted]
            patterns += [p for p in e.forbid.patterns if p not in patterns]
            own += [n for n in e.forbid.own if n not in own]
            helpers += [h for h in e.helpers if h not in helpers]
    else:  # a measurement: its helpers, when it has any
        helpers += list(getattr(getattr(c, "exp", None), "helpers", {}) or {})
    given = tuple(g for g in c.given if g not in helpers)  # what the set-up cell gives
    course = isinstance(c, ExerciseCheck) or _notes_course(c, inputs[0], options,
                                                           helpers + list(given))
    # A measurement's seeds of a setting go in one call: each seed counts as one.
    batched = hasattr(c, "exp")
    count = len(c.plan(0)) if batched else len(inputs)
    return Facts(check, answer, tuple(sorted(options.items())), count, _ordered(found),
                 _ordered(asked), c.every_device, c.seconds, isinstance(c, ExerciseCheck),
                 tuple(noted), tuple(patterns), tuple(helpers), answer[:1].isupper(), course,
                 given, batched, tuple(own))


def _notes_course(c: object, first: Tuple[tuple, dict], options: Dict[str, object],
                  allowed: Iterable[str] = ()) -> bool:
    """Whether check ``c`` notes an answer that names the course's ``qkv``: its own
    ``run_student`` on its first input, with a probe that names one of the course's functions
    the check does not allow (``qkv.softmax``, say) and returns a number (a measurement's answer
    returns one)."""
    import qkv

    name = next(n for n in ("softmax", "self_attention", "causal_mask") if n not in set(allowed))
    # named, never called: what a notice looks for
    namespace: Dict[str, object] = {"qkv": qkv}
    exec(f"def probe(*args, **kwargs):\n    qkv.{name}\n    return 0.0\n", namespace)
    probe = namespace["probe"]

    args, kwargs = first
    _, notes = c.run_student(probe, args, kwargs, **options)  # type: ignore[attr-defined]
    return any(n.startswith("qkv.") for n in notes)


def _calls(source: str) -> Iterable[Tuple[str, str, Dict[str, object], bool]]:
    """``(check, answer, options, fresh)`` for each ``check_x(answer, ...)`` call of a test cell
    (``fresh``: it passes ``seed=None``); questions and calls not made of literals are skipped."""
    nodes = sorted((n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)),
                   key=lambda n: (n.lineno, n.col_offset))  # the cell's order
    for node in nodes:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id.startswith("check_") and node.func.id != "check_question"
                and node.args and isinstance(node.args[0], ast.Name)):
            continue
        try:
            given = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
            seed = ast.literal_eval(node.args[1]) if len(node.args) > 1 else given.get("seed", 0)
        except ValueError:
            continue
        options = {k: v for k, v in given.items() if k != "seed"}
        yield node.func.id, node.args[0].id, options, seed is None


def of_tests(sources: Iterable[str]) -> Tuple[List[Facts], bool]:
    """The facts of every check the test cells call, once per (check, options), in the cells'
    order, and whether some call passes ``seed=None`` (fresh random inputs: the hidden tests)."""
    out: List[Facts] = []
    seen, fresh = set(), False
    for source in sources:
        for check, answer, options, new in _calls(source):
            fresh = fresh or new
            key = (check, tuple(sorted(options.items())))
            if key not in seen:
                seen.add(key)
                out.append(facts(check, answer, options))
    return out, fresh


def _words(items: Iterable[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _code(items: Iterable[str]) -> List[str]:
    return [f"`{i}`" for i in items]


def _call(f: Facts) -> str:
    options = "".join(f", {k}={v!r}" for k, v in f.options)
    return f"`{f.check}({f.answer}{options})`"


def _inputs(f: Facts) -> str:
    if not f.compared:
        return f"{f.calls} call{'s' * (f.calls != 1)} with numbers and seeds only (a measurement)"
    kinds = []
    if f.dtypes:
        kinds.append(", ".join(f"**{d}**" if d in HALF else d for d in f.dtypes))
    if f.asked:
        kinds.append("sizes, some with " + ", ".join(f"`dtype=torch.{d}`" for d in f.asked))
    return f"{f.calls}: " + ("; ".join(kinds) if kinds else "sizes and numbers only")


def _devices(f: Facts) -> str:
    return "CPU, and CUDA too when there is a GPU" if f.every_device else "CPU"


def _noted(f: Facts) -> str:
    # "nn.MultiheadAttention (F.multi_head_attention_forward)": the name before the brackets.
    parts = _code(dict.fromkeys(n.split(" (")[0] for n in f.noted))
    # "_safe_softmax" says nothing more where "softmax" is listed.
    patterns = [p for p in f.patterns if not any(q != p and q in p for q in f.patterns)]
    if patterns:
        parts.append("any other torch function whose name contains "
                     + _words(_code(patterns)).replace(" and ", " or "))
    allowed = f.helpers + f.given
    aside = f" ({_words(_code(allowed))} aside)" if allowed else ""
    if f.course:
        parts.append(f"the course's own `qkv`{aside}")
    if f.own:
        parts.append("your own " + _words(_code(f.own)))
    return "; ".join(parts) or "nothing (the course's `qkv` is yours to use here)"


def _fill(text: str, indent: str = "") -> List[str]:
    """A paragraph wrapped to :data:`WIDTH` (the notebook's source stays readable)."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) + [""]


def paragraph(found: List[Facts], fresh: bool = False) -> str:
    """The block's text (without its markers) for the checks an assignment calls; ``fresh``:
    some test cell draws fresh random inputs (``seed=None``)."""
    if not found:
        return ""
    rows = ["| Test cells call | Inputs it tries (dtypes) | Where, in your notebook | "
            "Time per call |", "|---|---|---|---|"]
    rows += [f"| {_call(f)} | {_inputs(f)} | {_devices(f)} | {f.seconds:g} s"
             f"{' a setting' if f.batched else ''} |" for f in found]
    text = _fill("**What the checks try, and what they refuse.** Each test cell calls a check "
                 "that runs your answer on inputs of its own and compares each result with the "
                 "course's reference, to the precision of the inputs' dtype"
                 + ("; the hidden tests call it again with `seed=None`, on fresh random inputs "
                    "drawn the same way." if fresh else "."))
    text += [*rows, ""]
    half = sorted({d for f in found for d in f.dtypes if d in HALF}, key=DTYPES.index)
    if half:
        said = {"float16": "float16 ends far sooner than float32 (its largest value is 65504: "
                           "a fill of `-1e9` or an unguarded `exp` overflows)",
                "bfloat16": "bfloat16 keeps float32's range but only about 3 significant "
                            "digits"}
        text += _fill(f"Half precision is tried: {'; '.join(said[d] for d in half)}. Take "
                      "dtypes from the inputs.")
    given: Dict[Tuple[str, ...], List[str]] = {}
    for f in found:
        if f.helpers:
            given.setdefault(f.helpers, []).append(f"`{f.check}`")
    for helpers, checks in given.items():
        one, many = len(checks) == 1, len(helpers) > 1
        text += _fill(f"While {_words(list(dict.fromkeys(checks)))} {'runs' if one else 'run'}, "
                      f"{_words(_code(helpers))} {'are' if many else 'is'} the course's "
                      f"version{'s' if many else ''}: a mistake in your own costs only its own "
                      "test.")
    refused = ["a wrong value or shape (it names the input, and the known mistake it "
               "recognises)", "an exception", "inputs changed in place",
               "a result on another device than the inputs",
               "a call that takes longer than its time (`QKV_CHECK_SECONDS` sets another)"]
    if any(f.module for f in found):
        refused.append("a module whose two calls on the same input in eval mode differ "
                       "(dropout left on)")
    if any(not f.compared for f in found):
        refused.append("for a measurement: numbers that do not behave as a measurement of what "
                       "the experiment measures (another number for the same seed, an average "
                       "far from the experiment's, or far fewer numbers drawn from the generator "
                       "than it needs)")
    text += _fill("A check refuses " + "; ".join(refused) + ".")
    groups: Dict[str, List[str]] = {}
    for f in found:
        groups.setdefault(_noted(f), []).append(f"`{f.check}`")
    text += _fill("It does **not** refuse a call of what the exercise asks you to write: the "
                  "result is what counts. It prints a note instead, and the grader (`qkv grade`) "
                  "names the call for a person to read, without taking points by itself. The "
                  "calls noted:")
    for noted, checks in groups.items():
        text += _fill(f"- {_words(list(dict.fromkeys(checks)))}: {noted}.", "  ")[:-1]
    text += [""] + _fill(
        "**Before you hand in.** Run the whole notebook from the top (Jupyter: Kernel, Restart "
        "& Run All; Colab: Runtime, Run all): every test cell should pass. In a cell, `from "
        "qkv_course.progress import in_notebook; in_notebook()` checks every answer defined so "
        "far; in a terminal, `qkv progress` runs the notebook as the autograder will. Hand in "
        "this notebook **and** `qkv_answers.json` beside it, which holds your questions' first "
        "answers (in Colab it is in the Files pane, and it goes when the runtime does: "
        "download it too).")
    return "\n".join(text).strip("\n")


def block(test_sources: Iterable[str]) -> str:
    """The block an intro ends with (markers included), ``""`` when no check is called."""
    text = paragraph(*of_tests(test_sources))
    return f"{BEGIN}\n\n{text}\n\n{END}" if text else ""


def split(intro: str) -> Tuple[str, str]:
    """``(intro without the block, the block)`` of a markdown cell (``""`` if it has none)."""
    start, end = intro.find(BEGIN), intro.find(END)
    if start < 0 or end < start:
        return intro, ""
    return (intro[:start] + intro[end + len(END):]).strip("\n"), intro[start:end + len(END)]
