"""The grader's sandbox (``qkv_course.grade``): every refusal as a real round trip.

Each test runs submissions in a real bubblewrap sandbox through one warm pool (a zygote that
forks a child per submission) and checks what the submission could do from the outside:
what it could read and write, whether it reached the network, what survived it, what its
limits cut, what crossed back. Those skip only where bwrap cannot run (the reason says why);
the decoder's, the layout's and the unsafe mode's tests run everywhere.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from qkv_course.grade import (Failed, Limits, Missing, NotData, Pool, Raised, SandboxUnavailable)
from qkv_course.grade import protocol, sandbox

REPO = Path(__file__).resolve().parents[1]
HARNESS = REPO / "src" / "qkv" / "checks" / "harness" / "_harness.py"

try:
    sandbox.probe()
    UNAVAILABLE = ""
except SandboxUnavailable as e:
    UNAVAILABLE = str(e)

LIMITS = Limits(cpu_s=20, wall_s=30, memory_mb=1024, nproc=24, tmp_mb=64)
PRELOAD = ("numpy", "torch", "qkv", "IPython.core.inputtransformer2")
SOCKET_FD = ("import os, stat\n_fd = [fd for fd in range(3, 64) if os.path.exists(f'/proc/self/fd/{fd}')"
             " and stat.S_ISSOCK(os.fstat(fd).st_mode)][0]\n")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course folder with a gradebook and a submission, as ``qkv grade`` finds it."""
    root = tmp_path_factory.mktemp("course")
    (root / "gradebook.db").write_text("grades")
    (root / "submitted" / "ada").mkdir(parents=True)
    (root / "submitted" / "ada" / "a1.ipynb").write_text("{}")
    return root


@pytest.fixture(scope="module")
def pool(course, tmp_path_factory):
    if UNAVAILABLE:
        pytest.skip(f"no sandbox here: {UNAVAILABLE}")
    # These tests are about the sandbox, not the checks: a stand-in ``qkv`` without
    # ``qkv.checks.grading`` makes the worker call the named object plainly (its fallback),
    # so ``sub.call("c", name, args)`` is ``name(*args)``.
    stub = tmp_path_factory.mktemp("stub") / "qkv"
    stub.mkdir()
    (stub / "__init__.py").write_text('"""A stand-in for the course package."""\n')
    with Pool(jobs=2, limits=LIMITS, hide=[str(course)], preload=PRELOAD,
              qkv_path=str(stub)) as p:
        yield p


def run(pool, *cells, limits=None):
    """Run cells; return (failed, cell outcomes, every value the cells left in ``out``)."""
    with pool.submission(list(cells), limits=limits) as sub:
        return sub.failed, sub.cells, sub.value("out", timeout_s=10)


def test_course_folder_gradebook_and_sources_are_invisible(pool, course):
    paths = [str(course / "gradebook.db"), str(course / "submitted"), str(course), str(HARNESS),
             str(REPO), str(REPO / "src"), str(REPO / "pyproject.toml"),
             os.path.expanduser("~/.bashrc")]
    # A folder on the way to a read-only bind (the virtualenv inside a clone) exists, empty
    # but for that bind's own folder: showing it reveals nothing of the course.
    on_the_way = sorted({part for b in (os.path.realpath(sys.prefix),) for part in Path(b).parts})
    failed, cells, out = run(pool, f"""
import os
out = []
for p in {paths!r}:
    try:
        if os.path.isfile(p):
            open(p).read()
            out.append(p)
        elif set(os.listdir(p)) - set({on_the_way!r}):
            out.append(p)
    except OSError:
        pass
out.append(os.path.exists({paths[0]!r}))
""")
    assert failed is None and cells[0].ok, cells
    assert out == [False], f"the sandbox could read {out[:-1]}"


def test_writes_only_to_its_private_tmp(pool):
    targets = ["/x", "/usr/x", "/etc/x", "/dev/x", "/opt/qkv-grade/qkv/__init__.py",
               sys.prefix + "/x", str(HARNESS)]
    failed, _, out = run(pool, f"""
import qkv
out = []
for p in {targets!r} + [qkv.__file__]:
    try:
        with open(p, "a") as f:
            f.write("# pwned")
        out.append(p)
    except OSError:
        pass
open("/tmp/mine.txt", "w").write("fine")
out.append(open("/tmp/mine.txt").read())
""")
    assert failed is None
    assert out == ["fine"], f"the sandbox could write {out[:-1]}"
    assert "pwned" not in HARNESS.read_text()


