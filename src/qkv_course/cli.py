"""The ``qkv`` command: one entry point for students and instructors.

Each subcommand lives in its own module and is imported only when it runs, so ``qkv --help``
is instant and nothing imports nbgrader until a subcommand needs it. A subcommand raises
:class:`~qkv_course.nbgrader.graded.UsageError` for bad usage: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from .usage import UsageError

# name -> (module with add_arguments(parser) and run(args) -> int, one-line help)
SUBCOMMANDS = {
    "progress": ("qkv_course.progress.command", "students: run notebooks' answers and tests, report what passes"),
    "report": ("qkv_course.report.command", "instructors: which named mistakes a class makes, after autograding"),
    "grade": ("qkv_course.grade.command", "instructors: grade submissions in a sandbox, write "
              "nbgrader's gradebook (in place of nbgrader autograde)"),
    "gradescope": ("qkv_course.gradescope.command", "instructors: a Gradescope autograder (qkv grade's engine)"),
}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="qkv", description="The qkv course's command.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in SUBCOMMANDS:
        args = parser.parse_args(argv)  # prints help or the error for an unknown command
        parser.print_help()
        return 2
    module = importlib.import_module(SUBCOMMANDS[argv[0]][0])
    subparser = argparse.ArgumentParser(prog=f"qkv {argv[0]}", description=SUBCOMMANDS[argv[0]][1])
    module.add_arguments(subparser)
    args = subparser.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except UsageError as e:  # bad usage is one clear line, never a traceback
        print(f"qkv {argv[0]}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: outputs are written whole or not at all (qkv_course.outdir)
        # Every output is written whole or not at all (qkv_course.outdir, grade.results).
        print(f"qkv {argv[0]}: interrupted; the files written so far are complete, the others "
              "as they were (run the command again to finish)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
