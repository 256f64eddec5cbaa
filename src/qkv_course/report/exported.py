"""Which ``results.json`` files under a folder are the autograder's, not a student's upload.

``qkv gradescope``'s autograder writes one file per submission, where Gradescope asks
(``/autograder/results/results.json``, beside ``/autograder/submission/``, the student's
upload). A folder of them is read by ``qkv report``: one per submission folder
(``export/submission_<id>/results.json``), or the autograder's own ``results/`` folder at any
depth (``gs/04-scaling/ann/results/results.json``). A student's upload keeps its folders, so a
``results.json`` *inside* a submission's folder (``submission_<id>/extra/results.json``,
``submission/results.json``) is the student's own file, and never read: it could claim any
classmate's name and a later time. Where Gradescope's export lists each submission's
submitters (``submission_metadata.yml`` at the top), a record must name one of the submitters
of the folder it is in.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, Iterator, Optional, Set, Tuple

METADATA = "submission_metadata.yml"  # Gradescope's export: submission folder -> submitters


def _upload(name: str) -> bool:
    """A folder that holds what a student uploaded (Gradescope's ``submission_<id>`` in an
    export, ``submission`` in the autograder's own tree)."""
    return name == "submission" or name.startswith("submission_")


def where_autograder_writes(rel: Tuple[str, ...]) -> bool:
    """Whether a ``results.json`` at ``rel`` (its path's parts below the folder read) is where
    the autograder writes one: at the top of a submission's folder (``submission_<id>`` at any
    depth, an export unzipped into a folder of its own; or any folder right below the one
    read), or in a ``results`` folder; and in no folder of a student's upload but its own
    submission folder."""
    if len(rel) > 2 and rel[-2] != "results" and not _upload(rel[-2]):
        return False
    return not any(_upload(part) for part in rel[:-2])


def results_files(folder: Path, skip: str, say: bool = False) -> Iterator[Path]:
    """Every ``results.json`` under ``folder`` where the autograder writes one (outside
    ``skip``, ``qkv grade``'s own folder); each other one is never read (and said on stderr
    when ``say``)."""
    for path in sorted(folder.rglob("results.json")):
        rel = path.relative_to(folder).parts
        if skip in rel:
            continue
        if where_autograder_writes(rel):
            yield path
        elif say:
            print(f"qkv report: skipped {path}: not where the autograder writes its results "
                  "(a results.json inside a student's upload is theirs, not a grade)",
                  file=sys.stderr)


def submitters(folder: Path) -> Optional[Dict[str, Set[str]]]:
    """``{submission folder: {sid, email, ...}}`` from the export's ``submission_metadata.yml``
    (None: there is none, or it cannot be read, which is said)."""
    path = folder / METADATA
    if not path.is_file():
        return None
    try:
        import yaml

        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        found: Dict[str, Set[str]] = {}
        for name, entry in data.items():
            people = entry.get(":submitters") or entry.get("submitters") or []
            found[str(name)] = {str(p.get(key)) for p in people for key in
                                (":sid", ":email", "sid", "email") if p.get(key)}
        return found
    except Exception as e:  # noqa: BLE001 (said; the records are then read without it)
        print(f"qkv report: {path} could not be read ({type(e).__name__}): the records' "
              "students are not checked against Gradescope's submitters", file=sys.stderr)
        return None


def claims_another(path: Path, student: str,
                   known: Dict[Path, Optional[Dict[str, Set[str]]]]) -> bool:
    """Whether the record at ``path`` names a student who is not a submitter of its
    submission folder (``submission_<id>``), as the export's metadata beside that folder lists
    them (no metadata: it cannot tell). ``known`` keeps each export's metadata, read once."""
    folder = path.parent
    if not _upload(folder.name):
        return False
    if folder.parent not in known:
        known[folder.parent] = submitters(folder.parent)
    who = known[folder.parent]
    return who is not None and student not in who.get(folder.name, set())