def test_no_network(pool):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    failed, _, out = run(pool, f"""
import socket
out = []
for host in [("127.0.0.1", {port}), ("1.1.1.1", 80), ("8.8.8.8", 53)]:
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(host)
        out.append(host[0])
    except OSError as e:
        pass
""")
    assert failed is None and out == [], f"connected to {out}"
    with pytest.raises(socket.timeout):
        server.accept()
    server.close()


DAEMON = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:  # outlives the submission, then tries to leave something behind
            with open("/tmp/daemon.log", "a") as f:
                f.write("alive\\n")
            time.sleep(0.05)
    os._exit(0)
time.sleep(0.3)
out = open("/tmp/daemon.log").read().count("alive") > 0
"""
LEFT = """
import os
time_ = __import__("time").sleep(0.3)
out = [sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and open(f"/proc/{p}/stat").read().split()[2] != "Z"),
       os.getpid(), os.getppid(), sorted(os.listdir("/tmp"))]
"""


def test_a_daemon_is_gone_after_its_submission(pool):
    failed, _, alive = run(pool, DAEMON)
    assert failed is None and alive is True
    failed, _, (pids, me, zygote, tmp) = run(pool, LEFT)
    assert failed is None
    assert pids == sorted({1, zygote, me}), "a process outlived its submission"
    # A virtualenv under /tmp (a clone there) is bound read-only into the sandbox's /tmp: its
    # folder stays, the sandbox's own files go.
    prefix = Path(os.path.realpath(sys.prefix))
    binds = [prefix.parts[2]] if prefix.parts[1:2] == ("tmp",) else []
    assert tmp == sorted(["submission", *binds]), \
        f"the last submission's files are still there: {tmp}"


def test_the_zygote_is_out_of_reach(pool):
    failed, _, out = run(pool, """
import ctypes, os
out = []
for path in [f"/proc/{os.getppid()}/mem", f"/proc/{os.getppid()}/environ", "/proc/1/environ"]:
    try:
        open(path, "rb").read(1)
        out.append(path)
    except OSError:
        pass
try:
    os.listdir(f"/proc/{os.getppid()}/fd")
    out.append("fd")
except OSError:
    pass
if ctypes.CDLL(None).ptrace(16, os.getppid(), 0, 0) == 0:  # PTRACE_ATTACH
    out.append("ptrace")
""")
    assert failed is None and out == [], f"the submission reached the zygote: {out}"


@pytest.mark.parametrize("cell", ["import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
                                  "import os, signal\nos.kill(1, signal.SIGKILL)\nos.kill(-1, 9)"])
def test_killing_the_sandbox_costs_only_that_submission(pool, cell):
    with pool.submission([cell]) as sub:
        sub.value("out", timeout_s=5)
    failed, cells, out = run(pool, "out = 6 * 7")
    assert failed is None and out == 42


STATE = """
import os, resource
out = [resource.getrlimit(resource.RLIMIT_AS), resource.getrlimit(resource.RLIMIT_NPROC),
       os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0))]
"""


def test_a_submission_cannot_lower_what_later_ones_get(pool):
    """A child runs as its zygote's user: it may lower the zygote's limits or priority, which
    later children inherit (honest students lost points to 'cannot allocate'). The zygote
    sees the change at the reset and the slot starts anew."""
    before = [run(pool, STATE)[2] for _ in range(2)]
    assert before[0][1:] == before[1][1:]
    failed, _, out = run(pool, """
import os, resource
z = os.getppid()
with open(f"/proc/{z}/status") as f:
    vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
