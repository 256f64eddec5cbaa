"""``python -m qkv_course generate [--check] [--force]`` (see :mod:`qkv_course.generate.command`);
any other verb is the ``qkv`` command's: ``python -m qkv_course progress`` is ``qkv progress``."""

import sys

from .cli import SUBCOMMANDS, main as qkv_main
from .generate.command import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["generate"]:
        sys.exit(main(args[1:]))
    if args[:1] and args[0] in SUBCOMMANDS:
        sys.exit(qkv_main(args))
    # bad usage: exit status 2, as argparse's
    print("usage: python -m qkv_course generate [--check] [--force] [--only KIND]\n"
          f"   or: python -m qkv_course {{{','.join(SUBCOMMANDS)}}} ... (the qkv command)",
          file=sys.stderr)
    sys.exit(2)
