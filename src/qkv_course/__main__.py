"""``python -m qkv_course generate [--check] [--force]``: see :mod:`qkv_course.generate.command`."""

import sys

from .generate.command import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] != ["generate"]:  # bad usage: exit status 2, as argparse's
        print("usage: python -m qkv_course generate [--check] [--force] [--only KIND]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(args[1:]))