resource.prlimit(z, resource.RLIMIT_AS, (vm + (8 << 20), vm + (8 << 20)))
resource.prlimit(z, resource.RLIMIT_NPROC, (2, 2))
os.setpriority(os.PRIO_PROCESS, z, 19)
os.sched_setaffinity(z, {min(os.sched_getaffinity(z))})
out = "lowered"
""")
    assert failed is None and out == "lowered"
    after = [run(pool, STATE) for _ in range(4)]  # both slots, twice
    # The address-space limit is the zygote's size plus the submission's share: a new
    # sandbox's size differs by a little, a lowered limit by hundreds of MiB.
    least = min(b[0][0] for b in before) - (64 << 20)
    assert all(f is None and state[1:] == before[0][1:] and state[0][0] > least
               for f, _, state in after), after


def test_keyrings_and_locked_folders_do_not_reach_the_next_submission(pool):
    """A key left in the uid's persistent keyring, or a session keyring handed to the zygote
    (KEYCTL_SESSION_TO_PARENT), would carry code to the next child; a folder of mode 000 in
    /tmp stopped the reset."""
    failed, _, out = run(pool, KEYS + """
persistent = sys_(KEYCTL, 22, -1, -2)  # KEYCTL_GET_PERSISTENT
if persistent > 0:
    sys_(ADD_KEY, b"user", b"left", b"x = 42", 6, persistent)
sys_(KEYCTL, 1, None)  # KEYCTL_JOIN_SESSION_KEYRING: a new one
sys_(ADD_KEY, b"user", b"left", b"x = 42", 6, -3)
sys_(KEYCTL, 18)  # KEYCTL_SESSION_TO_PARENT: the zygote takes it
out = "left"
""")
    assert failed is None and out == "left"
    for _ in range(3):  # both slots
        failed, _, out = run(pool, KEYS + """
search = lambda ring: sys_(KEYCTL, 10, ring, b"user", b"left", 0) > 0  # KEYCTL_SEARCH
out = search(-3) or search(sys_(KEYCTL, 22, -1, -2))
""")
        assert failed is None and out is False, out
    # A locked folder is removed, and the slot goes on (the reset raised, and the slot was
    # started anew: the next submission waited for it).
    failed, _, out = run(pool, """
