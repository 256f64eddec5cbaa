"""What holds for the whole checks package: what it exports, how its modules depend on qkv,
and what every check does whatever the exercise (silence, the random state, the notices)."""

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import qkv
from answers_efficient import CHUNKED_RIGHT
from answers_lookup import SOFTMAX_RIGHT
from answers_masking import padding_no_device
from answers_multi_head import MHA_RIGHT
from answers_scaling import SDPA_RIGHT, SDPA_WRONG, make_sdpa
from qkv import checks
from qkv.checks import grading
from qkv.checks import check_scaled_dot_product_attention, check_softmax

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# check_question judges an answer to a question, not a function (test_checks_questions.py).
QUESTION_CHECK = "check_question"
CHECKS = sorted(n for n in checks.__all__ if n.startswith("check_") and n != QUESTION_CHECK)
# One public check module per reference module, named after it (test_concept_map.py pairs them).
# (result.py and grading.py are public too, but check nothing: the result type, the grader's API.)
MODULES = sorted(p.stem for p in Path(checks.__file__).parent.glob("*.py")
                 if not p.stem.startswith("_") and p.stem not in ("result", "grading"))


@pytest.mark.parametrize("name", MODULES)
def test_each_check_module_declares_its_checks(name):
    module = importlib.import_module(f"qkv.checks.{name}")
    defined = {n for n, f in vars(module).items()
               if n.startswith("check_") and f.__module__ == module.__name__}
    assert defined and sorted(module.__all__) == sorted(defined)


def test_every_check_is_exported():
    declared = {n for name in MODULES for n in importlib.import_module(f"qkv.checks.{name}").__all__}
    assert declared == set(CHECKS) == {n for n in dir(checks) if n.startswith("check_")} - {QUESTION_CHECK}


