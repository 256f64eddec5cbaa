"""The sandbox a submission runs in: Debian's bubblewrap (``bwrap``), and the zygote inside it.

What the sandbox sees (:func:`bwrap_command`): ``/usr`` and the system's library links,
a few files of ``/etc``, Python's and the virtual environment's folders, the folders on the
grader's ``sys.path`` outside the course, and a read-only copy of the ``qkv`` package (with
this package's worker) at ``/opt/qkv-grade`` (:func:`make_library`) — all read-only. The course
folder (``submitted/``, ``gradebook.db``, ``source/``, the repository with ``qkv``'s live source)
is not there at all: nothing outside that list is mounted, and a folder to hide that lies under
one of them is covered by an empty tmpfs. The only writable place is a private, size-capped
``/tmp``. It runs as an unprivileged uid without capabilities, in its own PID, network (no
interface but a loopback that is down), IPC, UTS and cgroup namespaces; ``/proc`` shows only
its own processes; it dies with the grader (``--die-with-parent``) and has no terminal
(``--new-session``). As an ordinary user it has its own user namespace too; as root it has none
and the worker becomes an unprivileged uid of its own first thing (see :func:`_namespaces`).

One sandbox per job slot (:class:`.slot.Slot`) runs a zygote (:mod:`.zygote`) that forks a
child per submission; the slot is restarted whole whenever its zygote stops answering. Where
bwrap is missing or cannot create namespaces, :func:`probe` raises :class:`SandboxUnavailable`
with what is missing and how to install or allow it.
"""

from __future__ import annotations

import compileall
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .limits import Limits

INSIDE_LIB = "/opt/qkv-grade"  # where the qkv copy and the worker appear in the sandbox
NOBODY = 65534
BOOT = "import sys; sys.path.insert(0, {lib!r}); from _qkv_grade.zygote import main; main()"
# /etc files Python, torch and matplotlib read; nothing else of /etc is visible.
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group",
       "nsswitch.conf", "fonts", "alternatives", "mime.types")
INSTALL = ("install bubblewrap: `sudo apt-get install bubblewrap` (Debian, Ubuntu), "
           "`sudo dnf install bubblewrap` (Fedora), or `make test`, which installs it on Debian")
ALLOW_USER = ("as an ordinary user bwrap needs unprivileged user namespaces: on Ubuntu 24.04+ "
              "allow them with `sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`, on "
              "older Debian with `sudo sysctl kernel.unprivileged_userns_clone=1`")
