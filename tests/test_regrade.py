"""``qkv regrade``: every submission graded again in a fresh, guarded process.

The slow test autogrades a small class of 06-masking with a real ``nbgrader autograde`` (an
honest student, a tampering one, a delegating one, an endless loop, an ``os._exit``) and
regrades it. The fast tests cover the static scan, the child's reports (what the parent
accepts) and the flags read from the checks' refusals.
"""

from __future__ import annotations

import csv
import hashlib
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from masking_submissions import (ASSIGNMENT, INVERTED_CAUSAL, LOOPS_WITHOUT_S, ROOT, finish,
                                 masking_course, nbgrader, sdpa_with_its_own_causal_mask,
                                 submission)
from qkv_course._regrade_child import Watch, refusal_flags
from qkv_course import _regrade_run
from qkv_course._regrade_run import Job, _valid, grade
from qkv_course._regrade_sandbox import abi
from qkv_course._regrade_scan import scan
from qkv_course.cli import main
from qkv_course.regrade import COLUMNS, plan

CAUSAL, PADDING, SDPA = "test_causal_mask", "test_padding_mask", "test_scaled_dot_product_attention"

# A wrong causal mask that rebinds its check in the kernel (the checks undo that) and a test
# cell emptied (nbgrader restores it).
TAMPERED = INVERTED_CAUSAL + """
import qkv.checks
qkv.checks.__dict__["check_causal_mask"] = lambda *a, **k: None
"""
DELEGATES = '''
import torch.nn.functional as F

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    return F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                          scale=scale)
'''
EXITS = '''
import os

def padding_mask(lengths, S=None):
    os._exit(0)
'''


def _snapshot(folder: Path):
    return {p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _submit(course: Path, student: str, nb) -> None:
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, str(folder / "masking.ipynb"))


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """The class, autograded by nbgrader in three courses at once (the loop with a short time
    limit; the ``os._exit``, whose autograde fails), gathered in one course folder."""
    tmp = tmp_path_factory.mktemp("regrade")
    base = tmp / "base"
    release = masking_course(base)
    # Its attention builds its own causal mask: the wrong one costs test_causal_mask only.
    tampered = submission({"causal_mask": TAMPERED,
                           "scaled_dot_product_attention": sdpa_with_its_own_causal_mask()},
                          base=release)
    next(c for c in tampered.cells if c.metadata.get("nbgrader", {}).get("grade_id") == CAUSAL
         ).source = "pass"
    shards = {
        "a": {"honest": submission({}, base=release), "tampered": tampered,
              "delegating": submission({"scaled_dot_product_attention": DELEGATES}, base=release)},
        "loops": {"looping": submission({"padding_mask": LOOPS_WITHOUT_S}, base=release)},
        "exits": {"exiting": submission({"padding_mask": EXITS}, base=release)},
    }
    procs = {}
    for shard, students in shards.items():
        shutil.copytree(base, tmp / shard)
        for student, nb in students.items():
            _submit(tmp / shard, student, nb)
        limit = ["--Execute.timeout=20"] if shard == "loops" else []
        procs[shard] = nbgrader(tmp / shard, "autograde", ASSIGNMENT, "--force", *limit)
    logs = {shard: finish(proc, ok=shard != "exits") for shard, proc in procs.items()}
    course = tmp / "class"
    for shard in shards:
        for folder in ("solutions", "submitted", "autograded"):
            shutil.copytree(tmp / shard / folder, course / folder, dirs_exist_ok=True)
    # The checks hold against this rebinding, so nbgrader gave no points; an attack that gets
    # through leaves the record as this edit does (the test cell's error gone: full points).
    path = course / "autograded" / "tampered" / ASSIGNMENT / "masking.ipynb"
    path.chmod(0o644)
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == CAUSAL:
            assert any(o.get("output_type") == "error" for o in cell.outputs)
            cell.outputs = []
    nbformat.write(nb, str(path))
    return course, logs["exits"]


def _keywords(text: str):
    return {part.split(":")[0] for part in text.split("; ")} if text else set()


