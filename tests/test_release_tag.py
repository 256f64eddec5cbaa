"""The release the set-up cells install exists when the book is published (.ci/release-tag.sh).

Every chapter's Colab copy and every exercise installs ``qkv @ git+<repository>@v<version>``;
book.yml runs the script before it publishes, and the script tags the published commit when
the repository has no such tag yet, and refuses to publish when the package has changed since
the tag (the notebooks would run on an older qkv). Here it runs against a scratch repository and
its remote.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "release-tag.sh"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _commit(clone: Path, message: str) -> str:
    _git(clone, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty",
         "-m", message)
    return _git(clone, "rev-parse", "HEAD")


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    remote, clone = tmp_path / "remote.git", tmp_path / "clone"
    _git(tmp_path, "init", "-q", "--bare", str(remote))
    _git(tmp_path, "clone", "-q", str(remote), str(clone))
    (clone / ".ci").mkdir()
    shutil.copy(SCRIPT, clone / ".ci" / SCRIPT.name)
    (clone / "pyproject.toml").write_text('[project]\nname = "qkv"\nversion = "9.8.7"\n')
    (clone / "src").mkdir()
    (clone / "src" / "qkv.py").write_text("A = 1\n")
    (clone / "book").mkdir()
    (clone / "book" / "intro.md").write_text("# qkv\n")
    _git(clone, "add", ".")
    _commit(clone, "first")
    _git(clone, "push", "-q", "origin", "HEAD")
    return clone


def _run(clone: Path, ok: bool = True) -> str:
    out = subprocess.run(["bash", ".ci/release-tag.sh"], cwd=clone, capture_output=True, text=True)
    assert (out.returncode == 0) == ok, out.stdout + out.stderr
    return out.stdout + out.stderr


def _change(clone: Path, path: str, text: str) -> None:
    (clone / path).write_text(text)
    _git(clone, "add", path)
    _commit(clone, f"change {path}")
    _git(clone, "push", "-q", "origin", "HEAD")


def _remote_tag(clone: Path) -> str:
    line = _git(clone, "ls-remote", "origin", "refs/tags/v9.8.7^{}")  # the commit the tag names
    return line.split()[0] if line else ""


def test_a_missing_release_tag_is_made_on_the_published_commit_and_pushed(clone):
    assert _remote_tag(clone) == ""
    assert "tagged" in _run(clone)
    assert _remote_tag(clone) == _git(clone, "rev-parse", "HEAD")


def test_an_existing_release_tag_is_left_where_it_is(clone):
    _run(clone)
    first = _remote_tag(clone)
    _commit(clone, "second")
    _git(clone, "push", "-q", "origin", "HEAD")
    assert "exists on origin" in _run(clone)
    assert _remote_tag(clone) == first != _git(clone, "rev-parse", "HEAD")


def test_a_chapter_changed_after_the_release_is_published_with_it(clone):
    _run(clone)
    first = _remote_tag(clone)
    _change(clone, "book/intro.md", "# qkv, a course on attention\n")
    assert "unchanged since" in _run(clone)
    assert _remote_tag(clone) == first


def test_a_package_changed_after_the_release_asks_for_a_new_version(clone):
    _run(clone)
    first = _remote_tag(clone)
    _change(clone, "src/qkv.py", "A = 2\n")
    said = _run(clone, ok=False)
    assert "src/qkv.py" in said and "Raise the version in pyproject.toml (for example to 9.8.8)" in said
    assert _remote_tag(clone) == first
    _change(clone, "pyproject.toml", '[project]\nname = "qkv"\nversion = "9.8.8"\n')
    assert "tagged" in _run(clone)
    tagged = _git(clone, "ls-remote", "origin", "refs/tags/v9.8.8^{}").split()[0]
    assert tagged == _git(clone, "rev-parse", "HEAD")


def test_the_book_workflow_tags_before_it_publishes():
    workflow = (ROOT / ".github" / "workflows" / "book.yml").read_text()
    job = re.search(r"\n  release-tag:\n(.*?)\n  build:\n    needs: release-tag\n", workflow, re.S)
    assert job, "book.yml: a release-tag job that the build job needs"
    assert "contents: write" in job[1] and "run: bash .ci/release-tag.sh" in job[1]
