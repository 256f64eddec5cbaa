"""Each attack on autograding, as a real round trip through ``qkv grade`` and its sandbox.

One class of 04-scaling is graded once, in one run, with two honest students (the model
answers; a named mistake) and one student per attack. Each attacker starts from the blank
exercise (0 points) or the model answers, adds the attack, and must earn nothing from it;
the honest students' grades must be exactly what nbgrader gives them; the run must finish and
say what happened to each submission in its summary.
"""

from __future__ import annotations

import hashlib
import json
import time

import nbformat
import pytest

import grade_class as gc
import scaling_submissions as class_
from qkv_course.cli import main as qkv
from qkv_course.config import ROOT

pytestmark = pytest.mark.slow  # nbgrader makes each course's gradebook

HARNESS = ROOT / "src" / "qkv" / "checks" / "harness" / "_harness.py"
SUBMISSION_S = 40  # one submission's whole time in the sandbox (the default is 120)
SLEEP_S = 12  # each of several cells sleeps just under what a cell may take alone

ATTACKS = {
    # An IPython callback that displays a value before every cell (nbgrader's partial-credit
    # rule gave every test cell full points).
    "display_hook": ("blank", "ip = get_ipython()\n"
                     "ip.events.register('pre_run_cell', lambda *a: display(1.0))\n"),
    # A double-forked daemon that rewrites the gradebook after the run.
    "daemon": ("blank", "import os, time\n"
               "if os.fork() == 0:\n"
               "    os.setsid()\n"
               "    if os.fork() == 0:\n"
               "        time.sleep(3)\n"
               "        open({marker!r}, 'w').write('escaped')\n"
               "        open({gradebook!r}, 'ab').write(b'x' * 4096)\n"
               "    os._exit(0)\n"),
    # Editing the checks' harness, for this run and the next.
    "harness": ("blank", "import qkv.checks.harness._harness as h\n"
                "open({harness!r}, 'a').write('\\n# tampered\\n')\n"
                "open(h.__file__, 'a').write('\\n# tampered\\n')\n"),
    # In-kernel patches of the checks (the guards had blind spots): any check passes.
    "patch_checks": ("blank", "import qkv.checks, qkv.checks.grading as g\n"
                     "g.judge = lambda *a, **k: None\n"
                     "for n in dir(qkv.checks):\n"
                     "    if n.startswith('check_'):\n"
                     "        setattr(qkv.checks, n, lambda *a, **k: None)\n"
                     "def attention_scores(query, key, scale=None):\n"
                     "    return query @ key.transpose(-2, -1)\n"),
    # Kill the grader's process: nbgrader autograde ended for everyone after.
    "kill_parent": ("blank", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
                    "os.kill(1, signal.SIGKILL)\n"),
    # Cells sleeping just under the time limit, many of them.
    "sleepers": ("model", f"import time\ntime.sleep({SLEEP_S})\n"),
    # A 300 MB output.
    "flood": ("blank", "import sys\nsys.stdout.write('x' * (300 << 20))\n"
              "display('y' * (300 << 20))\n"),
    # Garbage on every file descriptor, to break the grader's JSON.
    "json_break": ("blank", "import os\nfor fd in range(64):\n"
                   "    try:\n        os.write(fd, b'{\"op\": \"reply\", \"kind\": \"value\"}\\n')\n"
                   "    except OSError:\n        pass\n"),
    # An endless loop.
    "loop": ("blank", "while True:\n    pass\n"),
}


def _forged() -> dict:
    """Blank answers, test cells rewritten to pass, outputs forged, schema version 4."""
    nb = json.loads(nbformat.writes(class_.submission("blank")))
    for cell in nb["cells"]:
        meta = cell.setdefault("metadata", {}).setdefault("nbgrader", {})
        meta["schema_version"] = 4
        if meta.get("grade") and cell["cell_type"] == "code":
            cell["source"] = "1.0"
            meta["points"] = 1000
            cell["outputs"] = [{"output_type": "execute_result", "execution_count": 1,
                                "data": {"text/plain": "1000.0"}, "metadata": {}}]
    return nb


def _pasted():
    """An honest student with a second copy of a test cell."""
    nb = class_.submission("model")
    nb.cells.append(nbformat.from_dict(json.loads(json.dumps(next(
        c for c in nb.cells if class_.grade_id(c) == "test_attention_with_temperature")))))
    return nb


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    course = gc.make_course(tmp_path_factory.mktemp("attacks") / "course")
    marker = course / "escaped.txt"
    fill = {"marker": str(marker), "gradebook": str(course / "gradebook.db"),
            "harness": str(HARNESS)}
    harness_before = HARNESS.read_bytes()
    gc.submit(course, "alice", class_.submission("model"))
    gc.submit(course, "carol", class_.submission("unscaled"))
    for student, (base, cell) in ATTACKS.items():
        for name, value in fill.items():
            cell = cell.replace("{%s!r}" % name, repr(value))
        nb = gc.with_cell(base, cell, after="setup")
        if student == "sleepers":  # several sleeping cells after the answers
            for _ in range(4):
                nb.cells.append(nbformat.v4.new_code_cell(f"import time\ntime.sleep({SLEEP_S})"))
        gc.submit(course, student, nb)
    gc.submit(course, "forged", _forged())
    gc.submit(course, "pasted", _pasted())
    started = time.monotonic()
    try:
        status = qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--jobs", "2",
                      "--submission-timeout", str(SUBMISSION_S)])
        elapsed = time.monotonic() - started
        gradebook_after = hashlib.sha256((course / "gradebook.db").read_bytes()).hexdigest()
        time.sleep(5)  # the daemon's time to act, had it survived
        harness_after = HARNESS.read_bytes()
    finally:
        if HARNESS.read_bytes() != harness_before:  # never leave the repository tampered
            HARNESS.write_bytes(harness_before)
    return {"course": course, "status": status, "elapsed": elapsed, "marker": marker,
            "gradebook": gradebook_after, "harness": harness_after == harness_before}