ALLOW_ROOT = ("as root bwrap needs CAP_SYS_ADMIN to create namespaces: in a Docker container "
              "start it with `--privileged` (or `--cap-add SYS_ADMIN --security-opt "
              "seccomp=unconfined --security-opt apparmor=unconfined`)")


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here; the message says what is missing and how to fix it."""


class NoNamespaces(SandboxUnavailable):
    """bwrap is installed and runs, but cannot create the sandbox's namespaces here (a
    container that forbids them): the one failure after which grading without the sandbox may
    be chosen (the Gradescope engine does). A worker that fails to start inside a sandbox that
    did start (a broken image, an import error) is a :class:`SandboxUnavailable`, never this."""


def probe(bwrap: Optional[str] = None) -> str:
    """The path of a ``bwrap`` that can create the sandbox's namespaces here.

    Raises:
        SandboxUnavailable: bwrap is not installed or does not run; :class:`NoNamespaces`
            where it runs but cannot create namespaces.
    """
    bwrap = bwrap or shutil.which("bwrap") or ""
    if not os.access(bwrap, os.X_OK):
        raise SandboxUnavailable(f"bubblewrap (bwrap) is not installed; {INSTALL}; "
                                 "or grade without a sandbox with --unsafe (not a boundary)")
    args = [bwrap, *_namespaces(bwrap), *_system_binds(), "--proc", "/proc", "--dev", "/dev",
            "/usr/bin/env", "true"]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SandboxUnavailable(f"{bwrap} does not run: {e}; {INSTALL}") from None
    if done.returncode != 0:
        raise NoNamespaces(f"{bwrap} cannot create a sandbox here: "
                                 f"{done.stderr.strip()[-300:] or done.returncode}; "
                                 f"{ALLOW_ROOT if os.geteuid() == 0 else ALLOW_USER}")
    return bwrap


def _namespaces(bwrap: str) -> List[str]:
    """bwrap's namespace options.

    As an ordinary user: a new user namespace in which the sandbox is uid 65534 (its processes
    are counted apart from the user's, for ``RLIMIT_NPROC``) and may create no other. As root:
    no user namespace (root mapped into one would be exempt from ``RLIMIT_NPROC`` and could read
    every file root owns); bwrap keeps only CAP_SETUID/CAP_SETGID, with which the worker becomes
    an unprivileged uid of its own (:func:`sandbox_uid`) before it imports anything.
    """
    ns = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
          "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if os.geteuid() == 0:
        return ns + ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    ns += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    return ns + (["--disable-userns"] if _supports(bwrap, "--disable-userns") else [])


def _supports(bwrap: str, option: str) -> bool:
    try:
        out = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in out.stdout + out.stderr


_uids = itertools.count(1)  # next() on it is atomic: slots start from several threads


def sandbox_uid() -> Optional[int]:
    """As root: a fresh unprivileged uid for one sandbox (none of the host's users has it), so
    that ``RLIMIT_NPROC`` counts that sandbox's processes alone. Otherwise ``None``."""
    if os.geteuid() != 0:
        return None
    return 1_500_000_000 + (os.getpid() % 100_000) * 1000 + next(_uids) % 1000


def _system_binds() -> List[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def _parents(paths: Sequence[str]) -> List[str]:
    """Each folder above ``paths``, made world-readable in the sandbox (bwrap makes them 0700)."""
    out: List[str] = []
    for path in paths:
        for parent in reversed(Path(path).parents[:-1]):
            if str(parent) not in out and not _under(str(parent), "/usr"):
                out += ["--perms", "0755", "--dir", str(parent)]
    return out


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def visible_paths(hide: Sequence[str]) -> Tuple[List[str], List[str]]:
    """What to bind read-only (Python's prefixes, ``sys.path``), and what of it to cover.

    Args:
        hide: folders that must not be visible (the course folder, the repository).

    Returns:
        ``(binds, covers)``: folders bound at their own path, folders covered by a tmpfs.
    """
    hidden = [os.path.realpath(h) for h in hide]
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    prefixes.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    binds = set(prefixes)
    for entry in sys.path:  # installed libraries only: never a source tree (it may be the course's)
        real = os.path.realpath(entry) if entry else ""
        if not real or any(_under(real, p) for p in prefixes):
            continue  # under a prefix: visible already
        installed = not {"site-packages", "dist-packages"}.isdisjoint(Path(real).parts)
        if os.path.isdir(real) and installed and not any(_under(real, h) for h in hidden) \
                and not any(os.path.isdir(os.path.join(real, n)) for n in ("qkv", "qkv_course")):
            binds.add(real)
    binds = {b for b in binds if b != "/" and not _under(b, "/usr") and os.path.isdir(b)}
    system = ["/usr", *(t for t in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
                        if os.path.isdir(t) and not os.path.islink(t))]
    covers = [h for h in hidden if any(_under(h, b) and h != b for b in [*system, *binds])]
    return sorted(binds, key=len), covers


def make_library(qkv_path: Optional[str] = None) -> str:
    """A read-only copy of the ``qkv`` package and of this package's worker, byte-compiled.

    Args:
        qkv_path: the ``qkv`` package folder to copy (default: the one Python imports).

    Returns:
        the new folder (the caller removes it), readable by every uid (the sandbox's too).
    """
    if qkv_path is None:
        spec = find_spec("qkv")
        if spec is None or not spec.submodule_search_locations:
            raise SandboxUnavailable("the qkv package is not importable; install the course "
                                     "(`make venv`) or pass qkv_path=")
        qkv_path = list(spec.submodule_search_locations)[0]
    lib = tempfile.mkdtemp(prefix="qkv-grade-lib-")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(qkv_path, os.path.join(lib, "qkv"), ignore=skip)
    shutil.copytree(os.path.dirname(os.path.abspath(__file__)), os.path.join(lib, "_qkv_grade"),
                    ignore=skip)
    compileall.compile_dir(lib, quiet=1)
    for root, dirs, files in os.walk(lib):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    return lib


def hidden_roots(qkv_path: Optional[str], hide: Sequence[str]) -> List[str]:
    """The folders never shown: ``hide``, the working folder, the repository ``qkv`` lives in."""
    roots = [*hide, os.getcwd()]
    spec = find_spec("qkv") if qkv_path is None else None
    source = qkv_path or (list(spec.submodule_search_locations)[0] if spec and
                          spec.submodule_search_locations else None)
    if source:
        parent = Path(source).resolve().parent
        if "site-packages" not in parent.parts and "dist-packages" not in parent.parts:
            roots.append(str(parent.parent if parent.name == "src" else parent))
    return [r for r in roots if os.path.realpath(r) != "/"]  # the grader started in / hides nothing


def environment(limits: Limits, home: str) -> Dict[str, str]:
    threads = str(limits.threads)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": home,
           "USER": "sandbox", "LOGNAME": "sandbox",
           "TMPDIR": home, "MPLBACKEND": "Agg", "MPLCONFIGDIR": os.path.join(home, ".matplotlib"),
           "NBGRADER_EXECUTION": "autograde", "OMP_NUM_THREADS": threads,
           "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MALLOC_ARENA_MAX": "2",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.update({k: v for k, v in os.environ.items() if k.startswith("QKV_")})
    return env


def bwrap_command(bwrap: str, lib: str, limits: Limits, binds: Sequence[str],
                  covers: Sequence[str], config: Dict[str, Any]) -> List[str]:
    """The bwrap command line that starts a zygote (see the module's docstring)."""
    # The private /tmp first: a folder bound below comes after it (a course cloned under /tmp,
    # its virtualenv with it, stays visible read-only instead of being covered by the tmpfs).
    args = [bwrap, *_namespaces(bwrap), "--hostname", "sandbox", "--clearenv", *_system_binds(),
            "--perms", "1777", "--size", str(limits.tmp_mb << 20), "--tmpfs", "/tmp",
            *_parents([*binds, INSIDE_LIB])]
    for b in binds:
        args += ["--ro-bind", b, b]
    for c in covers:  # a hidden folder under a bound one: an empty tmpfs over it
        args += ["--tmpfs", c]
        args += [a for b in binds if _under(b, c) and b != c for a in ("--ro-bind", b, b)]
    args += ["--ro-bind", lib, INSIDE_LIB, "--proc", "/proc", "--dev", "/dev",
             "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp"]
    for k, v in environment(limits, "/tmp").items():
        args += ["--setenv", k, v]
    return args + [sys.executable, "-I", "-B", "-c", BOOT.format(lib=INSIDE_LIB), json.dumps(config)]


def zygote_command(bwrap: str, lib: str, limits: Limits, binds: Sequence[str],
                   covers: Sequence[str], preload: Sequence[str], ctl_fd: int,
                   unsafe_tmp: Optional[str] = None) -> Tuple[List[str], Dict[str, Any]]:
    """The command that starts a slot's zygote, and Popen's extra arguments for it.

    Args:
        ctl_fd: the zygote's end of its control socket (inherited at the same number).
        unsafe_tmp: run without bwrap (unsafe), in this folder; ``None``: in the sandbox.
    """
    # the grader's sys.path entries the sandbox sees (the others are hidden or Python's own)
    sys_path = [os.path.realpath(p) for p in sys.path if p and os.path.realpath(p) in binds]
    config = {"ctl_fd": ctl_fd, "sandboxed": unsafe_tmp is None, "tmp": unsafe_tmp or "/tmp",
              "uid": None if unsafe_tmp else sandbox_uid(), "preload": list(preload),
              "sys_path": sys_path,
              # what the reset between submissions leaves in /tmp: the folders made for the
              # read-only binds under it (root's, not the sandbox uid's to write)
              "keep": sorted({"/tmp/" + Path(b).relative_to("/tmp").parts[0]
                              for b in binds if _under(b, "/tmp") and b != "/tmp"})}
    if unsafe_tmp is None:
        return bwrap_command(bwrap, lib, limits, binds, covers, config), {}
    argv = [sys.executable, "-I", "-B", "-c", BOOT.format(lib=lib), json.dumps(config)]
    return argv, {"env": environment(limits, unsafe_tmp), "cwd": unsafe_tmp}
