"""What to say when the student's own code raises: the error, the line of their code, a hint.

A torch error read alone ("The size of tensor a (3) must match the size of tensor b (5)
at non-singleton dimension 0") does not say where it came from: the student sees the
check's frames, not their own. :func:`your_line` finds the deepest frame of the
traceback that is the student's code (neither the course's nor an installed library's)
and quotes it; :func:`generic_hint` turns the errors every exercise meets (a tensor used
as a bool, ``.t()`` on a batch, ``view`` of a transposed tensor, shapes that do not
broadcast, an argument left ``None``) into what to change.
"""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
from typing import Sequence, Tuple

# Installed libraries (torch, the standard library) and the course's own code.
_NOT_STUDENTS = tuple(sorted({os.path.realpath(p) + os.sep for p in (
    *(sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")),
    sys.prefix, sys.base_prefix,
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) if p}))  # qkv's folder

__all__: list = []

_MAX_LINE = 100

# (substring of the error, hint): the errors of any exercise, most specific first.
_DTYPES_MET = ("two dtypes met: a tensor or constant made without dtype= is float32 beside "
               "float16 or bfloat16 inputs: make it with dtype=x.dtype (or cast the result "
               "back with .to(x.dtype))")
_NONE = ("a value was None: an argument left at its default (handle the None case before "
         "using it), or what a function of yours gave back when it ends without `return`")
_GENERIC: Tuple[Tuple[str, str], ...] = (
    ("Boolean value of Tensor with more than one value is ambiguous",
     "a tensor was used as a condition (if W:, if k_cache:, and/or): test an optional "
     "argument with `if W is not None:`, and combine bool tensors with &, | and ~, not "
     "and, or and not"),
    ("t() expects a tensor with <= 2 dimensions",
     ".t() works on 2-D tensors only: use .transpose(-2, -1) (or .mT) for a batch"),
    ("view size is not compatible",
     "view needs contiguous memory, which a transpose or expand does not give: use .reshape"),
    ("cannot be multiplied",
     "the inner sizes of a matrix product differ: print the shapes of both operands and "
     "look for a missing transpose (.transpose(-2, -1)) or the wrong tensor"),
    ("must match the size of tensor",
     "two shapes do not broadcast: print them; look for a fixed axis number (unsqueeze(1), "
     "dim=0) that assumes no batch axes, or the wrong length (L or S)"),
    ("is invalid for input of size",
     "a reshape/view got sizes that do not multiply to the tensor's size: compute them from "
     "the input's shape (an unbatched input has fewer axes)"),
    ("'NoneType' object", _NONE),
    ("NoneType' and", _NONE),
    ("without overflow",
     "a constant too large for the scores' dtype: float16 reaches only 65504, so -1e9 does "
     "not fit; fill with float('-inf') or torch.finfo(scores.dtype).min"),
    ("expected scalar type", _DTYPES_MET),
    ("to have the same dtype", _DTYPES_MET),
    ("is not defined", "a name used before it was defined in your code (a typo, or a "
     "variable from another cell that is not run)"),
    ("must be Tensor, not NoneType",
     "a value is None where a tensor was expected: a function of yours that ends without "
     "`return` gives None (or an argument was left at its default None)"),
    ("must be Tensor, not",
     "a torch function got a Python number: use math.sqrt / math.exp on numbers"),
    ("expected condition to be a boolean tensor",
     "torch.where and masked_fill need a bool mask: a float mask is added to the scores"),
)


def _students(filename: str) -> bool:
    """Whether a frame's file is the student's: neither a library's nor the course's."""
    if filename.startswith("<frozen"):
        return False
    return not os.path.realpath(filename).startswith(_NOT_STUDENTS) if filename[:1] != "<" \
        else True  # a notebook cell's code ("<ipython-input-...>") is the student's


def your_line(error: BaseException) -> str:
    """``"line 3 of softmax: e = (x - x.max(...)).exp()"`` for the deepest frame of
    ``error``'s traceback that runs the student's code; ``""`` when there is none (the
    error was raised by the check itself, or the source is not available)."""
    tb, found = error.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if _students(code.co_filename):
            found = (code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    if found is None:
        return ""
    filename, lineno, name = found
    text = linecache.getline(filename, lineno).strip()
    if not text:
        return f"line {lineno} of {name}"
    if len(text) > _MAX_LINE:
        text = text[: _MAX_LINE - 3] + "..."
    return f"line {lineno} of {name}: {text}"


def generic_hint(message: str) -> str:
    """The hint for an error any exercise can meet, or ``""``."""
    for needle, hint in _GENERIC:
        if needle in message:
            return hint
    return ""


def passed_before(labels: Sequence[str], half: bool = False) -> str:
    """What to add when the student's code raised after running right on other inputs
    (``half``: on an input in float16 or bfloat16)."""
    if not labels:
        return ""
    more = f" and {len(labels) - 1} more" if len(labels) > 1 else ""
    if half:
        return (f" (it was right on {labels[0]}{more}: this input is in half precision, so "
                "look at its dtype: constants and new tensors)")
    return (f" (it was right on {labels[0]}{more}: look for what differs on this input, "
            f"e.g. batch axes, L != S, an argument left at its default)")


def first_line(error: BaseException) -> str:
    """``TypeError: unsupported operand ...``: the error's type and first line."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"
