"""Points follow the mistake (issue 13, item 3): a check grades one function; the student's other
answers it calls are the reference's while it runs, so a wrong helper costs only its own test.

Each answer below is written as in a notebook: a cell's source run in one namespace, the
function looking its helpers up there. A wrong helper beside a right function: the function's
check passes; a wrong function beside a right helper: its check fails naming the function.
"""

import textwrap

import pytest
import torch

import qkv
from qkv.checks import (check_MultiHeadAttention, check_merge_heads,
                        check_scaled_dot_product_attention, check_soft_lookup)

WRONG_CAUSAL = """
def causal_mask(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(-1)  # diagonal hidden
"""
RIGHT_MASKED_SDPA = """
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    L, S = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        attn_mask = causal_mask(L, S, device=query.device)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return torch.softmax(scores, dim=-1) @ value
"""
WRONG_SCORES_AND_SOFTMAX = """
def attention_scores(query, key, scale=None):
    return query @ key.transpose(-2, -1)  # no scale

def softmax(x, dim=-1):
    return x.exp() / x.exp().sum(dim=0, keepdim=True)  # the wrong axis, and unstable
"""
RIGHT_UNMASKED_SDPA = """
def scaled_dot_product_attention(query, key, value, scale=None):
    return softmax(attention_scores(query, key, scale=scale), dim=-1) @ value
"""
RIGHT_SOFT_LOOKUP = """
def soft_lookup(query, keys, values, temperature=1.0):
    weights = softmax(query @ keys.transpose(-2, -1) / temperature, dim=-1)
    return weights @ values, weights
"""
WRONG_SPLIT_MERGE = """
def split_heads(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, num_heads, L, D // num_heads)  # no transpose

def merge_heads(x):
    raise NotImplementedError()
"""
RIGHT_MERGE = """
def merge_heads(x):
    B, H, L, Dh = x.shape
    return x.transpose(1, 2).reshape(B, L, H * Dh)
"""
RIGHT_MHA = """
class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True, kdim=None, vdim=None, dropout=0.0,
                 device=None, dtype=None):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        f = {"device": device, "dtype": dtype, "bias": bias}
        self.q_proj = nn.Linear(embed_dim, embed_dim, **f)
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, **f)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, **f)
        self.out_proj = nn.Linear(embed_dim, embed_dim, **f)

    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=False,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        key = query if key is None else key
        value = key if value is None else value
        batched = query.dim() == 3
        if not batched:
            query, key, value = query[None], key[None], value[None]
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask[None]
        B, L, S = query.shape[0], query.shape[1], key.shape[1]
        mask = combine_masks(attn_mask, key_padding_mask, is_causal, B, L, S, query)
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        out = self.out_proj(merge_heads(weights @ v))
        if not batched:
            out, weights = out[0], weights[0]
        if not need_weights:
            return out, None
        return out, weights.mean(dim=-3) if average_attn_weights else weights
"""


def _notebook(*cells):
    """One namespace, as a notebook's: the set-up cell's names, then each cell run in it."""
    ns = {"__name__": "__main__"}
    exec("import math\nimport torch\nfrom torch import nn\nimport qkv\n"  # noqa: S102
         "from qkv import combine_masks\n", ns)
    for cell in cells:
        exec(compile(textwrap.dedent(cell), "<cell>", "exec"), ns)  # noqa: S102 (test input)
    return ns


def test_masked_attention_scores_with_a_wrong_causal_mask():
    ns = _notebook(WRONG_CAUSAL, RIGHT_MASKED_SDPA)
    wrong = ns["causal_mask"]
    check_scaled_dot_product_attention(ns["scaled_dot_product_attention"])
    check_scaled_dot_product_attention(ns["scaled_dot_product_attention"], seed=None)
    assert ns["causal_mask"] is wrong  # the notebook's own, put back


def test_a_wrong_attention_with_a_right_causal_mask_is_named():
    ns = _notebook("causal_mask = qkv.causal_mask\n",
                   RIGHT_MASKED_SDPA.replace("* scale", "* 1.0"))
    with pytest.raises(AssertionError, match="^scaled_dot_product_attention: wrong on .*"
                                             "no scaling"):
        check_scaled_dot_product_attention(ns["scaled_dot_product_attention"])


def test_unmasked_attention_scores_with_wrong_scores_and_softmax():
    ns = _notebook(WRONG_SCORES_AND_SOFTMAX, RIGHT_UNMASKED_SDPA)
    check_scaled_dot_product_attention(ns["scaled_dot_product_attention"], masks=False)
    assert ns["softmax"].__module__ == "__main__"


def test_soft_lookup_scores_with_a_wrong_softmax():
    ns = _notebook(WRONG_SCORES_AND_SOFTMAX, RIGHT_SOFT_LOOKUP)
    check_soft_lookup(ns["soft_lookup"])


def test_multi_head_attention_scores_with_wrong_split_and_merge():
    ns = _notebook(WRONG_SPLIT_MERGE, RIGHT_MHA)
    check_MultiHeadAttention(ns["MultiHeadAttention"])
    assert ns["split_heads"].__module__ == "__main__"


def test_merge_heads_test_cell_passes_with_a_wrong_split_heads():
    ns = _notebook(WRONG_SPLIT_MERGE, RIGHT_MERGE)
    check_merge_heads(ns["merge_heads"])
    # The test cell's own lines take split_heads from the reference.
    x = torch.randn(2, 5, 12)
    assert torch.equal(ns["merge_heads"](qkv.split_heads(x, 3)), x)


def test_the_helpers_open_no_door_to_the_reference():
    delegates = _notebook("""
    def scaled_dot_product_attention(query, key, value, scale=None):
        return qkv.scaled_dot_product_attention(query, key, value, scale=scale)
    """)
    with pytest.raises(AssertionError, match="write it yourself"):
        check_scaled_dot_product_attention(delegates["scaled_dot_product_attention"],
                                           masks=False)
    # The course's code reached from the student's code that a helper calls back is refused.
    called_back = _notebook("""
    class Sneaky(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            plain = [a.as_subclass(torch.Tensor) if isinstance(a, Sneaky) else a for a in args]
            qkv.scaled_dot_product_attention(plain[0][None], plain[0][None], plain[0][None])
            return func(*plain, **(kwargs or {}))

    def scaled_dot_product_attention(query, key, value, scale=None):
        weights = softmax(attention_scores(query.as_subclass(Sneaky), key, scale=scale))
        return weights.as_subclass(torch.Tensor) @ value
    """, WRONG_SCORES_AND_SOFTMAX)
    with pytest.raises(AssertionError, match="qkv.scaled_dot_product_attention"):
        check_scaled_dot_product_attention(called_back["scaled_dot_product_attention"],
                                           masks=False)