def _imports(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node.level, node.module or "", [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            yield 0, "", [a.name for a in node.names]


CHECKS_DIR = Path(checks.__file__).parent
SUBPACKAGES = ("harness", "mistakes")  # (and the question banks, _question*.py)


def _where(path: Path) -> str:
    """The sub-package a module of the checks belongs to ("" for the top level)."""
    parts = path.relative_to(CHECKS_DIR).parts
    return parts[0] if len(parts) > 1 else ""


@pytest.mark.parametrize("path", sorted(CHECKS_DIR.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(CHECKS_DIR)))
def test_check_modules_use_only_public_names_across_packages(path):
    """A check module imports no other check module; across sub-packages (harness, mistakes)
    only public names of the sub-package itself cross; qkv only through qkv.__all__."""
    tree = ast.parse(path.read_text())
    here = _where(path)
    for level, module, names in _imports(tree):
        assert not (level == 0 and module.startswith("qkv")), f"{path.name}: from {module} import"
        if level == 0:
            continue
        # From the top level, level 1 is the checks; from a sub-package, level 1 is itself
        # and level 2 the checks. Anything higher is qkv's own modules.
        assert level <= (2 if here else 1), f"{path.name} imports from qkv's modules: use qkv.<name>"
        if (here and level == 1) or path.name == "__init__.py":
            continue  # inside its own (sub-)package: private modules are fine
        target = module.split(".")[0] if module else ""
        if target in SUBPACKAGES:
            assert not any(part.startswith("_") for part in module.split(".")), \
                f"{path.name} reaches into a private module of {target}: {module}"
            assert not any(n.startswith("_") for n in names), \
                f"{path.name} imports private names of {target}: {names}"
        elif here:  # a sub-package uses only the result type from the top level
            assert target == "result", f"{path.name} imports {module or names} from the top"
        elif path.name != "grading.py":
            for t in ([module] if module else names):  # the top level's own private modules
                assert t.startswith("_") or t == "result", \
                    f"{path.name} imports the public check module {t}"
    private = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
               and isinstance(n.value, ast.Name) and n.value.id == "qkv"
               and n.attr not in qkv.__all__ + ["__all__"]]
    assert private == [], f"{path.name} uses names outside qkv.__all__"


@pytest.mark.parametrize("path", sorted(CHECKS_DIR.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(CHECKS_DIR)))
def test_check_modules_use_no_private_torch_name(path):
    """Issue 23: no private torch API (``torch._softmax``, ``torch._C``): a name torch drops
    or renames would break importing the checks, and each one catches nothing that the
    forbidden patterns (``"softmax"``, ``"attention"``) do not."""
    tree = ast.parse(path.read_text())
    private = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in ("torch", "F", "nn"):
                private.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            private += [f"line {node.lineno}: {node.module}" for part in node.module.split(".")
                        if part.startswith("_")][:1]
            private += [f"line {node.lineno}: {a.name}" for a in node.names
                        if a.name.startswith("_")]
    assert private == [], f"{path.name} uses private torch names: {private}"


_SNAPSHOT = r"""
import builtins, signal, sys, threading, warnings
import torch
from torch.overrides import _get_current_function_mode_stack
hooks = []
sys.addaudithook = lambda hook: hooks.append(hook)  # counted, not installed

def snapshot():
    return {
        "profile": sys.getprofile(), "trace": sys.gettrace(),
        "thread hooks": (threading.getprofile(), threading.gettrace()),
        "excepthook": sys.excepthook, "displayhook": sys.displayhook,
        "builtins": sorted((k, id(v)) for k, v in vars(builtins).items()),
        "warning filters": list(warnings.filters), "showwarning": warnings.showwarning,
        "signals": {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)},
        "torch function modes": len(_get_current_function_mode_stack()),
        "torch threads": torch.get_num_threads(), "default dtype": torch.get_default_dtype(),
        "grad": torch.is_grad_enabled(), "deterministic": torch.are_deterministic_algorithms_enabled(),
        "random state": torch.random.get_rng_state().sum().item(),
        "threads": threading.active_count(), "audit hooks": len(hooks),
    }

before = snapshot()
import qkv.checks
after = snapshot()
changed = sorted(k for k in before if before[k] != after[k])
print(changed)
"""


def test_importing_the_checks_installs_nothing_in_the_process():
    """Issue 23, item 1: importing ``qkv.checks`` sets no hook (profile, trace, audit,
    excepthook), no torch mode, no signal handler, no warning filter, and changes no builtin
    and none of torch's global settings. (``_get_current_function_mode_stack`` is the test's
    only way to count torch's modes; the checks themselves use no private name.)"""
    out = subprocess.run([sys.executable, "-c", _SNAPSHOT], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_qkv_does_not_import_its_checks():
    code = "import sys, qkv; print('qkv.checks' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _unwritten(*args, **kwargs):
    raise NotImplementedError()


class _UnwrittenModule:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError()


@pytest.mark.parametrize("name", CHECKS)
def test_unwritten_answer_says_so(name):
    answer = _UnwrittenModule if name == "check_MultiHeadAttention" else _unwritten
    with pytest.raises(AssertionError, match="not written yet"):
        getattr(checks, name)(answer)


@pytest.mark.parametrize("name", CHECKS)
def test_not_a_function(name):
    with pytest.raises(AssertionError, match="expects your .* itself, got int"):
        getattr(checks, name)(3)


@pytest.mark.parametrize("name", CHECKS)
def test_help_names_the_answer_seed_and_options(name):
    """``help(check_x)`` shows what a test cell passes: the answer by its own name, the seed
    and the check's options, and a docstring that says what is checked."""
    check = getattr(checks, name)
    params = inspect.signature(check).parameters
    exercise = name[len("check_"):]
    assert list(params)[:2] == [exercise, "seed"] and params["seed"].default == 0
    assert set(list(params)[2:]) == set(grading.CHECKS[name].options)
    assert check.__name__ == name and check.__module__.startswith("qkv.checks.")
    assert f"    {exercise}: your" in check.__doc__ and "Raises:" in check.__doc__
    assert check.__doc__.split("\n")[0].strip(), f"{name} says nothing of what it checks"


# What a set-up cell imports from qkv that its answers may still not call (the notebook says so).
NOT_GIVEN_TO_ANSWERS = {
    # "the checks notice a call to the given scaled_dot_product_attention" (its debugging exercise)
    "06-masking": {"scaled_dot_product_attention"},
    # the experiment's given code trains and measures the model; only its tools are the answers'
    "10-heads": {"AttentionOnlyTransformer", "measure_induction", "train_induction"},
}


@pytest.mark.parametrize("notebook", sorted((ROOT / "exercises").glob("*/*.ipynb")),
                         ids=lambda p: p.parent.name)
def test_what_the_set_up_cell_gives_is_no_notice(notebook):
    """Each check of an assignment lets its answers call what the set-up cell gives (``given``),
    as the notebook says, and nothing else of the course's."""
    import json
    cells = ["".join(c["source"]) for c in json.loads(notebook.read_text())["cells"]
             if c["cell_type"] == "code"]
    setup = {a.name for c in cells if not c.lstrip().startswith("%")
             for node in ast.walk(ast.parse(c))
             if isinstance(node, ast.ImportFrom) and node.module == "qkv" for a in node.names}
    called = {name for c in cells for name in grading.CHECKS if f"{name}(" in c}
    assert called, notebook
    for name in called:
        given = set(grading.CHECKS[name].given)
        assert given == setup - NOT_GIVEN_TO_ANSWERS.get(notebook.parent.name, set()), name


def test_an_option_of_another_check_is_refused_by_name():
    with pytest.raises(TypeError, match="check_softmax has no option 'masks'"):
        checks.check_softmax(_unwritten, masks=False)


def test_checks_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    checks.check_MultiHeadAttention(MHA_RIGHT["matmul"])
    assert torch.equal(torch.rand(3), expected)


def test_thread_count_is_restored():
    n = torch.get_num_threads()
    check_softmax(SOFTMAX_RIGHT["max subtracted"])
    assert torch.get_num_threads() == n


def test_alias_taken_before_the_check_is_noticed_and_the_reference_untouched():
    from qkv import scaled_dot_product_attention as my_attention  # alias taken early
    code = qkv.scaled_dot_product_attention.__code__

    def sdpa(*args, **kwargs):
        return my_attention(*args, **kwargs)

    from qkv.checks import grading
    from qkv.checks.harness import check_now

    result = check_now(grading.CHECKS["check_scaled_dot_product_attention"], sdpa, 0)
    assert result.passed and "qkv.scaled_dot_product_attention" in result.notice
    assert qkv.scaled_dot_product_attention.__code__ is code
    q = torch.randn(2, 3, 4)
    torch.testing.assert_close(my_attention(q, q, q), F.scaled_dot_product_attention(q, q, q))


def test_caught_delegation_is_still_noticed():
    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        try:
            return F.scaled_dot_product_attention(q, k, v, attn_mask, is_causal=is_causal, scale=scale)
        except Exception:
            return make_sdpa()(q, k, v, attn_mask, dropout_p, is_causal, scale)

    from qkv.checks import grading
    from qkv.checks.harness import check_now

    result = check_now(grading.CHECKS["check_scaled_dot_product_attention"], sdpa, 0)
    assert "torch.nn.functional.scaled_dot_product_attention" in result.notice


def test_the_message_quoted_for_instructors_is_the_real_one():
    page = (ROOT / "book" / "instructors.md").read_text()
    quoted = page.split("```text\n", 1)[1].split("```", 1)[0].strip()
    with pytest.raises(AssertionError) as info:
        check_scaled_dot_product_attention(SDPA_WRONG["inverted bool mask"][0])
    assert quoted == f"CheckFailed: {info.value}"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_checks_run_on_cuda_and_catch_host_tensors_there():
    check_scaled_dot_product_attention(SDPA_RIGHT["einsum"])
    checks.check_MultiHeadAttention(MHA_RIGHT["matmul"])
    checks.check_chunked_attention(CHUNKED_RIGHT["online softmax"])
    with pytest.raises(AssertionError, match="device="):
        checks.check_padding_mask(padding_no_device)


def test_hidden_tests_draw_fresh_inputs_and_name_their_seed():
    """seed=None draws a new seed each time; the message names it, and it draws them again."""
    wrong = SDPA_WRONG["no scaling"][0]
    messages = []
    for _ in range(2):
        with pytest.raises(AssertionError) as info:
            check_scaled_dot_product_attention(wrong, seed=None)
        messages.append(str(info.value))
    seeds = [int(m.split("seed=")[1].split(":")[0]) for m in messages]
    assert seeds[0] != seeds[1]
    with pytest.raises(AssertionError) as info:
        check_scaled_dot_product_attention(wrong, seed=seeds[0])
    assert str(info.value) == messages[0].split("\n(random inputs")[0]
    # The visible tests' inputs are fixed: the same message every time, with no seed in it.
    with pytest.raises(AssertionError) as first:
        check_scaled_dot_product_attention(wrong)
    with pytest.raises(AssertionError) as again:
        check_scaled_dot_product_attention(wrong)
    assert str(first.value) == str(again.value) and "seed=" not in str(first.value)


@pytest.mark.parametrize("seed, error", [("1", TypeError), (1.5, TypeError), (True, TypeError),
                                         (-1, ValueError), (2**70, ValueError)])
def test_a_bad_seed_is_refused_by_name(seed, error):
    from qkv.checks import check_softmax

    with pytest.raises(error, match="check_softmax: seed must be"):
        check_softmax(lambda x, dim=-1: x, seed=seed)
