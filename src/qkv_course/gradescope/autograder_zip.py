"""The autograder zip of ``qkv gradescope``: ``qkv grade``'s engine, with the course inside.

Gradescope unpacks the zip into ``/autograder/source``, runs its ``setup.sh`` once per
assignment to build an image, then its ``run_autograder`` once per submission, in a fresh
container. The zip holds

- ``setup.sh``: installs bubblewrap (the sandbox of :mod:`qkv_course.grade`) from Ubuntu's
  packages, a Python of this one's minor version (Miniforge), and ``requirements.txt``:
  torch, CPU build, from PyTorch's CPU index (Gradescope has no GPU: the CUDA build would only
  make the image larger), the package's other dependencies at the versions the course pins,
  IPython at its pin (the engine runs answer cells as IPython reads them: without it, a cell
  with ``%time`` or ``%matplotlib inline`` would not compile there, while ``qkv grade`` runs
  it), and ``qkv`` from a wheel built here from the repository, with no network, and put in
  the zip's ``files/``: every submission is graded by the checks of the commit the zip was made
  from, whatever the repository holds later;
- ``run_autograder``: ``python -m qkv_course.gradescope.autograder`` (:mod:`.autograder`) on
  the submitted notebook, which writes ``/autograder/results/results.json``;
- ``course/``: what that engine grades against, laid out as a course folder: the solution
  notebook (hidden tests included) in ``solutions/<assignment>/``, nbgrader's release in
  ``exercises/<assignment>/``, and a ``.qkv-grade-key`` drawn for this zip (the seeds of the
  hidden inputs). Students never see the zip; the sandbox hides ``course/`` from their code.
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List

from ..config import ROOT
from ..usage import UsageError

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
AUTOGRADER_SOURCE = "/autograder/source"  # where Gradescope unpacks the zip
PYTHON_PREFIX = "/opt/qkv-python"  # the grading Python that setup.sh makes
# What the wheel is built from: the package metadata and the sources (src/qkv, src/qkv_course).
PACKAGE_FILES = ("pyproject.toml", "README.md", "src")
BUILT_FROM = "qkv-built-from.txt"  # in the zip's files/: the commit the wheel was built from
# What the grading engine needs beyond the package's own dependencies, at requirements.txt's pins.
ENGINE_DEPENDENCIES = ("ipython",)
MINIFORGE = ("https://github.com/conda-forge/miniforge/releases/latest/download/"
             "Miniforge3-Linux-x86_64.sh")

SETUP_SH = """#!/usr/bin/env bash
# qkv gradescope: builds the grading image (once per assignment, on Gradescope's servers).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
# bubblewrap: the sandbox each submission's code runs in (where the container allows it).
apt-get install -y --no-install-recommends bubblewrap wget ca-certificates
wget -nv -O /tmp/miniforge.sh {miniforge}
bash /tmp/miniforge.sh -b -p /opt/qkv-conda
/opt/qkv-conda/bin/conda create -y -p {prefix} python={python}
{prefix}/bin/pip install --no-cache-dir -r {source}/requirements.txt
# rfc3987-syntax (an optional format checker of jsonschema, which nbformat's dependencies
# bring) compiles a grammar whenever nbformat is imported: seconds and memory per submission.
{prefix}/bin/pip uninstall --yes rfc3987-syntax || true
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# qkv gradescope: grades one submission with qkv grade's engine (qkv_course.gradescope.autograder).
# QKV_AUTOGRADER and QKV_PYTHON exist for trying the zip outside Gradescope.
set -u
AUTOGRADER="${{QKV_AUTOGRADER:-/autograder}}"
PYTHON="${{QKV_PYTHON:-{prefix}/bin/python}}"
mkdir -p "$AUTOGRADER/results"
exec "$PYTHON" -m qkv_course.gradescope.autograder "$AUTOGRADER/source/course" {assignment} \\
    "$AUTOGRADER/submission" "$AUTOGRADER/results/results.json"
