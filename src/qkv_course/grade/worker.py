"""One submission, inside the sandbox: run its code cells, answer the grader's requests.

The child (forked by :mod:`.zygote`) speaks :mod:`.protocol` with the parent directly: it
receives the code cells, runs them in order in one namespace (IPython syntax, with a
``get_ipython()`` whose magics and shell commands do nothing), reports each cell's outcome,
then answers ``call`` (the student's function through ``run_student``) and ``value`` (a
variable, if it is data) until ``bye``. Nothing here is trusted by the parent: a submission
can change anything in its own child, which is why the parent judges what comes back and the
child is thrown away after one submission.

A cell, or a call, that runs past its limit (``cell_s`` in the start request, ``limit_s`` in
a call) is interrupted here, as a notebook's kernel is: the cell counts as raising
:class:`TimeLimit` and the next one runs; the call is answered ``timelimit`` and the grader
goes on to the next test. Only that cell or call costs points. (A submission can turn the
alarm off; then the parent's wall-clock limit ends it, as before: this is fairness to a
slow answer, not a boundary.)
"""

from __future__ import annotations

import builtins
import signal
from functools import partial
from typing import Any, Callable, Dict, List, Optional

from .protocol import Channel, NotEncodable, encode

MESSAGE_CHARS = 2000  # of an exception's message sent back


class TimeLimit(BaseException):
    """Raised in the submission's code when its cell or call runs past its limit (a
    BaseException, as KeyboardInterrupt: an ``except Exception`` in the answer lets it by)."""


def limited(seconds: Optional[float], fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, interrupted by :class:`TimeLimit` after ``seconds`` of wall-clock time
    (``None``: no limit)."""
    if not seconds or seconds <= 0:
        return fn(*args)

    def alarm(signum: int, frame: Any) -> None:
        raise TimeLimit(f"it ran past its limit of {seconds:g} s (an endless loop?)")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _fallback_run_student(check: Any, obj: Any, args: tuple, kwargs: dict, **options: Any) -> Any:
    """Stand-in until ``qkv.checks.grading`` exists: call the student's object."""
    return obj(*args, **kwargs)


def load_run_student() -> Any:
    """``qkv.checks.grading.run_student``, or the stand-in where that module does not exist yet."""
    try:
        from qkv.checks.grading import run_student  # type: ignore[import-not-found]
    except ModuleNotFoundError as e:
        if e.name not in ("qkv.checks.grading", "qkv.checks"):
            raise
        return _fallback_run_student
    return run_student


def serve(channel: Channel, run_student: Any) -> None:
    """Run the cells the parent sends, then answer its requests until ``bye``.

    Args:
        channel: the connection to the parent.
        run_student: ``qkv.checks.grading.run_student`` (:func:`load_run_student`).
    """
    header, cells = channel.recv()
    cell_s = header.get("cell_s") if isinstance(header.get("cell_s"), (int, float)) else None
    namespace: Dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    shell = _Shell(namespace)
    namespace.update(get_ipython=lambda: shell, display=lambda *a, **k: None)
    for index, source in enumerate(cells):
        raised = run_cell(namespace, index, source, cell_s)
        channel.send({"op": "cell", "index": index, "raised": raised})
    channel.send({"op": "cells", "count": len(cells)})
    while True:
        header, value = channel.recv()
        op, rid = header.get("op"), header.get("id")
        if op == "bye":
            return
        if op == "call":
            reply, data = _call(namespace, header, value, run_student)
        elif op == "value":
            name = header.get("name")
            reply, data = ({"kind": "missing"}, None) if name not in namespace else (
                {"kind": "value"}, namespace[name])
        else:
            reply, data = {"kind": "error", "message": f"unknown op {op!r}"}, None
        reply.update(op="reply", id=rid)
        try:
            chunks = encode(reply, data)
        except NotEncodable as e:
            chunks = encode({"op": "reply", "id": rid, "kind": "notdata", "type": str(e)[:200]})
        except Exception as e:  # a tensor subclass whose methods raise, say: still not data
            chunks = encode({"op": "reply", "id": rid, "kind": "notdata",
                             "type": f"{type(data).__name__} ({type(e).__name__})"[:200]})
        channel.write(chunks)


def _call(namespace: Dict[str, Any], header: Dict[str, Any], value: Any,
          run_student: Any) -> tuple:
    name = header.get("name")
    if name not in namespace:
        return {"kind": "raised", "raised": {
            "type": "NameError", "message": f"{name} is not written: the notebook defines no "
                                            f"{name!r}", "line": None}}, None
    args, kwargs, options = value
    limit = header.get("limit_s") if isinstance(header.get("limit_s"), (int, float)) else None
    try:
        result = limited(limit, partial(run_student, header.get("check"), namespace[name],
                                        tuple(args), dict(kwargs), **dict(options)))
    except TimeLimit:
        return {"kind": "timelimit"}, None
    except BaseException as e:  # NotImplementedError, SystemExit... all are the student's
        return {"kind": "raised", "raised": _raised(e)}, None
    return {"kind": "value"}, result


def run_cell(namespace: Dict[str, Any], index: int, source: str,
             seconds: Optional[float] = None) -> Optional[Dict[str, Any]]:
    """Run one code cell (IPython syntax) in ``namespace`` for at most ``seconds``; ``None``,
    or what it raised (:class:`TimeLimit` past the limit)."""
    try:
        code = compile(_transform(source), f"<cell {index}>", "exec")
        limited(seconds, exec, code, namespace)
    except BaseException as e:  # SystemExit and KeyboardInterrupt end the cell, not the worker
        return _raised(e)
    return None


def _transform(source: str) -> str:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # plain Python cells still run
        return source
    return TransformerManager().transform_cell(source)


def _raised(e: BaseException) -> Dict[str, Any]:
    """An exception as data: type name, message (capped), line in the cell where it was raised."""
    line = e.lineno if isinstance(e, SyntaxError) and str(e.filename).startswith("<cell ") else None
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<cell "):
            line = tb.tb_lineno
        tb = tb.tb_next
    try:
        message = str(e)[:MESSAGE_CHARS]
    except BaseException:  # a message that raises is still an answer
        message = "(its message could not be read)"
    return {"type": type(e).__name__[:200], "message": message, "line": line}


class _Shell:
    """``get_ipython()`` in the sandbox: shell commands and most magics do nothing.

    ``%time``/``%timeit`` and ``%%time``/``%%timeit``/``%%capture`` run their code once (a cell
    under them defines names the grader needs); every other magic is a no-op.
    """

    _RUNS = ("time", "timeit", "capture", "prun")

    def __init__(self, namespace: Dict[str, Any]) -> None:
        self._ns = namespace

    def run_line_magic(self, name: str, line: str, *args: Any, **kwargs: Any) -> Any:
        if name in self._RUNS and line.strip():
            try:
                return eval(compile(_transform(line), "<cell magic>", "eval"), self._ns)
            except SyntaxError:
                exec(compile(_transform(line), "<cell magic>", "exec"), self._ns)
        return None

    def run_cell_magic(self, name: str, line: str, cell: str, *args: Any, **kwargs: Any) -> None:
        if name in self._RUNS:
            exec(compile(_transform(cell), "<cell magic>", "exec"), self._ns)

    def system(self, *args: Any, **kwargs: Any) -> None:
        return None

    def getoutput(self, *args: Any, **kwargs: Any) -> List[str]:
        return []

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None
