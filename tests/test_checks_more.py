"""The mask, multi-head and chunked checks on catalogues of wrong and right answers."""

import pytest

import answers_more as A
from catalogue import catalogue_tests
from qkv import checks

GROUPS = {
    "causal_mask": (checks.check_causal_mask, A.CAUSAL_WRONG, A.CAUSAL_RIGHT),
    "padding_mask": (checks.check_padding_mask, A.PADDING_WRONG, A.PADDING_RIGHT),
    "split_heads": (checks.check_split_heads, A.SPLIT_WRONG, A.SPLIT_RIGHT),
    "merge_heads": (checks.check_merge_heads, A.MERGE_WRONG, A.MERGE_RIGHT),
    "MultiHeadAttention": (checks.check_MultiHeadAttention, A.MHA_WRONG, A.MHA_RIGHT),
    "chunked_attention": (checks.check_chunked_attention, A.CHUNKED_WRONG, A.CHUNKED_RIGHT),
    "kv_cache_step": (checks.check_kv_cache_step, A.KV_WRONG, A.KV_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)


def test_every_check_is_exported():
    names = {n for n in dir(checks) if n.startswith("check_")}
    assert {f"check_{g}" for g in GROUPS} <= names
    assert {n for n in checks.__all__ if n.startswith("check_")} == names


def test_qkv_does_not_import_its_checks():
    import subprocess
    import sys

    code = "import sys, qkv; print('qkv.checks' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_checks_leave_the_global_random_state_alone():
    import torch

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    checks.check_MultiHeadAttention(A.MHA_RIGHT["matmul"])
    assert torch.equal(torch.rand(3), expected)


def test_stderr_written_by_an_answer_goes_to_stdout(capsys):
    import sys

    def noisy(L, S=None, device=None):
        print("debugging", file=sys.stderr)
        return A.causal_ok(L, S, device)

    checks.check_causal_mask(noisy)
    out = capsys.readouterr()
    assert out.err == "" and "debugging" in out.out


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")
def test_checks_run_on_cuda_and_catch_host_tensors_there():
    import torch

    from answers_scaling import SDPA_RIGHT
    from qkv.checks._inputs import devices

    assert torch.device("cuda") in devices()
    checks.check_scaled_dot_product_attention(SDPA_RIGHT["einsum"])
    checks.check_MultiHeadAttention(A.MHA_RIGHT["matmul"])
    checks.check_chunked_attention(A.CHUNKED_RIGHT["online softmax"])
    with pytest.raises(AssertionError, match="device="):
        checks.check_padding_mask(A.padding_no_device)
