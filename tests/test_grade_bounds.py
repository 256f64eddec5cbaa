"""What a submission sends back, or hands in, cannot buy the grader's time or memory.

Each test is one way a student's code or file made the trusted side do work in proportion to
something the student chose (found by attacking ``qkv grade``): a flood of notices, huge
results, huge added cells, a character no UTF-8 file can hold. The sandbox's own limits do not
reach these: the work happened in the parent, after the sandbox.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from qkv.checks.harness import split_outcome
from qkv_course.calls import Call
from qkv_course.grade import flags, judge, notebook_file, submission


def test_a_flood_of_notices_is_cut_to_a_few_short_ones():
    noticed = tuple(f"notice {i} " + "x" * 1000 for i in range(100_000))
    start = time.perf_counter()
    value, notices = split_outcome((1.0, noticed))
    assert time.perf_counter() - start < 1.0
    assert value == 1.0 and 0 < len(notices) <= 16 and all(len(n) <= 300 for n in notices)


class _Returns:
    """A submission whose answer returns ``value`` on every call (as the sandbox would)."""

    def __init__(self, value):
        self.value, self.calls = value, 0

    def call(self, *args, **kwargs):
        self.calls += 1
        return self.value


def test_results_too_large_stop_the_call_before_memory_grows():
    big = torch.zeros(12 << 20, dtype=torch.uint8)  # 12 MiB each call: 64 MiB after six
    sub = _Returns((big, ()))
    verdict, reason = judge.run_call(sub, Call("check_softmax", "softmax"), 1, judge.Timeouts())
    assert reason is None and not verdict.passed and "MiB" in verdict.message()
    assert sub.calls <= judge.CALL_BYTES // big.numel() + 1


def test_a_right_sized_answer_is_judged_as_before():
    sub = _Returns((0.25, ()))
    verdict, reason = judge.run_call(sub, Call("check_max_weight", "max_weight"), 1,
                                     judge.Timeouts())
    assert reason is None and not verdict.passed and "MiB" not in verdict.message()


def test_huge_added_cells_are_read_once_and_only_so_far():
    added = ["a.b = 1\n" * (1 << 17)] * 40  # 40 cells of 1 MiB
    tests = [{"grade_id": f"t{i}", "notices": []} for i in range(12)]
    calls = {f"t{i}": [("check_softmax", "softmax")] for i in range(12)}
    start = time.perf_counter()
    found = flags.flags_for(tests, {"softmax": "def softmax(x, dim=-1):\n    return x\n"},
                            added, calls)
    assert time.perf_counter() - start < 30
    assert any("not read for flags" in f["detail"] for f in found)


def test_delegation_in_an_added_cell_is_still_flagged():
    tests = [{"grade_id": "t", "notices": []}]
    found = flags.flags_for(tests, {"softmax": ""}, ["def softmax(x, dim=-1):\n    return torch.softmax(x, dim)\n"],
                            {"t": [("check_softmax", "softmax")]})
    assert found and all(f["source"] == "static" for f in found)


def test_a_lone_surrogate_becomes_a_character_utf8_can_write(tmp_path: Path):
    path = tmp_path / "scaling.ipynb"
    path.write_text('{"cells": [{"cell_type": "markdown", "source": "a \\ud800 b \\ud83d\\ude00"}],'
                    ' "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    data = notebook_file.load(path)
    source = data["cells"][0]["source"]
    assert source == "a \ufffd b \U0001F600"
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # what writing the notebook needs


def test_a_path_that_is_not_a_regular_file_is_never_read(tmp_path: Path):
    """A folder copied with cp -r or tar keeps links: to a FIFO or /dev/stdin reading waits
    forever, to /dev/zero it floods memory, to the model solution it would grade that. The
    notebook, its questions' record and its timestamp are read only as regular files."""
    import os

    from qkv_course.grade import gradebook

    folder = tmp_path / "submitted" / "eve" / "04-scaling"
    folder.mkdir(parents=True)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "solution.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, '
                                             '"nbformat_minor": 5}')
    (folder / "scaling.ipynb").symlink_to(tmp_path / "solution.ipynb")
    (folder / "qkv_answers.json").symlink_to(tmp_path / "fifo")
    (folder / "timestamp.txt").symlink_to("/dev/zero")
    start = time.perf_counter()
    try:
        notebook_file.load(folder / "scaling.ipynb")
        raise AssertionError("a link was read as the notebook")
    except notebook_file.Unreadable as e:
        assert "is a link" in str(e)
    answers, problem = notebook_file.first_answers(folder)
    assert answers == {} and "is a link" in problem
    assert gradebook._stamp_text(tmp_path, "eve", "04-scaling") == ""
    os.unlink(folder / "qkv_answers.json")
    os.mkfifo(folder / "qkv_answers.json")  # the FIFO itself, no link
    answers, problem = notebook_file.first_answers(folder)
    assert answers == {} and "not a regular file" in problem
    assert time.perf_counter() - start < 5


