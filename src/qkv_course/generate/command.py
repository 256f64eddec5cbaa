"""The one command that regenerates every generated file of the repository, and its check.

Usage (from anywhere in a checkout)::

    python -m qkv_course generate          # rewrite every generated file that is stale
    python -m qkv_course generate --check  # write nothing; exit 1 naming each stale file
    python -m qkv_course generate --force  # also replace generated files edited by hand

Each kind of generated file has a *generator*: a function ``targets(root) -> {path: text}``
giving, for every file it owns, the exact text the file must hold. ``generate`` writes the files
that differ and deletes the ones a generator owns (by its ``owns`` glob) that no source produces any
more; ``--check`` reports both. The tests run the check, so a stale file fails CI naming this
command.

Nothing a user made is lost. ``generate`` replaces or removes a file only when its text is
generate's own: as git holds it (committed in ``HEAD`` or staged), or as ``generate`` last wrote it
(:data:`RECORD`, an untracked record of each file's SHA-256 written by every run). Everything else
is left alone:

- a generated file edited by hand (say, a student's work in ``exercises/05-multi-head/``) is kept;
  ``generate`` writes the rest, names each kept file on stderr and exits 2: move it away, or pass
  ``--force`` to replace it. ``--check`` still reports it stale (or as having no source any more).
- a file in a generated folder that no source makes and that git and the record do not know (a
  scratch ``solutions/06-masking/mine.ipynb``) is not generated: never removed, even with
  ``--force``; both modes name it ("generate leaves it alone") and it fails nothing. A fresh
  clone has none, so CI's ``--check`` judges exactly the committed files, and a generated file
  whose source was removed is committed, so it is reported.
- every run that writes records what it made, so editing a source twice before committing works.
- a file whose generator rewrites only a marked block of hand-written text (the export lists of
  ``__init__.py``, CONTRIBUTING's concept map) is always written: the text outside the block is
  kept by construction; the block itself says "do not edit".
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from .. import outdir
from ..config import ROOT

COMMAND = "python -m qkv_course generate"
#: The record of what ``generate`` wrote (git-ignored), in the repository's root.
RECORD = ".qkv-generated.json"


@dataclass(frozen=True)
class Generator:
    """What one generator makes: ``targets(root)`` and the globs of the files it owns."""

    name: str
    module: str  # a module of this package with a ``targets(root)`` function
    owns: Sequence[str]  # globs (from the root) of every file it generates
    splices: bool = False  # rewrites only a marked block of a hand-written file, keeping the rest

    def targets(self, root: Path) -> Dict[Path, str]:
        fn: Callable[[Path], Dict[Path, str]] = importlib.import_module(self.module).targets
        return fn(root)


# Every generator, in the order they run: the toc first (the Colab copies follow it), solutions
# before exercises (exercises are made from solutions).
GENERATORS: List[Generator] = [
    Generator("toc", "qkv_course.generate.toc", owns=["_toc.yml"]),
    Generator("solutions", "qkv_course.generate.assignments", owns=["solutions/*/*.ipynb"]),
    Generator("exercises", "qkv_course.generate.exercises", owns=["exercises/*/*.ipynb"]),
    Generator("points", "qkv_course.generate.points", owns=["solutions/POINTS.md"]),
    Generator("colab", "qkv_course.generate.colab", owns=["book/[0-9][0-9]-*.ipynb"]),
    Generator("exports", "qkv_course.generate.exports", owns=["src/qkv/__init__.py", "src/qkv/checks/__init__.py"],
              splices=True),
    Generator("concept-map", "qkv_course.generate.concept_map", owns=["CONTRIBUTING.md"], splices=True),
]

# What a file a generator owns is, compared with what its source makes.
FRESH, MISSING, STALE = "fresh", "missing", "stale"
ORPHAN = "orphan"  # generated once (git or the record knows it), no source makes it any more
FOREIGN = "not generated"  # no source makes it, and git and the record never heard of it


@dataclass(frozen=True)
class File:
    """One file a generator owns: its state, and whether replacing or removing it loses nothing."""

    rel: str  # the path from the root, with "/"
    gen: str
    state: str  # FRESH, MISSING, STALE, ORPHAN or FOREIGN
    text: Optional[str]  # what it must hold; None when no source makes it
    ours: bool  # absent, or generate's own text (as git holds it, or as generate last wrote it)

    def problem(self) -> Optional[str]:
        """The ``--check`` line, when the file is not as its source makes it."""
        what = {MISSING: "is missing", STALE: "is stale", ORPHAN: "has no source any more"}
        return f"{self.rel} {what[self.state]} ({self.gen})" if self.state in what else None

    def note(self) -> str:
        """The line of a FOREIGN file, in both modes: not a problem, and never touched."""
        return f"{self.rel} is not generated (no source makes it): generate leaves it alone"

    def kept(self) -> str:
        """Why ``generate`` left a file it should change, and how to proceed."""
        verb, source = (("replace", "its source makes other text") if self.text is not None
                        else ("remove", "no source makes it any more"))
        return (f"{COMMAND}: kept {self.rel}: {source}, but it was edited by hand (it is neither as "
                f"git holds it nor as generate last wrote it); move it away and rerun, or pass "
                f"--force to {verb} it")


def _orphans(gen: Generator, root: Path, wanted: Dict[Path, str]) -> List[Path]:
    """Files the generator owns (by its globs) that no source produces any more."""
    return [path for pattern in gen.owns for path in sorted(root.glob(pattern))
            if path not in wanted and ".ipynb_checkpoints" not in path.parts]


def _git_ids(root: Path) -> Dict[str, Set[str]]:
    """Git's object ids of the files under ``root`` as committed (``HEAD``) and as staged.

    Returns:
        Path from ``root`` -> its ids; empty where git, the repository or its history is missing
        (a download, a test's copy): then only the record tells which files are generate's.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE")}
    found: Dict[str, Set[str]] = {}
    # ls-tree: "<mode> blob <id>\t<path>"; ls-files -s: "<mode> <id> <stage>\t<path>"; both
    # relative to the working directory, so a course inside a larger repository works too.
    for args, field in ((["ls-tree", "-r", "-z", "HEAD"], 2), (["ls-files", "-s", "-z"], 1)):
        try:
            out = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, check=True,
                                 encoding="utf-8", errors="surrogateescape", timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            continue  # no git, not a repository, or no commit yet
        for entry in filter(None, out.split("\0")):
            meta, _, path = entry.partition("\t")
            found.setdefault(path, set()).add(meta.split()[field])
    return found


def _git_id(data: bytes, length: int) -> str:
    """The id git gives a blob of ``data`` (SHA-1, or SHA-256 for 64-digit ids)."""
    h = hashlib.sha1() if length == 40 else hashlib.sha256()
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


class _Known:
    """Which files are generate's own: those git holds as they are, and those generate wrote."""

    def __init__(self, root: Path):
        self.root = root
        self.git = _git_ids(root)
        self.record = outdir.recorded(root, RECORD)

    def heard_of(self, rel: str) -> bool:
        return rel in self.git or rel in self.record

    def ours(self, rel: str) -> bool:
        path = self.root / rel
        if not path.is_file():
            return not path.exists()
        if self.record.get(rel) == outdir.digest(path):
            return True
        ids = self.git.get(rel, set())
        data = path.read_bytes() if ids else b""
        return any(_git_id(data, len(i)) == i for i in ids)


def survey(root: Path = ROOT, generators: Sequence[Generator] | None = None) -> List[File]:
    """Every file the generators own or make, each with its state (runs every generator once)."""
    known = _Known(root)
    return [f for gen in (GENERATORS if generators is None else generators)
            for f in _survey(gen, root, known)]


def _survey(gen: Generator, root: Path, known: _Known) -> List[File]:
    """The files one generator owns or makes, each with its state."""
    files, wanted = [], gen.targets(root)
    for path, text in sorted(wanted.items()):
        rel = path.relative_to(root).as_posix()
        state = (MISSING if not path.is_file() else
                 FRESH if path.read_bytes() == text.encode("utf-8") else STALE)
        files.append(File(rel, gen.name, state, text, state != STALE or gen.splices or known.ours(rel)))
    for path in _orphans(gen, root, wanted):
        rel = path.relative_to(root).as_posix()
        state = ORPHAN if known.heard_of(rel) else FOREIGN
        files.append(File(rel, gen.name, state, None, state == ORPHAN and known.ours(rel)))
    return files


def stale(root: Path = ROOT, generators: Sequence[Generator] | None = None) -> List[str]:
    """One line per generated file that is missing, differs, or has no source any more."""
    return [line for f in survey(root, generators) if (line := f.problem())]


def write(root: Path = ROOT, generators: Sequence[Generator] | None = None,
          force: bool = False) -> Tuple[List[str], List[str]]:
    """Bring every generated file up to date, keeping a user's files (see the module's doc).

    Args:
        root: the repository.
        generators: those to run (all by default).
        force: also replace or remove generated files edited by hand (never a FOREIGN file).

    Returns:
        What was written, removed or left alone; and one line per file kept (edited by hand).
    """
    done: List[str] = []
    kept: List[str] = []
    ours: List[str] = []  # as generate made them now (or removed): the record's new entries
    known = _Known(root)
    try:
        for gen in GENERATORS if generators is None else generators:
            for f in _survey(gen, root, known):  # after the generators before it wrote (the toc)
                if f.state == FOREIGN:
                    done.append(f.note())
                elif f.state != FRESH and not (f.ours or force):
                    kept.append(f.kept())
                elif f.text is None:
                    (root / f.rel).unlink()
                    done.append(f"removed {f.rel} (no source any more)")
                    ours.append(f.rel)
                else:
                    if f.state != FRESH:
                        (root / f.rel).parent.mkdir(parents=True, exist_ok=True)
                        outdir.write_text(root / f.rel, f.text)  # whole or not at all, even on Ctrl-C
                        done.append(f"wrote {f.rel}")
                    ours.append(f.rel)
    finally:  # even when a later file fails, what was written counts as generate's next time
        if ours:
            outdir.record(root, ours, RECORD)  # a removed file is forgotten
    return done, kept


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qkv_course generate",
                                     description="Regenerate every generated file from its source.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming every stale generated file")
    parser.add_argument("--force", action="store_true",
                        help="also replace (or remove) generated files that were edited by hand")
    parser.add_argument("--only", choices=[g.name for g in GENERATORS], action="append",
                        help="limit to one kind of generated file (repeatable)")
    args = parser.parse_args(argv)
    chosen = [g for g in GENERATORS if not args.only or g.name in args.only]
    try:
        return _run(chosen, args.check, args.force)
    except (ValueError, OSError) as e:  # a broken source (SourceError is a ValueError), unreadable text
        print(f"{COMMAND}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{COMMAND}: interrupted; each file is either as it was or fully written",
              file=sys.stderr)
        return 130


def _run(chosen: Sequence[Generator], check: bool, force: bool = False) -> int:
    """``--check`` (report stale files, exit 1 if any) or write them (exit 2 if one was kept)."""
    if check:
        files = survey(ROOT, chosen)
        problems = [line for f in files if (line := f.problem())]
        for line in problems:
            print(line)
        for f in files:
            if f.state == FOREIGN:
                print(f.note())
        if problems:
            print(f"run `{COMMAND}` and commit the result")
        return 1 if problems else 0
    done, kept = write(ROOT, chosen, force)
    for line in done:
        print(line)
    for line in kept:
        print(line, file=sys.stderr)
    return 2 if kept else 0
