"""The autograder zip of ``qkv gradescope``: Otter's own, with the course package inside.

``otter generate`` writes the zip: Gradescope builds an image from it once per assignment
(``setup.sh`` installs a conda environment from ``environment.yml``), then runs Otter on each
submission. Into it go the test files, an Otter configuration and a ``requirements.txt`` that
installs

- torch, CPU build, from PyTorch's CPU index (Gradescope has no GPU: the CUDA build would
  only make the image larger), and the package's other dependencies, at the versions the
  course pins in its ``requirements.txt``;
- ``qkv`` (the checks and the reference) from a wheel built here from the repository, with no
  network, and put in the zip: every submission is graded by the checks of the commit the zip
  was made from, whatever the repository holds later.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List

from .config import ROOT
from .graded import UsageError

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
AUTOGRADER_SOURCE = "/autograder/source"  # where Gradescope unpacks the zip; files/ lands in it
# Otter's configuration (otter_config.json): every result, hidden tests' included, is shown to
# the student once the instructor publishes the grades (as nbgrader's feedback would); before
# that, only the visible tests' summary.
OTTER_CONFIG = {"lang": "python", "show_hidden": True, "show_stdout": False}
# What the wheel is built from: the package metadata and the sources (src/qkv, src/qkv_course).
PACKAGE_FILES = ("pyproject.toml", "README.md", "src")
BUILT_FROM = "qkv-built-from.txt"  # in the zip's files/: the commit the wheel was built from
# Appended to Otter's setup.sh. rfc3987-syntax (an optional format checker of jsonschema, which
# jupyter_server's dependencies bring) compiles a grammar whenever nbformat is imported: in
# Otter's process and again in the kernel, about 1.7 s of CPU and 22 MB each per submission.
# Nothing in grading uses it, and jsonschema runs without it.
SETUP_EXTRA = """
# qkv gradescope: an optional package whose import costs each submission seconds and memory
mamba run -n {env} pip uninstall --yes rfc3987-syntax
"""


def autograder_zip(tests: Dict[str, str], path: Path, root: Path = ROOT) -> Path:
    """Write the autograder zip.

    Args:
        tests: test file name (a grade id) -> the test file's text.
        path: the zip to write (replaced if it exists).
        root: the repository root (its package and its ``requirements.txt``).

    Returns:
        ``path``.

    Raises:
        UsageError: the package could not be built, or a pinned version is missing.
    """
    from otter.generate import OTTER_ENV_NAME
    from otter.generate import main as otter_generate

    path = path.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "tests").mkdir()
        for name, text in tests.items():
            (work / "tests" / f"{name}.py").write_text(text)
        wheel = build_wheel(root, work)
        (work / "requirements.txt").write_text(requirements(root, wheel.name))
        (work / BUILT_FROM).write_text(f"{wheel.name}: built from {_commit(root)}\n")
        (work / "otter_config.json").write_text(json.dumps(OTTER_CONFIG, indent=2) + "\n")
        here = os.getcwd()
        os.chdir(work)  # Otter puts files in the zip by their path from the current folder
        try:
            otter_generate(tests_dir="tests", output_path=str(path), config="otter_config.json",
                           requirements="requirements.txt", no_environment=True,
                           files=[wheel.name, BUILT_FROM], python_version=python_version())
        finally:
            os.chdir(here)
    _append_to_setup(path, SETUP_EXTRA.format(env=OTTER_ENV_NAME))
    return path


def _append_to_setup(path: Path, lines: str) -> None:
    """Add ``lines`` at the end of the zip's ``setup.sh`` (Otter's, which builds the image)."""
    with zipfile.ZipFile(path) as z:
        entries = [(info, z.read(info)) for info in z.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for info, data in entries:
            z.writestr(info, data + lines.encode() if info.filename == "setup.sh" else data)


def python_version() -> str:
    """The Python of the grading image: this one's (the one ``otter run`` checks the zip with)."""
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
    package's dependencies (``pyproject.toml``)."""
    import tomllib

    wanted = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
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