def _notebook(tmp_path: Path, cells: str, key: str = "cell_type") -> Path:
    path = tmp_path / "scaling.ipynb"
    path.write_text(f'{{"cells": [{cells}], "metadata": {{}}, "nbformat": 4, "nbformat_minor": 5}}'
                    .replace("cell_type", key))
    return path


def _refused(path: Path, words: str) -> None:
    start = time.perf_counter()
    try:
        notebook_file.load(path)
        raise AssertionError("read")
    except notebook_file.Unreadable as e:
        assert words in str(e), str(e)
    assert time.perf_counter() - start < 5


def test_a_notebook_of_a_million_cells_is_refused_before_it_is_parsed(tmp_path: Path):
    # However its keys are spelled: "cell\u005ftype" is the same JSON as "cell_type".
    cell = '{"cell_type": "markdown", "metadata": {}, "source": "x"}'
    for key in ("cell_type", "cell\\u005ftype"):
        _refused(_notebook(tmp_path, ",".join([cell] * 600_000), key), "JSON objects and lists")
    _refused(_notebook(tmp_path, ",".join([cell] * 10_000), "cell\\u005ftype"), "cells")


def test_a_notebook_padded_with_empty_objects_is_refused_before_it_is_parsed(tmp_path: Path):
    # Parsed, 3 bytes of "{}," are a dict of 64: fifty times the file in the trusted grader.
    path = tmp_path / "scaling.ipynb"
    path.write_text('{"cells": [], "metadata": {"pad": [' + ",".join(["{}"] * 2_000_000)
                    + '], "x": "\\ud800"}, "nbformat": 4, "nbformat_minor": 5}')
    _refused(path, "JSON objects and lists")


def test_code_the_student_added_past_its_limit_is_neither_run_nor_kept(monkeypatch):
    from qkv_course.grade import plan as plan_mod

    root = Path(__file__).resolve().parents[1]
    p = plan_mod.plan(root / "solutions" / "04-scaling" / "scaling.ipynb")
    data = json.loads((root / "exercises" / "04-scaling" / "scaling.ipynb").read_text())
    monkeypatch.setattr(submission, "MAX_ADDED", 1000)
    for i in range(5):
        data["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [],
                              "execution_count": None, "source": f"x{i} = {'1' * 300}"})
    got = submission.read(data, p)
    assert len(got.added) == 3
    assert any("those past the first 1,000 were neither run nor kept" in x for x in got.problems)


def test_a_record_keeps_no_lone_surrogate_from_what_the_student_s_code_said():
    """An error message (or a questions' record) may hold one: the record, the summary line
    and the autograded notebook must still be writable."""
    record = {"tests": [{"message": "it raised ValueError: bad \ud800 char"}],
              "answers": {"f": "x = '\udc80'"}}
    clean = notebook_file.no_lone_surrogates(record)
    json.dumps(clean, ensure_ascii=False).encode("utf-8")
    assert clean["tests"][0]["message"] == "it raised ValueError: bad \ufffd char"


def test_a_question_s_parameters_no_seed_gives_are_a_wrong_answer_not_a_grader_failure():
    from qkv.checks import grading

    result = grading.question("efficient_q1", {"answer": 1.0, "length": 10 ** 400})
    assert not result.passed and "cannot be judged" in result.message()