QUESTIONS = ("test_masking_q1", "test_masking_q2")
# The assignment's debugging exercise and experiment: right in every submission (the model's).
DEBUG, EXPERIMENT = "test_padded_causal_attention", "test_padding_leak"


@pytest.mark.slow
def test_regrade_restores_the_lost_and_flags_the_tampered(graded_class, capsys, tmp_path):
    course, exits_log = graded_class
    # Measured: an answer that ends its kernel loses the whole notebook under nbgrader.
    assert "Kernel died" in exits_log
    assert not (course / "autograded" / "exiting" / ASSIGNMENT).exists()
    before = _snapshot(course)
    code = main(["regrade", str(course), "--out", str(tmp_path / "out"), "--timeout", "10"])
    out, err = capsys.readouterr()
    assert code == 1, (out, err)
    assert _snapshot(course) == before
    with open(tmp_path / "out" / "regrade.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == COLUMNS
    got = {(r[0], r[2]): (r[3], r[4], r[5], _keywords(r[6])) for r in rows[1:]}
    assert got == {
        ("delegating", CAUSAL): ("2", "2", "2", set()),
        ("delegating", PADDING): ("2", "2", "2", set()),
        # Delegation is a flag (the scan's), not a deduction: the checks only give a notice.
        ("delegating", SDPA): ("4", "4", "4", {"torch-attention"}),
        ("exiting", CAUSAL): ("", "2", "2", {"not-autograded", "disagree"}),
        ("exiting", PADDING): ("", "0", "2", {"exit", "system", "crashed", "not-autograded"}),
        ("exiting", SDPA): ("", "4", "4", {"not-autograded", "disagree"}),
        ("honest", CAUSAL): ("2", "2", "2", set()),
        ("honest", PADDING): ("2", "2", "2", set()),
        ("honest", SDPA): ("4", "4", "4", set()),
        ("looping", CAUSAL): ("2", "2", "2", set()),
        ("looping", PADDING): ("0", "0", "2", {"timeout"}),
        ("looping", SDPA): ("4", "4", "4", set()),
        ("tampered", CAUSAL): ("2", "0", "2", {"checks", "imports", "internals", "patches",
                                                "disagree"}),
        ("tampered", PADDING): ("2", "2", "2", set()),
        ("tampered", SDPA): ("4", "4", "4", set()),
        # The two questions, the debugging exercise and the experiment: right everywhere, lost
        # with the kernel for one.
        **{(who, q): ("0.5", "0.5", "0.5", set()) for who in ("delegating", "honest", "looping",
                                                               "tampered") for q in QUESTIONS},
        **{("exiting", q): ("", "0.5", "0.5", {"not-autograded", "disagree"}) for q in QUESTIONS},
        **{(who, t): (n, n, n, set()) for who in ("delegating", "honest", "looping", "tampered")
           for t, n in ((DEBUG, "3"), (EXPERIMENT, "2"))},
        **{("exiting", t): ("", n, n, {"not-autograded", "disagree"})
           for t, n in ((DEBUG, "3"), (EXPERIMENT, "2"))},
    }
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert out == summary
    assert "5 submission(s) of 5 student(s), 35 test(s)" in summary
    assert "disagreements with nbgrader: 7" in summary and "flagged students: 4" in summary
    assert "honest" not in summary


def test_honest_class_exits_0(tmp_path, capsys):
    """An honest submission, nothing flagged: exit 0 (the model answers of 02-lookup)."""
    course = tmp_path / "course"
    shutil.copytree(ROOT / "solutions" / "02-lookup", course / "solutions" / "02-lookup")
    nb = nbformat.read(str(ROOT / "solutions" / "02-lookup" / "lookup.ipynb"), as_version=4)
    (course / "submitted" / "ann" / "02-lookup").mkdir(parents=True)
    nbformat.write(nb, str(course / "submitted" / "ann" / "02-lookup" / "lookup.ipynb"))
    (course / "autograded" / "ann" / "02-lookup").mkdir(parents=True)
    for cell in nb.cells:  # as nbgrader leaves it: every test cell ran without error
        cell.get("metadata", {}).get("nbgrader", {}).get("grade") and cell.update(execution_count=1)
    nbformat.write(nb, str(course / "autograded" / "ann" / "02-lookup" / "lookup.ipynb"))
    code = main(["regrade", str(course), "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "flagged students: 0 (none)" in out


# --------------------------------------------------------------------------- usage


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp / "nowhere", "no such folder"),
    (lambda tmp: tmp, "holds no autograded or submitted notebooks"),
])
def test_bad_usage_exits_2_with_one_line(tmp_path, capsys, make, message):
    code = main(["regrade", str(make(tmp_path)), "--out", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and message in err and "Traceback" not in err


def test_plan_reads_answers_tests_and_their_checks():
    nb = nbformat.read(str(ROOT / "solutions" / ASSIGNMENT / "masking.ipynb"), as_version=4)
    p = plan(nb)
    assert p.answers == ["causal_mask", "padding_mask", "scaled_dot_product_attention",
                         "padded_causal_attention", "padding_leak", "my_seed",
                         "masking_q1", "masking_q2"]
    assert p.tests == [(CAUSAL, 2.0, "check_causal_mask", "causal_mask"),
                       (PADDING, 2.0, "check_padding_mask", "padding_mask"),
                       (SDPA, 4.0, "check_scaled_dot_product_attention",
                        "scaled_dot_product_attention"),
                       (DEBUG, 3.0, "check_padded_causal_attention", "padded_causal_attention"),
                       (EXPERIMENT, 2.0, "check_padding_leak", "padding_leak"),
                       ("test_masking_q1", 0.5, "check_question:masking_q1", "masking_q1"),
                       ("test_masking_q2", 0.5, "check_question:masking_q2", "masking_q2")]
    assert "import qkv.checks" in p.setup


# --------------------------------------------------------------------------- the static scan


def test_model_answers_raise_no_flag():
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for cell in nbformat.read(str(path), as_version=4).cells:
            if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
                assert scan(cell.source) == [], (path, cell.source)


@pytest.mark.parametrize("code, keyword", [
    ("import sys\nf = sys._getframe(1)", "frames"),
    ("import inspect as i", "frames"),
    ("def f(x):\n    return x.tb_frame.f_back", "frames"),
    ("import logging\nlogging.currentframe()", "frames"),
    ("import gc\ngc.get_objects()", "gc"),
    ("sys.modules['qkv.checks'] = None", "sys.modules"),
    ("import builtins", "builtins"),
    ("__builtins__['len'] = None", "builtins"),
    ("torch.ops.aten._softmax(x, -1, False)", "torch.ops"),
    ("from torch import ops as o", "torch.ops"),
    ("y = torch._safe_softmax(x, -1)", "torch-private"),
    ("from qkv import softmax", "qkv"),
    ("from qkv.checks.lookup import SOFTMAX", "checks"),
    ("text = open('../solutions/x.md').read()", "files"),
    ("import qkv\nprint(qkv.__file__)", "files"),
    ("import importlib\nimportlib.reload(m)", "importlib"),
    ("import ctypes", "ctypes"),
    ("os._exit(0)", "exit"),
    ("import subprocess as s\ns.run(['ls'])", "subprocess"),
    ("exec('x = 1')", "exec"),
    ("f.__code__ = g.__code__", "internals"),
    ("torch.Tensor.allclose = lambda *a, **k: True", "patches"),
    ("setattr(torch, 'softmax', f)", "patches"),
    ("getattr(torch, '_C')", "torch-private"),
    ("class T(torch.Tensor):\n    pass", "subclass"),
    ("from torch.overrides import TorchFunctionMode", "modes"),
    ("import torch.nn.functional as G\nG.scaled_dot_product_attention(q, k, v)", "torch-attention"),
    ("torch.library.Library('aten', 'IMPL')", "kernels"),
    ("from torch.library import impl", "kernels"),
    ("class J(str):\n    pass", "subclass"),
    ("get_ipython().set_custom_exc((AssertionError,), h)", "kernel"),
    ("from IPython import get_ipython", "kernel"),
    ("import concurrent.futures as cf\npool = cf.ThreadPoolExecutor(1)", "subprocess"),
    # Names built at run time, and the other roads to the report pipe and its nonce.
    ("t = getattr(e, 'tb_' + 'frame')", "dynamic"),
    ("f = getattr\nf(x, 'a')", "dynamic"),
    ("vars(o)[n]", "dynamic"),
    ("'{0.x}'.format(e)", "dynamic"),
    ("s.format(e)", "dynamic"),
    ("C = type('C', (), {'__del__': f})", "dynamic"),
    ("t = e.__traceback__", "internals"),
    ("k = '\\x5f\\x5fglobals\\x5f\\x5f'", "internals"),
    ("k = b'f_back'", "frames"),
    ("match e:\n    case object(__traceback__=t): pass", "internals"),
    ("os.write(3, b'{}')", "system"),
    ("torch.sys.modules", "system"),
    ("import ｇｃ", "gc"),  # the parser applies NFKC: the scan sees gc
    ("import json", "imports"),
    ("torch.save(x, '/course/gradebook.db')", "files"),
    ("x.numpy().tofile('/tmp/x')", "files"),
    ("torch.utils.cpp_extension.load_inline('m', src)", "exec"),
])
def test_scan_flags(code, keyword):
    assert keyword in {k for k, _ in scan(code)}, scan(code)


def test_scan_names_the_line_and_ignores_what_does_not_parse():
    assert scan("x = 1\nimport gc\n") == [("gc", "line 2: import gc"),
                                           ("imports", "line 2: import gc")]
    assert scan("def f(:\n") == []
    assert scan("class M(nn.Module):\n    def __init__(self):\n        self.w = 1\n") == []


# --------------------------------------------------------------------------- the child's reports


def test_parent_accepts_only_reports_that_carry_the_nonce_and_fit_the_job():
    job = Job("", [("softmax", "...")], [("test_softmax", "check_softmax", "softmax")])
    good = b'{"nonce": "n", "event": "result", "test": "test_softmax", "passed": true, ' \
           b'"message": "", "flags": [["frames", "x"]]}'
    assert _valid(good, "n", job)["passed"] is True
    for bad in (good.replace(b'"n"', b'"m"', 1),  # forged: another nonce
                good.replace(b"test_softmax", b"test_other"),  # a test not asked for
                good.replace(b"true", b'"yes"'),  # passed is not a bool
                good.replace(b'[["frames", "x"]]', b'[["FRAMES!", 1]]'),  # malformed flags
                b"\x80\x04K\x01.",  # a pickle: never read as one
                b"not json"):
        assert _valid(bad, "n", job) is None, bad


def test_refusals_become_flags():
    assert refusal_flags("sdpa: wrong on x: sdpa calls torch.nn.functional.scaled_dot_product_"
                         "attention; this exercise asks you to write it yourself") == [
        ("delegates", "sdpa: wrong on x: sdpa calls torch.nn.functional.scaled_dot_product_"
         "attention; this exercise asks you to write it yourself")]
    assert refusal_flags("f: reads the call stack; the checks do not allow it")[0][0] == "frames"
    assert refusal_flags("f: something new; the checks do not allow it while your code runs"
                         )[0][0] == "guard"
    assert refusal_flags("f: wrong on x: the result matches a known mistake: no scaling") == []


def test_watch_records_only_what_an_answer_cell_itself_does():
    watch = Watch()
    answer = compile("w('sys._getframe', ()); w('open', ('/etc/passwd',)); "
                     "w('open', ('/x/mod.py',))", "<answer softmax>", "exec")
    library = compile("w('gc.get_objects', ())", "/usr/lib/python3.11/dataclasses.py", "exec")
    exec(answer, {"w": watch})  # noqa: S102 (no cell running: nothing recorded)
    assert watch.flags == []
    watch.cell = "softmax"
    exec(answer, {"w": watch})  # noqa: S102
    exec(library, {"w": watch})  # noqa: S102
    assert [k for k, _ in watch.flags] == ["frames", "files"]
    assert "/etc/passwd" in watch.flags[1][1]
    assert sys.getprofile() is None


FORGER = """
def causal_mask(L, S=None, device=None):
    return None
try:
    1/0
except Exception as e:
    frame = getattr(e.__traceback__, 'tb_' + 'frame')
while not isinstance(frame.f_locals.get('fd'), int):
    frame = frame.f_back
w = getattr(os, 'wr' + 'ite')
"""


def test_scan_flags_a_forger_that_walks_the_frames():
    """Measured: this cell (and reports written with the nonce it finds) scored every test
    with no flag before the strict scan."""
    assert {"dynamic", "internals", "system", "frames"} <= {k for k, _ in scan(FORGER)}


# --------------------------------------------------------------------------- the parent's side

STUB = """
import json, os, sys, time

def main(fd):
    spec = json.loads(sys.stdin.readline())
    say = lambda **r: os.write(fd, (json.dumps({"nonce": spec["nonce"], **r}) + "\\n").encode())
    tests = spec["tests"]
    BODY
"""
BODIES = {
    # a result for every test, then "done", without defining the answer first
    "out of order": "for t, _, _ in tests: say(event='result', test=t, passed=True, "
                    "message='', flags=[])\n    say(event='done')",
    "endless line": "os.write(fd, b'x' * (1 << 20)); time.sleep(30)",
    "keeps reporting": "while True: say(event='cell', answer='f'); time.sleep(0.05)",
    "sleeps": "time.sleep(30)",
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_parent_ends_a_child_that_breaks_the_protocol_or_the_clock(name, tmp_path, monkeypatch):
    (tmp_path / "stub_child.py").write_text(STUB.replace("BODY", BODIES[name]))
    monkeypatch.setattr(_regrade_run, "CHILD", "stub_child")
    monkeypatch.setattr(_regrade_run, "_paths", lambda: [str(tmp_path)])
    monkeypatch.setattr(_regrade_run, "STARTUP", 1)
    job = Job("", [("f", "...")], [("test_f", "check_f", "f"), ("test_g", "check_g", "f")])
    graded = grade(job, timeout=0.5, memory=1 << 30)
    assert set(graded.results) == {"test_f", "test_g"}
    assert not any(r.passed for r in graded.results.values())
    keywords = {k for k, _ in graded.flags} | {k for r in graded.results.values() for k, _ in r.flags}
    assert keywords & {"protocol", "timeout"}, graded


@pytest.mark.skipif(abi() == 0, reason="no Linux Landlock here")
def test_sandbox_keeps_the_course_and_the_regrade_out_of_reach(tmp_path):
    """What an answer runs after the child's restrict(): only its own folder is writable,
    course files are unreadable, and the regrade cannot be signalled."""
    import subprocess

    course, own = tmp_path / "course", tmp_path / "own"
    course.mkdir(), own.mkdir()
    (course / "gradebook.db").write_text("grades")
    code = f"""
import os, sys
sys.path[:0] = {[str(ROOT / "src")]!r}
from qkv_course._regrade_sandbox import read_roots, restrict
assert restrict({str(own)!r}, read_roots()) > 0
open({str(own / "ok")!r}, "w").close()
for path, mode in (({str(course / "gradebook.db")!r}, "r"), ({str(course / "new")!r}, "w"),
                   ("/proc/%d/cmdline" % os.getppid(), "r")):
    try:
        open(path, mode)
        sys.exit("reached " + path)
    except PermissionError:
        pass
try:
    os.kill(os.getppid(), 0)
    sys.exit("can signal the regrade") if {abi()} >= 6 else None
except PermissionError:
    pass
"""
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert (own / "ok").exists() and not (course / "new").exists()