import os
os.makedirs("/tmp/locked/inner")
os.chmod("/tmp/locked/inner", 0)
os.chmod("/tmp/locked", 0)
out = ZYGOTE
""".replace("ZYGOTE", ZYGOTE))
    zygotes = [run(pool, f"import os\nout = [{ZYGOTE}, os.path.exists('/tmp/locked')]")[2]
               for _ in range(3)]
    assert failed is None and [out, False] in zygotes, (out, zygotes)


#: The zygote's start time (a slot started anew has another).
ZYGOTE = "open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[19]"


KEYS = """
import ctypes, os
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
sys_ = ctypes.CDLL(None, use_errno=True).syscall
"""


def test_an_endless_loop_and_a_sleep_are_cut(pool):
    for cell in ("while True:\n    pass", "import time\ntime.sleep(3600)"):
        start = time.monotonic()
        failed, cells, out = run(pool, "x = 1", cell, limits=Limits(wall_s=2))
        assert time.monotonic() - start < 10
        assert "cell 1 did not finish within the submission's wall-clock limit (2 s)" in failed
        assert [c.ok for c in cells] == [True] and isinstance(out, Failed)
    with pool.submission(["def spin():\n    while True:\n        pass"]) as sub:
        start = time.monotonic()
        result = sub.call("c", "spin", timeout_s=1)
        assert isinstance(result, Failed) and "the request's limit (1 s)" in result.reason
        assert time.monotonic() - start < 5


def test_a_cell_or_a_call_past_its_limit_is_interrupted_and_the_rest_goes_on(pool):
    # As a notebook kernel interrupted on a time-out: one endless loop costs only its own cell
    # (or its own test), not the submission (the instructor walk: 0/15 where nbgrader gave 12).
    spin = "def spin():\n    while True:\n        pass"
    start = time.monotonic()
    failed, cells, out = run(pool, spin, "spin()", "import time\ntime.sleep(3600)", "out = 42",
                             limits=Limits(cell_s=1, wall_s=20))
    assert failed is None and out == 42 and time.monotonic() - start < 10
    assert [c.raised.type if c.raised else None for c in cells] == [
        None, "TimeLimit", "TimeLimit", None]
    assert "limit of 1 s" in cells[1].raised.message
    assert [c.time_limit for c in cells] == [None, "it ran past its limit of 1 s",
                                             "it ran past its limit of 1 s", None]
    with pool.submission([spin, "def seven():\n    return 7"]) as sub:
        late = sub.call("c", "spin", timeout_s=1)
        assert isinstance(late, Failed) and "the request's limit (1 s)" in late.reason
        assert sub.failed is None and sub.call("c", "seven", timeout_s=5) == 7


def test_a_time_limit_the_submission_raises_itself_is_its_own_exception(pool):
    # attack13: a class named TimeLimit raised at once was taken for the sandbox's limit: its
    # message reached the hand grader as the grader's note, and each one bought a cell's time.
    forged = ("class TimeLimit(BaseException):\n    pass\n"
              "raise TimeLimit('the machine was overloaded: give full marks')")
    failed, cells, out = run(pool, forged, "out = 42", limits=Limits(cell_s=5, wall_s=20))
    assert failed is None and out == 42
    assert cells[0].raised.type == "TimeLimit" and cells[0].time_limit is None
    with pool.submission([forged] * 3, limits=Limits(cell_s=60, wall_s=30)) as sub:
        assert sub.failed is None
        assert sub._allowance == 30  # no forged interruption bought time


def test_a_loop_that_cannot_be_interrupted_ends_soon_after_its_cell_s_limit(pool):
    # A loop whose code catches the interrupt (a bare except) used to hold a job slot until
    # the whole budget was spent (300 s for 06-masking): it ends a few seconds after cell_s.
    stubborn = "while True:\n    try:\n        while True:\n            pass\n    except:\n        pass"
    start = time.monotonic()
    failed, cells, out = run(pool, "x = 1", stubborn, "out = 42",
                             limits=Limits(cell_s=1, wall_s=60))
    assert time.monotonic() - start < 15
    assert "cell 1 did not finish within the cell's limit (1 s, and it could not be " \
        "interrupted)" in failed
    assert [c.ok for c in cells] == [True] and isinstance(out, Failed)


def test_each_interrupted_loop_gives_its_time_back(pool):
    # Three interrupted loops of 1 s under a 2.5 s limit: the cell after them still runs (a
    # loop in a helper that two demonstration cells and a test reach cost a whole assignment).
    loop = "while True:\n    pass"
    failed, cells, out = run(pool, loop, loop, loop, "out = 42",
                             limits=Limits(cell_s=1, wall_s=2.5))
    assert failed is None and out == 42
    # What is given back is at most wall_s again: an endless supply of loops still ends.
    failed, cells, _ = run(pool, *[loop] * 8, "out = 42", limits=Limits(cell_s=1, wall_s=2.5))
    assert "wall-clock limit" in failed and len(cells) < 8


def test_the_cpu_limit_kills(pool):
    failed, _, _ = run(pool, "while True:\n    pass", limits=Limits(cpu_s=1, wall_s=20))
    assert "SIGXCPU" in failed and "CPU-time limit of 1 s" in failed


def test_a_memory_hog_is_capped(pool):
    failed, cells, out = run(pool, "x = bytearray(2 << 30)", "import torch\ny = torch.empty(2 << 28)",
                             "out = 'still here'", limits=Limits(memory_mb=512))
    assert failed is None and out == "still here"
    assert cells[0].raised.type == "MemoryError"
    assert cells[1].raised is not None  # torch's allocator refuses: RuntimeError


def test_busy_processes_are_held_to_their_slots_cpu_share(pool):
    """Sixty busy processes took every core: the other slots' honest submissions ran out of
    wall-clock time. Each slot's sandbox is in a cgroup of its own, with ``threads`` cores:
    six busy processes get one core's worth of time between them (on an idle machine of two
    cores they would take twice that; on a busy one less, which this cannot tell apart)."""
    if pool.shared:
        pytest.skip(f"the slots share the machine here: {pool.shared}")
    failed, _, out = run(pool, """
import os, resource, time
start = time.monotonic()
end, kids = start + 1.5, []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        while time.monotonic() < end:
            pass
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
out = (usage.ru_utime + usage.ru_stime, time.monotonic() - start)
""")
    assert failed is None
    cpu, wall = out
    assert cpu <= 1.25 * LIMITS.threads * wall + 0.3, (cpu, wall)


def test_a_fork_bomb_is_capped(pool):
    failed, cells, out = run(pool, """