def test_the_summary_line_shows_a_submission_s_control_characters_escaped():
    """A failing answer's message reached the instructor's terminal raw: escape codes could
    rewrite a 0/15 line as 15/15 and hide 'FLAGGED for review'."""
    from qkv_course.grade.summary import summary_line

    record = {"student": "eve\x1b[2K", "assignment": "04-scaling", "notebook": "scaling",
              "score": 0, "max_score": 15,
              "tests": [{"grade_id": "test_f", "status": "fail", "mistake": "",
                         "calls": [{"passed": False, "what": "\r\x1b[1Aeve: 15/15\u202e"}]}],
              "flags": [{"detail": "delegation\x1b[8m hidden"}]}
    line = summary_line(record)
    assert line.isprintable() and "\\x1b" in line and "\\u202e" in line
    assert line.startswith("eve\\x1b[2K 04-scaling/scaling: 0/15") and "FLAGGED" in line


def test_a_cell_the_parser_fails_on_is_a_flag_and_grading_goes_on():
    # CPython's parser raises MemoryError (not SyntaxError) on deep unary nesting: the static
    # reader must not stop grading, it names the cell for a person.
    crafted = "x = " + "-" * 100_000 + "1\n"
    tests = [{"grade_id": "t", "notices": []}]
    calls = {"t": [("check_softmax", "softmax")]}
    own = "def softmax(x, dim=-1):\n    return torch.softmax(x, dim)\n"
    found = flags.flags_for(tests, {"softmax": own}, [crafted], calls)
    details = [f["detail"] for f in found]
    assert any(d.startswith("a cell could not be read: an added cell, MemoryError")
               for d in details), details
    assert any("torch.softmax" in d for d in details)  # what could be read still is
    found = flags.flags_for(tests, {"softmax": crafted}, [], calls)
    assert [f["detail"] for f in found] == [
        "a cell could not be read: the answer cell softmax, MemoryError (what it calls was not "
        "looked at: read it)"]
    assert flags.given_by_setup(crafted) == set()


