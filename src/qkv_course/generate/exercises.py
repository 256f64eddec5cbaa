"""The students' notebooks, ``exercises/<NN-name>/``: nbgrader's release of the solutions.

:func:`targets` renders every solution notebook afresh from its ``.md`` (:mod:`.assignments`)
and runs nbgrader's ``generate_assignment`` on those, in a temporary course directory with the
repository's ``nbgrader_config.py``: so one ``--check`` catches a stale link anywhere between a
source and a student's notebook. Running ``nbgrader generate_assignment`` by hand on the
committed solutions gives the same files (instructors do, to fill their gradebook).

nbgrader is imported lazily, when a generator or a test runs it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Dict

from ..config import ROOT
from ..nbgrader.api import nbgrader_api, nbgrader_environment
from . import assignments


def targets(root: Path = ROOT) -> Dict[Path, str]:
    """Every file of ``exercises/``, as ``generate_assignment`` makes it from fresh solutions.

    The whole assignment folder goes into the course, sources included, so a source that
    nbgrader copied into the release would show up here (as a file the check wants); but of its
    notebooks only those a source makes: a scratch notebook someone keeps in ``solutions/<a>/``
    is never released to students.
    """
    solutions = assignments.targets(root)
    out: Dict[Path, str] = {}
    with tempfile.TemporaryDirectory() as tmp, nbgrader_environment():
        course = Path(tmp)
        shutil.copy(root / "nbgrader_config.py", course)
        folders = sorted({path.parent for path in solutions})
        for folder in folders:
            shutil.copytree(folder, course / "solutions" / folder.name,
                            ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints",
                                                          "qkv_answers.json"))
        for path, text in solutions.items():
            (course / "solutions" / path.parent.name / path.name).write_text(text)
        api = nbgrader_api(course)
        for folder in folders:
            result = api.generate_assignment(folder.name, force=True, create=True)
            if not result["success"]:
                raise RuntimeError(f"nbgrader generate_assignment {folder.name} failed: "
                                   f"{result.get('error') or result.get('log')}")
        release = course / "exercises"
        for path in sorted(release.glob("*/**/*")):
            if path.is_file():
                out[root / "exercises" / path.relative_to(release)] = path.read_text()
    return out
