"""The ``qkv`` command and ``python -m qkv_course generate`` with bad input: one line on stderr,
exit status 2, no traceback; a user's files in ``--out`` are never replaced without ``--force``,
and an interrupted run leaves no half-written output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from qkv_course import outdir
from qkv_course.cli import main
from qkv_course.generate import command as generate
from qkv_course.nbgrader.graded import nbgrader_meta, read_notebook
from qkv_course.usage import UsageError

GRADED = new_code_cell("x = 1", metadata={"nbgrader": {"grade": True, "grade_id": "t", "points": 1}})


def _course(tmp_path: Path) -> Path:
    """A course with one autograded notebook of one passing test: enough for ``qkv report``."""
    folder = tmp_path / "course" / "autograded" / "alice" / "06-masking"
    folder.mkdir(parents=True)
    (folder / "masking.ipynb").write_text(json.dumps(new_notebook(cells=[GRADED])))
    return tmp_path / "course"


def _one_line(capsys, code: int, expected: int = 2) -> str:
    err = capsys.readouterr().err
    assert code == expected, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("argv, words", [
    (["report", "{tmp}/nowhere", "--out", "{tmp}/o"], ["no such folder"]),
    (["report", "{tmp}/afile", "--out", "{tmp}/o"], ["COURSE_DIR", "is a file"]),
    (["report", "{tmp}", "--out", "{tmp}/o"], ["no autograded/ folder"]),
    (["report", "{course}", "--out", "{tmp}/afile"], ["--out", "is a file"]),
    (["report", "{course}", "--out", "{tmp}/afile/sub"], ["cannot write to --out", "is a file"]),
    (["grade", "06-masking", "--course", "{tmp}/afile"], ["--course", "is a file"]),
    (["grade", "06-masking", "--course", "{course}", "--jobs", "0"], ["--jobs must be at least 1"]),
    (["grade", "06-masking", "--course", "{course}", "--timeout", "nan"], ["--timeout", "nan"]),
    (["grade", "06-masking", "--course", "{course}", "--shard", "0/4"], ["K must be from 1 to N"]),
    (["grade", "06-maskng", "--course", "{course}"], ["06-maskng", "solutions"]),
    (["grade", "06-masking", "--course", "{tmp}"], ["not an nbgrader course folder", "--course"]),
    (["gradescope", "06-maskin", "--out", "{tmp}/o"], ["no such assignment", "did you mean 06-masking?"]),
    (["gradescope", "06-masking", "--out", "{tmp}/afile"], ["--out", "is a file"]),
])
def test_bad_usage_is_one_line(tmp_path, capsys, argv, words):
    (tmp_path / "afile").write_text("x")
    course = _course(tmp_path)
    argv = [a.format(tmp=tmp_path, course=course) for a in argv]
    err = _one_line(capsys, main(argv))
    for w in words:
        assert w in err, (w, err)


def test_report_reruns_but_never_replaces_a_users_file(tmp_path, capsys):
    course, out = _course(tmp_path), tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["report", str(course), "--out", str(out)]) == 0
    assert main(["report", str(course), "--out", str(out)]) == 0  # its own output: replaced
    (out / "mistakes.csv").write_text("edited by hand\n")
    capsys.readouterr()
    err = _one_line(capsys, main(["report", str(course), "--out", str(out)]))
    assert "mistakes.csv" in err and "--force" in err
    assert (out / "mistakes.csv").read_text() == "edited by hand\n"
    assert main(["report", str(course), "--out", str(out), "--force"]) == 0
    assert (out / "mistakes.csv").read_text().startswith("assignment,")
    assert (out / "notes.txt").read_text() == "mine"


def test_ctrl_c_leaves_no_half_written_output(tmp_path, capsys, monkeypatch):
    course, out = _course(tmp_path), tmp_path / "out"

    def interrupted(path, assignments):
        Path(path).write_text("<html>half")
        raise KeyboardInterrupt

    monkeypatch.setattr("qkv_course.report.page.write_html", interrupted)
    _one_line(capsys, main(["report", str(course), "--out", str(out)]), expected=130)
    # mistakes.csv was complete before the interruption; report.html was never renamed into place
    assert sorted(p.name for p in out.iterdir()) == ["mistakes.csv"]


@pytest.mark.parametrize("names, mine, force, ok", [
    ((), {}, False, True),
    (("a.csv",), {}, False, True),                      # nothing there yet
    (("a.csv",), {"a.csv": "user's"}, False, False),    # a file the command did not write
    (("a.csv",), {"a.csv": "user's"}, True, True),      # ... unless --force
    (("a.csv",), {"a.csv": None}, False, True),         # its own, unchanged
])
def test_prepare_refuses_to_replace_what_it_did_not_write(tmp_path, names, mine, force, ok):
    for name, text in mine.items():
        if text is None:
            outdir.write_text(tmp_path / name, "ours")
            outdir.record(tmp_path, [name])
        else:
            (tmp_path / name).write_text(text)
    if ok:
        assert outdir.prepare(tmp_path, names, force) == tmp_path
    else:
        with pytest.raises(UsageError, match="--force"):
            outdir.prepare(tmp_path, names, force)


@pytest.mark.parametrize("text", ["{bad json", "[]", '{"a": 1}', "\udcff", '{"cells": "x", "nbformat": 4, '
                                  '"nbformat_minor": 5, "metadata": {}}'])
def test_a_corrupt_notebook_is_not_a_notebook(tmp_path, text):
    path = tmp_path / "n.ipynb"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(UsageError, match="not a notebook"):
        read_notebook(path)


@pytest.mark.parametrize("cell", [{}, {"metadata": None}, {"metadata": {"nbgrader": "x"}}, "cell"])
def test_odd_nbgrader_metadata_reads_as_none(cell):
    assert nbgrader_meta(cell) == {}


@pytest.mark.parametrize("argv", [["--check"], ["--only", "toc"]])
def test_generate_reports_a_broken_source_in_one_line(capsys, monkeypatch, argv):
    def broken(*_):
        raise ValueError("solutions/06-masking/masking.md: cell 3: one cell cannot be both")

    monkeypatch.setattr(generate, "_survey", broken)  # both modes read every source through it
    err = _one_line(capsys, generate.main(argv))
    assert err.startswith(generate.COMMAND) and "cell 3" in err
