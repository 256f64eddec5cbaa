"""``qkv report COURSE_DIR --out DIR``: which mistakes a class made, after ``qkv grade``.

Reads the result files ``qkv grade`` wrote (``COURSE_DIR/qkv-grades/<student>/<assignment>/``:
each test's status and the mistake the check named, as data) and, for a submission that has
none (graded by ``nbgrader autograde``), ``COURSE_DIR/autograded/<student>/<assignment>/*.ipynb``
(their test cells' outputs hold the checks' messages). ``COURSE_DIR`` may also be (or hold) a
folder of Gradescope ``results.json`` files written by ``qkv gradescope``'s autograder (any
depth, e.g. one folder per submission): each keeps the whole record under
``extra_data.qkv``, read as a result file of ``qkv grade``. It writes, into ``DIR``:

- ``mistakes.csv``: ``assignment,test,mistake,students``: how many students made each named
  mistake in each test, plus ``unnamed failure`` (a failure no check recognised),
  ``not written yet`` (the answer still raises NotImplementedError), ``timeout`` and
  ``error`` (another exception, e.g. a NameError when the answer is missing); sorted by
  assignment, test, then count (most first);
- ``report.html``: one page, working offline: per assignment, a bar chart of those counts
  and each test's pass rate;
- ``similarity.html``: pairs of submissions with near-identical answer code, and answers that
  match the public model solution or reference source, both codes side by side
  (:mod:`.similarity`).

Nothing in ``COURSE_DIR`` is written, moved or deleted.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import outdir
from ..usage import UsageError, require_folder
from . import mistakes

#: What ``qkv report`` writes into ``--out``.
OUTPUTS = ("mistakes.csv", "report.html", "similarity.html")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``qkv report``."""
    parser.add_argument("course_dir", metavar="COURSE_DIR",
                        help="the nbgrader course folder (holding qkv-grades/ or autograded/), "
                             "or a folder of Gradescope results.json files")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="where to write mistakes.csv, report.html and similarity.html "
                             "(created if needed)")
    outdir.add_force_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Read the autograded notebooks, write the CSV and the page; 0 on success."""
    course = require_folder(args.course_dir, "COURSE_DIR")
    autograded = course / "autograded"
    if not (autograded.is_dir() or (course / mistakes.GRADES).is_dir()
            or any(mistakes.gradescope_files(course))):
        raise UsageError(f"{course} has no autograded/ folder (nor qkv-grades/, nor Gradescope "
                         "results.json files): run `qkv grade <assignment>` in it first")
    out = outdir.prepare(Path(args.out), OUTPUTS, args.force)  # before the work, not after
    # A folder of Gradescope results: its records are read once, for the counts and the
    # copies alike (a course's copies are read from its autograded notebooks).
    records = None if mistakes.is_course(course) else mistakes.gradescope_records(course)
    assignments = mistakes.summarise(mistakes.read_course(course, autograded, records))
    if not assignments:
        raise UsageError(f"{autograded} holds no autograded notebooks yet")
    from .page import write_html  # matplotlib: only once there is something to draw

    try:
        with outdir.atomic(out / "mistakes.csv") as tmp:
            mistakes.write_csv(tmp, assignments)
        with outdir.atomic(out / "report.html") as tmp:
            write_html(tmp, assignments)
        from . import similarity  # copydetect: only when a report is made

        codes = (similarity.codes_in(autograded) if records is None else
                 {a: {s: similarity.record_code(r) for s, r in students.items()}
                  for a, students in records.items()})
        with outdir.atomic(out / "similarity.html") as tmp:
            similarity.write_html(tmp, similarity.find(codes))
        outdir.record(out, OUTPUTS)
    except OSError as e:
        raise UsageError(f"cannot write to {out}: {e.strerror or e}") from None
    print(f"{len(assignments)} assignment(s), "
          f"{len({s for a in assignments for s in a.students})} student(s): wrote "
          f"{out / 'mistakes.csv'}, {out / 'report.html'} and {out / 'similarity.html'}")
    return 0