def test_the_run_finishes_and_grades_everyone(attacked):
    assert attacked["status"] == 0
    students = set(gc.scores(attacked["course"]))
    assert students == {"alice", "carol", "forged", "pasted", *ATTACKS}


def test_honest_students_get_what_nbgrader_gives(attacked):
    got = gc.scores(attacked["course"])
    assert got["alice"]["score"] == class_.expected("model")[0]
    assert got["carol"]["score"] == class_.expected("unscaled")[0]
    assert got["pasted"]["score"] == class_.expected("model")[0]  # a pasted test costs nothing


@pytest.mark.parametrize("student", sorted({*ATTACKS, "forged"} - {"sleepers"}))
def test_an_attack_earns_nothing(attacked, student):
    assert gc.scores(attacked["course"])[student]["score"] == 0


def test_sleeping_cells_cost_only_their_own_submission(attacked, capsys):
    # Its cells did not finish within the submission's limit: no answer of it is graded.
    assert gc.scores(attacked["course"])["sleepers"]["score"] == 0
    # The whole class took about one submission's limit, not one per sleeping cell.
    assert attacked["elapsed"] < 6 * SLEEP_S * 4


def test_nothing_outside_the_sandbox_changed(attacked):
    assert not attacked["marker"].exists()
    now = hashlib.sha256((attacked["course"] / "gradebook.db").read_bytes()).hexdigest()
    assert now == attacked["gradebook"]
    assert attacked["harness"], "a submission changed src/qkv/checks/_harness.py"


def test_the_summary_says_what_stopped_each_submission(attacked):
    from qkv_course.grade import records

    records = {s: records.read(records.path_of(attacked["course"], s, gc.ASSIGNMENT, "scaling"))
               for s in ("kill_parent", "loop", "json_break", "sleepers")}
    assert records["loop"]["sandbox"], records["loop"]
    assert "did not finish" in records["loop"]["sandbox"] or "CPU" in records["loop"]["sandbox"]
    for name in ("kill_parent", "json_break"):
        rec = records[name]
        assert rec["score"] == 0 and all(t["status"] != "pass" for t in rec["tests"]), rec


def test_delegation_is_a_flag_not_a_deduction(tmp_path):
    course = gc.make_course(tmp_path / "course")
    nb = class_.submission("model")
    for cell in nb.cells:
        if class_.grade_id(cell) == "scaled_dot_product_attention":
            cell.source = ("def scaled_dot_product_attention(query, key, value, scale=None):\n"
                           "    return torch.nn.functional.scaled_dot_product_attention(\n"
                           "        query, key, value, scale=scale)\n")
    gc.submit(course, "dana", nb)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--jobs", "1"]) == 0
    from qkv_course.grade import records

    record = records.read(records.path_of(course, "dana", gc.ASSIGNMENT, "scaling"))
    assert record["score"] == class_.expected("model")[0]  # the grade stands
    flagged = [f for f in record["flags"] if f["test"] == "test_scaled_dot_product_attention"]
    assert flagged and any("scaled_dot_product_attention" in f["detail"] for f in flagged), \
        record["flags"]
    # The static reading sees torch's function inside the student's one of the same name.
    assert any(f["source"] == "static" and "torch.nn.functional.scaled_dot_product_attention"
               in f["detail"] for f in flagged), record["flags"]
    # Formgrader shows the flag to whoever grades the submission.
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission_notebook("scaling", gc.ASSIGNMENT, "dana").flagged is True


def test_gradescope_runs_the_same_engine(attacked, tmp_path):
    from qkv_course.gradescope import autograder

    submission = tmp_path / "submission"
    submission.mkdir()
    nbformat.write(class_.submission("unscaled"), str(submission / "anything.ipynb"))
    out = tmp_path / "results" / "results.json"
    assert autograder.main([str(attacked["course"]), gc.ASSIGNMENT, str(submission), str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["score"] == class_.expected("unscaled")[0]
    failed = {t["name"] for t in result["tests"] if t["score"] < t["max_score"]}
    assert failed == set(class_.UNSCALED_FAILS)
    assert "no scaling" in next(t["output"] for t in result["tests"] if t["name"] in failed)