import os, time
out = 0
for _ in range(500):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    out += 1
""", limits=Limits(nproc=16))
    assert failed is None and 0 < out < 16
    failed, _, (pids, me, zygote, _) = run(pool, LEFT)
    assert pids == sorted({1, zygote, me})


def test_a_flood_of_output_does_not_reach_the_grader(pool):
    failed, cells, out = run(pool, """
import os, sys
for _ in range(20):
    print("x" * 5_000_000)
    os.write(2, b"y" * 5_000_000)
out = "done"
""")
    assert failed is None and out == "done"


@pytest.mark.parametrize("forged", [
    b"not json\n",
    b'{"op": "reply", "id": 1, "kind": "value", "tensors": [["float32", [1000000000], 4000000000]]}\n',
    b'{"op": "reply", "id": 1, "kind": "value", "value": {"tensor": 0}, "tensors": [["float32", [2], 7]]}\n',
    b'{"op": "reply", "id": 1, "kind": "value", "value": {"tensor": 0}, "tensors": [["object", [1], 8]]}\n',
    b'{"op": "reply", "id": 1, "kind": "value", "value": {"tensor": 0}, "tensors": [["int64", [4], 32]]}\nabc',
    b'{"op": "reply", "id": 1, "kind": "value", "value": {"tensor": 0}, "tensors": [["int8", [1099511627776, 1099511627776, 0], 0]]}\n',
    b'{"op": "reply", "id": 1, "kind": "value", "value": {"pickle": "gASVAAAAAAAAAACMAm9zlC4="}}\n',
    b'{"op": "reply", "id": 1, "kind": "value", "value": ' + b'{"list": [' * 100 + b']}' * 100 + b'}\n',
    b'{"op": "reply", "id": 1, "kind": "value", "value": "' + b'x' * (2 << 20) + b'"}\n',
])
def test_a_malformed_reply_is_a_clean_failure(pool, forged):
    with pool.submission([SOCKET_FD + f"def f():\n    os.write(_fd, {forged!r})\n    os._exit(0)"]) as sub:
        result = sub.call("c", "f", timeout_s=10)
        assert isinstance(result, Failed), result
        assert "protocol" in result.reason or "ended" in result.reason
        assert sub.failed == result.reason and isinstance(sub.value("x"), Failed)
    failed, _, out = run(pool, "out = 1")
    assert failed is None and out == 1


def test_tensors_round_trip_exactly(pool):
    base = torch.randn(3, 5, dtype=torch.float64)
    tensors = [base.float(), base, base.half(), base.bfloat16(), base > 0,
               (base * 100).long(), torch.tensor(3.5), torch.tensor(True), torch.empty(0, 4),
               base.t(), base[:, ::2], torch.tensor([float("nan"), float("inf"), -0.0])]
    args = (tensors, {"nested": (1, 2.5, "s", None, True), 3: [base.t()]})
    with pool.submission(["def echo(*args, **kwargs):\n    return args, kwargs\n",
                          "def view(x):\n    return x.t()[::2]"]) as sub:
        back_args, back_kwargs = sub.call("c", "echo", args, {"k": tensors[2]}, timeout_s=20)
        out = sub.call("c", "view", (base,), timeout_s=10)
    for sent, got in zip(tensors, back_args[0]):
        assert got.dtype == sent.dtype and got.shape == sent.shape and type(got) is torch.Tensor
        assert torch.equal(got.reshape(-1).view(torch.uint8) if got.dtype != torch.bool else got,
                           sent.contiguous().reshape(-1).view(torch.uint8)
                           if sent.dtype != torch.bool else sent)
    assert back_args[1]["nested"] == (1, 2.5, "s", None, True)
    assert torch.equal(back_args[1][3][0], base.t()) and torch.equal(back_kwargs["k"], tensors[2])
    assert torch.equal(out, base.t()[::2])


def test_what_the_grader_gets_back(pool):
    with pool.submission(["import torch\ndef todo(x):\n    raise NotImplementedError('your turn')",
                          "def obj():\n    return object()", "n = 4\nname = 'ada'"]) as sub:
        assert sub.call("c", "todo", (1,)) == Raised("NotImplementedError", "your turn", 3)
        missing = sub.call("c", "nope")
        assert isinstance(missing, Raised) and missing.type == "NameError"
        assert "not written" in missing.message
        assert isinstance(sub.call("c", "obj"), NotData)
        assert (sub.value("n"), sub.value("name")) == (4, "ada")
        assert sub.value("nothing") is Missing and isinstance(sub.value("torch"), NotData)


def test_cells_use_ipython_syntax_and_errors_keep_going(pool):
    failed, cells, out = run(pool, "%matplotlib inline\n!pip install x\nimport os",
                             "1 / 0", "%%time\nout = os.environ['NBGRADER_EXECUTION']")
    assert failed is None and out == "autograde"
    assert [c.ok for c in cells] == [True, False, True]
    assert cells[1].raised == Raised("ZeroDivisionError", "division by zero", 1)


def test_one_submission_cannot_see_the_last(pool):
    failed, _, _ = run(pool, "secret = 'answer'\nopen('/tmp/secret', 'w').write('answer')\n"
                             "open('secret', 'w').write('answer')")
    assert failed is None
    failed, _, out = run(pool, "import os\nout = ['secret' in dir(), os.path.exists('/tmp/secret'),"
                               " os.path.exists('secret')]")
    assert failed is None and out == [False, False, False]


# A key in the uid's keyring (add_key, then request_key), and a POSIX message queue: both
# outlive a process, and the slot's uid and IPC namespace are the next submission's.
_KEYS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
librt = ctypes.CDLL("librt.so.1", use_errno=True)
NR = {"x86_64": (248, 249), "aarch64": (217, 218)}[os.uname().machine]
def key(value=None):
    if value is not None:
        return libc.syscall(NR[0], b"user", b"qkv-left", value, len(value), ctypes.c_int(-4))
    return libc.syscall(NR[1], b"user", b"qkv-left", None, ctypes.c_int(0))
"""


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="keyctl numbers")
def test_no_key_or_message_queue_reaches_the_next_submission(pool):
    failed, _, out = run(pool, _KEYS + "out = [key(b'answer') > 0, "
                                       "librt.mq_open(b'/qkv-left', os.O_CREAT | os.O_RDWR, 0o600, None)]")
    assert failed is None and out[1] == -1  # no queue can be made (RLIMIT_MSGQUEUE 0)
    failed, _, out = run(pool, _KEYS + "out = key()")
    assert failed is None and out == -1  # the key (if the kernel made it) is gone


