"""``qkv grade ASSIGNMENT``: grade a class's submissions out of the students' reach.

The official autograding step (``book/instructors.md``), in place of ``nbgrader autograde``:
each submission's code runs in a fresh sandbox, only data crosses, this process judges and
alone writes ``gradebook.db`` and ``autograded/`` (see :mod:`qkv_course.grade`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..usage import UsageError, require_folder


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``qkv grade``."""
    parser.add_argument("assignment", metavar="ASSIGNMENT", help="the assignment, e.g. 04-scaling")
    parser.add_argument("--course", default=".", metavar="DIR",
                        help="the nbgrader course folder (default: the current folder)")
    parser.add_argument("--student", action="append", metavar="ID",
                        help="grade only this student (repeat for several)")
    parser.add_argument("--jobs", type=int, default=2, metavar="N",
                        help="submissions graded at once, each in its own sandbox (default 2)")
    parser.add_argument("--shard", metavar="K/N",
                        help="grade only shard K of N (students split by a hash of their id); then "
                        "--merge writes the gradebook")
    parser.add_argument("--force", action="store_true",
                        help="grade again submissions already graded (default: only new or "
                        "changed ones)")
    parser.add_argument("--merge", action="store_true",
                        help="grade nothing: write the gradebook and autograded/ from every "
                        "shard's result files")
    parser.add_argument("--compare", action="store_true",
                        help="grade, but leave gradebook.db as nbgrader autograde wrote it, and "
                        "print one line per test whose score differs from it")
    parser.add_argument("--timeout", type=float, default=60, metavar="S",
                        help="seconds one cell, or one call of a student's function, may run "
                        "before it is interrupted (default 60)")
    parser.add_argument("--submission-timeout", type=float, default=None, metavar="S",
                        help="seconds one submission may take in all, its cells and every call "
                        "(default: 120, plus one --timeout, plus a minute for each call of a "
                        "check that trains or samples); past it, it scores what it had passed")
    parser.add_argument("--unsafe", action="store_true",
                        help="run student code WITHOUT the sandbox (where bubblewrap cannot "
                        "run); never on code you distrust")


def run(args: argparse.Namespace) -> int:
    """Grade the assignment; print one line per submission and a summary."""
    from . import judge
    from .jobs import parse_shard
    from .run import main

    course = require_folder(args.course, "--course").resolve()
    if not args.jobs >= 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    for option, value in (("--timeout", args.timeout),
                           ("--submission-timeout", args.submission_timeout)):
        if value is not None and not value > 0:  # NaN too
            raise UsageError(f"{option} must be positive, got {value}")
    shard = parse_shard(args.shard)
    if args.merge and (shard or args.student or args.force):
        raise UsageError("--merge grades nothing: give it without --shard, --student or --force")
    if args.compare and (args.merge or shard):
        raise UsageError("--compare grades the whole class against nbgrader's gradebook: give it "
                         "without --merge or --shard")
    limits = judge.Timeouts(call_s=args.timeout, value_s=min(args.timeout, 10.0))
    return main(Path(course), args.assignment, students=args.student, jobs=args.jobs,
                shard=shard, force=args.force, unsafe=args.unsafe, merge=args.merge,
                compare=args.compare,
                limits=limits, submission_s=args.submission_timeout)
