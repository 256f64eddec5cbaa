"""The concept map holds: every chapter's concept has all its files, and nothing is orphaned."""

from __future__ import annotations

import shutil
from pathlib import Path

import qkv.checks
from qkv_course.config import ROOT
from qkv_course.generate.concept_map import concepts, missing, table


def test_every_concept_has_its_chapter_reference_checks_tests_and_assignment():
    found = concepts()
    assert len(found) >= 7, [c.slug for c in found]
    problems = [line for c in found for line in missing(c)]
    assert not problems, "\n".join(problems)


def test_every_check_module_and_assignment_belongs_to_a_chapter():
    modules = {c.module for c in concepts()}
    # result.py and grading.py check nothing: the result type and the grader's API.
    check_modules = {p.stem for p in (ROOT / "src" / "qkv" / "checks").glob("*.py")
                     if not p.stem.startswith("_") and p.stem not in ("result", "grading")}
    assert check_modules <= modules, f"check modules with no chapter: {sorted(check_modules - modules)}"
    folders = {p.name for p in (ROOT / "solutions").iterdir() if p.is_dir() and any(p.glob("*.md"))}
    assert folders <= {f"{c.number}-{c.slug}" for c in concepts()}, sorted(folders)


def test_every_exported_check_is_defined_by_exactly_one_concept():
    owners: dict[str, list[str]] = {}
    for c in concepts():
        for name in c.checks():
            owners.setdefault(name, []).append(c.slug)
    # check_question belongs to no concept: it judges every assignment's conceptual questions.
    exported = {n for n in qkv.checks.__all__ if n.startswith("check_")} - {"check_question"}
    assert exported == set(owners), sorted(exported ^ set(owners))
    assert all(len(v) == 1 for v in owners.values()), owners


def test_a_concept_missing_a_file_is_reported(tmp_path: Path):
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / "06-masking.md", tmp_path / "book" / "06-masking.md")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/06-masking\n")
    (c,) = concepts(tmp_path)
    problems = missing(c)
    for what in ("src/qkv/masking.py", "src/qkv/checks/masking.py", "solutions/06-masking/masking.md",
                 "tests/test_masking.py"):
        assert any(what in line for line in problems), (what, problems)
    assert "| **masking** |" in table(tmp_path)


def test_a_chapter_without_assignment_needs_no_checks_but_may_not_have_them(tmp_path: Path):
    (tmp_path / "book").mkdir()
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    text = (ROOT / "book" / "06-masking.md").read_text().replace("---\n", "---\nassignment: false\n", 1)
    (tmp_path / "book" / "06-masking.md").write_text(text)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/06-masking\n")
    (c,) = concepts(tmp_path)
    assert not c.graded
    assert not any("checks" in line or "solutions" in line for line in missing(c)), missing(c)
    (tmp_path / "src" / "qkv" / "checks").mkdir(parents=True)
    (tmp_path / "src" / "qkv" / "checks" / "masking.py").write_text("def check_x(fn):\n    pass\n")
    assert any("assignment: false" in line for line in missing(c)), missing(c)


def test_every_tooling_package_says_what_each_of_its_modules_is_for():
    """CONTRIBUTING's tooling map lists a sub-package's modules; its face says what they do."""
    package = ROOT / "src" / "qkv_course"
    unnamed = [f"{face.parent.name}/{module.name}"
               for face in sorted(package.glob("*/__init__.py"))
               for module in sorted(face.parent.glob("*.py"))
               if module.name != "__init__.py" and f".{module.stem}`" not in face.read_text()]
    assert not unnamed, f"modules their package's __init__.py docstring does not name: {unnamed}"
