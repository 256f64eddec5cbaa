"""nbgrader's API on a course directory, as the generators, tests and benchmarks drive it.

nbgrader is imported when :func:`nbgrader_api` is called, never when this module is.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Iterator, Optional


@contextlib.contextmanager
def nbgrader_environment() -> Iterator[None]:
    """Put this Python's ``bin`` first on ``PATH`` for the duration (nbgrader runs ``alembic``)."""
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + old
    try:
        yield
    finally:
        os.environ["PATH"] = old


def nbgrader_api(course: Path, timeout: Optional[float] = None, log_level: str = "ERROR"):
    """nbgrader's API on a course directory.

    Args:
        course: a folder holding a copy of the repository's ``nbgrader_config.py``.
        timeout: per-cell time limit while autograding, instead of the configured one.
        log_level: the least severe nbgrader message to log.

    Returns:
        An ``nbgrader.apps.NbGraderAPI``.
    """
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    cfg.Application.log_level = log_level
    if timeout is not None:
        cfg.Execute.timeout = timeout
    return NbGraderAPI(CourseDirectory(config=cfg), config=cfg)