"""


def autograder_zip(assignment: str, course_files: Dict[str, str], path: Path,
                   root: Path = ROOT) -> Path:
    """Write the autograder zip.

    Args:
        assignment: the assignment's name (``06-masking``): the folder in ``course/``.
        course_files: path inside ``course/`` -> text (the solution and release notebooks).
        path: the zip to write (replaced if it exists).
        root: the repository root (its package and its ``requirements.txt``).

    Returns:
        ``path``.

    Raises:
        UsageError: the package could not be built, or a pinned version is missing.
    """
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(root, Path(tmp))
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            _script(z, "setup.sh", SETUP_SH.format(
                miniforge=MINIFORGE, prefix=PYTHON_PREFIX, python=python_version(),
                source=AUTOGRADER_SOURCE))
            _script(z, "run_autograder", RUN_AUTOGRADER.format(prefix=PYTHON_PREFIX,
                                                               assignment=assignment))
            z.writestr("requirements.txt", requirements(root, wheel.name))
            z.write(wheel, f"files/{wheel.name}")
            z.writestr(f"files/{BUILT_FROM}", f"{wheel.name}: built from {_commit(root)}\n")
            for name, text in course_files.items():
                z.writestr(f"course/{name}", text)
            z.writestr("course/.qkv-grade-key", secrets.token_hex(32) + "\n")
    return path


def _script(z: zipfile.ZipFile, name: str, text: str) -> None:
    """An executable file in the zip (Gradescope runs ``run_autograder`` as a program)."""
    info = zipfile.ZipInfo(name)
    info.external_attr = 0o100755 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, text)


def python_version() -> str:
    """The Python of the grading image: this one's minor version (the one tested here)."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def build_wheel(root: Path, dest: Path) -> Path:
    """Build the ``qkv`` wheel from the repository's sources, offline, into ``dest``.

    setuptools' build backend runs in this environment (no isolated build environment to
    download), on a copy of the package files, so the checkout gains no ``build/`` folder.

    Raises:
        UsageError: the build failed (its output ends the message).
    """
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp)
        for name in PACKAGE_FILES:
            source = root / name
            if source.is_dir():
                shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns(
                    "__pycache__", "*.egg-info", ".ipynb_checkpoints"))
            else:
                shutil.copy(source, copy / name)
        code = ("import sys\nfrom setuptools import build_meta\n"
                "print(build_meta.build_wheel(sys.argv[1]))")
        done = subprocess.run([sys.executable, "-c", code, str(dest)], cwd=copy,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise UsageError("could not build the qkv wheel (setuptools' build backend):\n"
                             + (done.stderr or done.stdout)[-2000:])
        return dest / done.stdout.strip().splitlines()[-1]


def requirements(root: Path, wheel: str) -> str:
    """The zip's ``requirements.txt``: pinned dependencies, then the bundled wheel.

    Args:
        root: the repository root.
        wheel: the wheel's file name (it is in the zip's ``files/``).
    """
    lines = [f"--extra-index-url {TORCH_CPU_INDEX}"]
    for requirement in pins(root):
        lines.append(requirement + "+cpu" if re.match(r"torch==[^+]+$", requirement)
                     else requirement)
    lines.append(f"{AUTOGRADER_SOURCE}/files/{wheel}")
    return "\n".join(lines) + "\n"


def pins(root: Path) -> List[str]:
    """The pinned requirement (``name==version``, from ``requirements.txt``) of each of the
    package's dependencies (``pyproject.toml``), then of the engine's (``ENGINE_DEPENDENCIES``)."""
    import tomllib

    wanted = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = [*wanted, *ENGINE_DEPENDENCIES]
    pinned = {}
    for line in (root / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            pinned[_name(line)] = line
    missing = [d for d in wanted if _name(d) not in pinned]
    if missing:
        raise UsageError(f"requirements.txt pins no version of {', '.join(missing)}")
    return [pinned[_name(d)] for d in wanted]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _commit(root: Path) -> str:
    """The checkout's commit (``+ changes`` when files differ from it), or ``a source tree``."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root,
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *PACKAGE_FILES], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "a source tree"
    return f"commit {head}" + (" + uncommitted changes" if dirty else "")
