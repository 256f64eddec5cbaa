"""The one command that regenerates every generated file of the repository, and its check.

Usage (from anywhere in a checkout)::

    python -m qkv_course generate          # rewrite every generated file that is stale
    python -m qkv_course generate --check  # write nothing; exit 1 naming each stale file

Each kind of generated file has a *generator*: a function ``targets(root) -> {path: text}``
giving, for every file it owns, the exact text the file must hold. ``generate`` writes the files
that differ and deletes the ones a generator owns (by its ``owns`` glob) that no source produces any
more; ``--check`` reports both. The tests run the check, so a stale file fails CI naming this
command.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Sequence

from .config import ROOT
from .outdir import write_text

COMMAND = "python -m qkv_course generate"


@dataclass(frozen=True)
class Generator:
    """What one generator makes: ``targets(root)`` and the globs of the files it owns."""

    name: str
    module: str  # a module of this package with a ``targets(root)`` function
    owns: Sequence[str]  # globs (from the root) of every file it generates

    def targets(self, root: Path) -> Dict[Path, str]:
        fn: Callable[[Path], Dict[Path, str]] = importlib.import_module(self.module).targets
        return fn(root)


# Every generator, in the order they run: the toc first (the Colab copies follow it), solutions
# before exercises (exercises are made from solutions).
GENERATORS: List[Generator] = [
    Generator("toc", "qkv_course.toc", owns=["_toc.yml"]),
    Generator("solutions", "qkv_course.assignments", owns=["solutions/*/*.ipynb"]),
    Generator("exercises", "qkv_course.exercises", owns=["exercises/*/*.ipynb"]),
    Generator("colab", "qkv_course.colab", owns=["book/[0-9][0-9]-*.ipynb"]),
    Generator("exports", "qkv_course.exports", owns=["src/qkv/__init__.py", "src/qkv/checks/__init__.py"]),
    Generator("concept-map", "qkv_course.concept_map", owns=["CONTRIBUTING.md"]),
]


def _orphans(gen: Generator, root: Path, wanted: Dict[Path, str]) -> List[Path]:
    """Files the generator owns (by its globs) that no source produces any more."""
    return [path for pattern in gen.owns for path in sorted(root.glob(pattern))
            if path not in wanted and ".ipynb_checkpoints" not in path.parts]


def stale(root: Path = ROOT, generators: Sequence[Generator] | None = None) -> List[str]:
    """One line per generated file that is missing, differs, or has no source any more."""
    problems = []
    for gen in GENERATORS if generators is None else generators:
        wanted = gen.targets(root)
        for path, text in sorted(wanted.items()):
            rel = path.relative_to(root)
            if not path.is_file():
                problems.append(f"{rel} is missing ({gen.name})")
            elif path.read_text() != text:
                problems.append(f"{rel} is stale ({gen.name})")
        problems += [f"{path.relative_to(root)} has no source any more ({gen.name})"
                     for path in _orphans(gen, root, wanted)]
    return problems


def write(root: Path = ROOT, generators: Sequence[Generator] | None = None) -> List[str]:
    """Bring every generated file up to date; return what was written or removed."""
    done = []
    for gen in GENERATORS if generators is None else generators:
        wanted = gen.targets(root)
        for path, text in sorted(wanted.items()):
            if not path.is_file() or path.read_text() != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_text(path, text)  # whole or not at all, even on Ctrl-C
                done.append(f"wrote {path.relative_to(root)}")
        for path in _orphans(gen, root, wanted):
            path.unlink()
            done.append(f"removed {path.relative_to(root)} (no source any more)")
    return done


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qkv_course generate",
                                     description="Regenerate every generated file from its source.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming every stale generated file")
    parser.add_argument("--only", choices=[g.name for g in GENERATORS], action="append",
                        help="limit to one kind of generated file (repeatable)")
    args = parser.parse_args(argv)
    chosen = [g for g in GENERATORS if not args.only or g.name in args.only]
    try:
        return _run(chosen, args.check)
    except (ValueError, OSError) as e:  # a broken source (SourceError is a ValueError), unreadable text
        print(f"{COMMAND}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{COMMAND}: interrupted; each file is either as it was or fully written",
              file=sys.stderr)
        return 130


def _run(chosen: Sequence[Generator], check: bool) -> int:
    """``--check`` (report stale files, exit 1 if any) or write them; the exit status."""
    if check:
        problems = stale(ROOT, chosen)
        for line in problems:
            print(line)
        if problems:
            print(f"run `{COMMAND}` and commit the result")
        return 1 if problems else 0
    for line in write(ROOT, chosen):
        print(line)
    return 0
