"""What the student's code writes to stderr during a check is shown on stdout instead.

nbgrader scores a test cell zero when anything in it writes to stderr, so a right
answer that prints a progress bar (``tqdm``), a warning, a log line or a debug print to
stderr would lose its points, and the student would not be told why. While a check
runs the student's code, :func:`captured` catches all of it:

- Python's ``sys.stderr`` (``print(..., file=sys.stderr)``, ``tqdm``, ``logging``'s
  last-resort handler), and the stream of every ``logging.StreamHandler`` writing to
  the original ``sys.stderr`` (``logging.basicConfig()`` in an earlier cell);
- file descriptor 2 itself (``os.write(2, ...)``, C libraries; in a Jupyter kernel it
  is a pipe to the notebook's stderr or to the kernel's log), redirected with
  :func:`os.dup2` to a temporary file and put back afterwards, whatever happens;
- warnings, which the harness records (:func:`._run.call_guarded`) and hands over.

Afterwards, what was caught is printed on stdout after a short note, so the cell still
shows it but scores.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import warnings
from typing import Iterator, List

__all__ = ["warnings_to_stdout"]

_dup, _dup2, _close = os.dup, os.dup2, os.close
_SHOWN = 2000  # characters of the caught text shown at most (a progress bar repeats itself)


class Caught:
    """What the student's code wrote to stderr during one check (see :func:`captured`)."""

    def __init__(self) -> None:
        self.text = ""
        self.warnings: List[str] = []

    def add_warnings(self, caught: list) -> None:
        """Keep the recorded warnings (``warnings.catch_warnings(record=True)``), once each."""
        for w in caught:
            line = f"{w.category.__name__}: {w.message}"
            if line not in self.warnings:
                self.warnings.append(line)

    def show(self, name: str) -> None:
        """Print what was caught on stdout, after a note; nothing when nothing was caught."""
        parts = [p for p in (self.text.strip("\n"), "\n".join(self.warnings)) if p.strip()]
        if not parts:
            return
        text = "\n".join(parts)
        if len(text) > _SHOWN:
            text = "...\n" + text[-_SHOWN:]
        print(f"note: your {name} wrote to stderr (or warned) while the check ran; it is shown "
              f"here instead, because nbgrader scores a test cell that writes to stderr as "
              f"failed:\n{text}", file=sys.stdout)


def _stderr_handlers(original) -> list:
    """``logging`` handlers that write to ``original`` (the stderr of the notebook)."""
    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    # After warnings_to_stdout() in a kernel, sys.stderr is sys.stdout: not stderr any more.
    streams = [sys.__stderr__] + ([original] if original is not sys.stdout else [])
    return [h for lg in loggers for h in lg.handlers
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
            and not isinstance(getattr(type(h), "stream", None), property)  # follows sys.stderr
            and any(h.stream is s for s in streams)]


@contextlib.contextmanager
def _fd2(file) -> Iterator[bool]:
    """File descriptor 2 pointed at ``file`` while inside; whether that could be done."""
    try:
        saved = _dup(2)
    except OSError:  # no fd 2 at all (some embedded interpreters): nothing to catch
        yield False
        return
    try:
        _dup2(file.fileno(), 2)
        yield True
    finally:
        _dup2(saved, 2)
        _close(saved)


@contextlib.contextmanager
def _no_tqdm_monitor() -> Iterator[None]:
    """tqdm's monitor thread off while inside (where tqdm is imported): the guard refuses
    threads, and a progress bar in a right answer must not cost its points."""
    std = sys.modules.get("tqdm.std")
    cls = getattr(std, "tqdm", None)
    saved = getattr(cls, "monitor_interval", None)
    if saved is not None:
        cls.monitor_interval = 0
    try:
        yield
    finally:
        if saved is not None:
            cls.monitor_interval = saved


@contextlib.contextmanager
def captured() -> Iterator[Caught]:
    """Catch stderr, Python's and file descriptor 2's, while inside (see the module's docstring).

    Everything is put back on the way out, also when the student's code raised.
    """
    caught = Caught()
    original = sys.stderr
    for stream in (original, sys.__stderr__):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 (a closed or odd stream: nothing to flush)
            pass
    with tempfile.TemporaryFile(mode="w+b") as raw, _fd2(raw) as on_fd, _no_tqdm_monitor():
        stream = open(2 if on_fd else raw.fileno(), "w", buffering=1, encoding="utf-8",
                      errors="replace", closefd=False)
        handlers = _stderr_handlers(original)
        for h in handlers:
            h.stream = stream
        sys.stderr = stream
        try:
            yield caught
        finally:
            sys.stderr = original
            for h in handlers:
                h.stream = original
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 (the student's code may have closed it)
                pass
            raw.seek(0)
            caught.text = raw.read().decode("utf-8", errors="replace")


def warnings_to_stdout() -> None:
    """Show warnings, and in a Jupyter kernel everything sent to stderr, as ordinary output.

    nbgrader scores a test cell that writes anything to stderr as failed, so a harmless
    warning, progress bar or debug print from a student's answer would cost its points,
    also when a test cell calls the answer outside a check. The set-up cell of every
    exercise calls this: warnings are written to stdout, and in a Jupyter kernel so are
    Python's ``sys.stderr`` and file descriptor 2 (``os.write(2, ...)``, C libraries),
    which the kernel would otherwise show as stderr. Everything still shows.
    """
    def show(message, category, filename, lineno, file=None, line=None):
        text = warnings.formatwarning(message, category, filename, lineno, line)
        sys.stdout.write(text)

    warnings.showwarning = show
    if type(sys.stderr).__module__.split(".")[0] != "ipykernel":
        return  # a terminal or a test run: its stderr is not graded
    sys.stderr.flush()
    sys.stderr = sys.stdout
    try:
        _dup2(1, 2)  # the kernel forwards fd 1 to the notebook as stdout
    except OSError:
        pass