def test_a_long_attribute_chain_is_read_in_time_linear_in_its_length():
    """atk11: every attribute of ``a.b.b.b...`` walked the chain down again (its length
    squared): 186 chains of 2,500 attributes, one 1 MiB answer cell, cost the trusted grader
    100 s of CPU. Read now in the time of as much ordinary code (generous bound, measured here,
    the best of three of each: the old reading was about 50 times slower)."""
    chains = "def _never_called():\n" + "".join(
        f"    x{i} = a" + ".b" * 2_500 + "\n" for i in range(8))
    plain = "def _never_called():\n" + "".join(
        f"    x{i} = a.b + c.d\n" for i in range(len(chains) // 20))
    assert len(plain) > len(chains) * 0.9

    def best(source: str) -> float:
        times = []
        for _ in range(3):
            start = time.process_time()
            flags.names_in(source)
            times.append(time.process_time() - start)
        return min(times)

    assert best(chains) < 5 * best(plain) + 0.05
    # What the chains reach is still read: the course's package at any depth, torch's own
    # attribute where the student defines a function of that name.
    deep = "def softmax(x):\n    return qkv" + ".f" * 2_000 + "(torch.nn.functional.softmax)\n"
    names = flags.names_in(deep)
    assert "torch.nn.functional.softmax" in names
    assert any(n.startswith("qkv.f.f") for n in names) and max(map(len, names)) < 100


def test_a_cell_that_needs_ipython_to_rewrite_it_over_and_over_is_flagged_not_read():
    """IPython tokenises the whole cell again after each magic it rewrites: 200 magic lines in
    400 KB cost 200 s of CPU in ``transform_cell``. The trusted side's reading pays from a
    budget, and a cell past it is flagged for a person (grading goes on)."""
    source = ("%time f()\n" + "x = a.b.c + 1\n" * 140) * 200
    start = time.process_time()
    found = flags.flags_for([{"grade_id": "t", "notices": []}], {"softmax": source}, [],
                            {"t": [("check_softmax", "softmax")]})
    assert time.process_time() - start < 60  # unbudgeted: 200 s on the machine that found it
    assert [f["detail"] for f in found] == [
        "a cell could not be read: the answer cell softmax, its IPython syntax needs more than "
        "2,097,152 characters of work beyond reading it once (what it calls was not looked "
        "at: read it)"]
    # A few magics in an ordinary cell are read as IPython reads them; so are twenty in a
    # long honest cell (65 KB: honest12 found it flagged under a budget of 1 MiB).
    few = "%time x = 1\n" * 30 + "def softmax(x):\n    return torch.softmax(x, -1)\n"
    assert "torch.softmax" in flags.names_in(few)
    long = "".join(("%time " if i % 100 == 0 else "") + f"t{i} = f(x)  # my own check {i}\n"
                   for i in range(2_000))
    assert len(long) > 60_000 and "f" in flags.names_in(long)


def test_one_budget_reads_a_submission_however_many_cells_share_the_work():
    """attack13: 64 added cells, each a ``%%html`` body of 250 ``%time`` lines (2 KB, which
    IPython re-reads after each line), stayed under a budget given to each cell and cost the
    trusted grader 85 s of CPU (512 of them: about 12 minutes). One budget for the whole
    submission: read in seconds, and the cells past it are flagged for a person."""
    cell = "%%html\n" + "%time x\n" * 250
    answer = "def softmax(x):\n    return x\n"
    start = time.process_time()
    found = flags.flags_for([{"grade_id": "t", "notices": []}], {"softmax": answer},
                            [cell] * 64, {"t": [("check_softmax", "softmax")]})
    assert time.process_time() - start < 20
    assert [f["detail"][:60] for f in found] == [
        "a cell could not be read: an added cell, its IPython syntax "]


def test_a_help_lookup_is_no_delegation():
    """``torch.softmax?`` is IPython's ``%pinfo torch.softmax``: it shows help and runs
    nothing, so it names nothing the answer uses (honest12: it was flagged as delegation)."""
    own = "def softmax(x, dim=-1):\n    e = x.exp()\n    return e / e.sum(dim, keepdim=True)\n"
    for looked_up in ("torch.softmax?", "F.softmax??", "?torch.softmax"):
        found = flags.flags_for([{"grade_id": "t", "notices": []}],
                                {"softmax": own + looked_up + "\n"}, [],
                                {"t": [("check_softmax", "softmax")]})
        assert found == [], (looked_up, found)
    # A magic that runs code is still read: torch's softmax inside the student's own.
    assert "torch.softmax" in flags.names_in(own + "%time y = torch.softmax(x, -1)\n")


def test_a_notebook_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path: Path):
    # 127 MiB of short strings took 12 s of the interpreter's lock (every grading thread) and
    # 2 GB to parse; the limit refuses it unread, and says how to fix it.
    assert notebook_file.MAX_BYTES == 64 << 20
    path = tmp_path / "scaling.ipynb"
    with path.open("w") as f:
        f.write('{"cells": [], "metadata": {"pad": [')
        f.write('"ab",' * ((65 << 20) // 5))
        f.write('"ab"]}, "nbformat": 4, "nbformat_minor": 5}')
    _refused(path, "is 65 MiB, over the limit of 64 MiB (clear its outputs")


def test_urllib3_s_socks_warning_stays_out_of_the_student_lines():
    """instr8: "urllib3/contrib/socks.py:50: DependencyWarning: SOCKS support in urllib3
    requires ... PySocks" came out between the students' lines of qkv grade: requests' filter
    for it, added while nbgrader is imported in a thread, is undone when a check's
    ``warnings.catch_warnings()`` in another thread ends. Replayed here in that order."""
    import subprocess
    import sys

    replay = ("import sys, warnings\nfrom qkv_course.grade import run\n{quiet}\n"
              "with warnings.catch_warnings():  # a check's, in another thread\n"
              "    import requests  # nbgrader's import: requests adds its filter\n"
              "sys.modules.pop('urllib3.contrib.socks', None)\n"
              "try:\n    import urllib3.contrib.socks  # as requests.adapters does\n"
              "except ImportError:\n    pass\n")

    def stderr(quiet):
        proc = subprocess.run([sys.executable, "-c", replay.format(quiet=quiet)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stderr

    assert "SOCKS support" in stderr("")  # the replay shows what instr8 saw
    assert "SOCKS support" not in stderr("run.quiet_libraries()")