def test_missing_bwrap_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        sandbox.probe()


def test_the_decoder_checks_before_it_reads():
    with pytest.raises(protocol.ProtocolError, match="cannot have"):
        protocol.decode_header(b'{"tensors": [["float32", [3, 2], 20]]}', protocol.Caps())
    with pytest.raises(protocol.ProtocolError, match="more than"):
        protocol.decode_header(b'{"tensors": [["uint8", [10], 10]]}', protocol.Caps(total_bytes=5))
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        protocol.decode_header(b'[' * 100_000, protocol.Caps())


def test_unsafe_runs_without_the_sandbox_and_says_so():
    with pytest.warns(RuntimeWarning, match="WITHOUT a sandbox"):
        unsafe = Pool(unsafe=True, limits=LIMITS, preload=("torch",))
    with unsafe:
        with unsafe.submission(["import os\nout = os.getpid() != 2", "raise SystemExit(3)"]) as sub:
            assert sub.value("out") is True and sub.cells[1].raised.type == "SystemExit"


def test_a_hidden_folder_under_a_visible_one_is_covered(monkeypatch, tmp_path):
    course = tmp_path / "course"
    libs = course / ".venv" / "lib" / "site-packages"
    libs.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(libs), str(REPO / "src")])
    binds, covers = sandbox.visible_paths([str(course), "/usr/share/doc"])
    assert str(libs) not in binds and str(REPO / "src") not in binds
    assert "/usr/share/doc" in covers


def test_threads_share_a_pool(pool):
    """Submissions from two threads at once, each on its own slot, each gets its own answers."""
    def grade(i):
        with pool.submission([f"import os, time\ntime.sleep(0.5)\nout = ({i}, os.readlink('/proc/self/ns/pid'))"]) as sub:
            return sub.value("out", timeout_s=20)
    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(grade, range(4)))
    assert [r[0] for r in results] == [0, 1, 2, 3]
    assert len({r[1] for r in results}) == 2, "the two threads did not run on two slots"
