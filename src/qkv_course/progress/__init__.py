"""``qkv progress``, for students: run their notebooks and say which tests pass, as the
autograder would.

- :mod:`.command`: the ``qkv progress`` command: find the assignment notebooks, run each in a
  fresh kernel, print the report;
- :mod:`.notebook`: :func:`in_notebook`, the same report from inside a running notebook
  (students import it by name: ``from qkv_course.progress import in_notebook``);
- :mod:`.report`: the report's lines, shared by both.
"""

from .notebook import Summary, in_notebook

__all__ = ["Summary", "in_notebook"]
