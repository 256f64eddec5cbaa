"""The assignments' conceptual questions: :func:`check_question` and what it stands on.

- :mod:`.kinds`: a question's kinds (:class:`~.kinds.Choice`, :class:`~.kinds.Number`, and
  :class:`~.kinds.Computed`, whose numbers come from the student's seed) and how an answer to
  one is judged; the right answers are salted hashes, never plain text;
- :mod:`.early`, :mod:`.late`: the banks, the questions of assignments 1 to 5 and 6 to 11;
- :mod:`.record`: the first answer to each question, recorded beside the notebook (the one
  graded);
- :mod:`.judge`: ``check_question`` in the kernel and :func:`~.judge.judge_first` for the
  trusted grader (data in, data out).
"""

from .judge import QUESTIONS, as_recorded, check_question, judge_first

__all__ = ["check_question"]

_ = (QUESTIONS, as_recorded, judge_first)  # public names of the sub-package, used by qkv.checks.grading
