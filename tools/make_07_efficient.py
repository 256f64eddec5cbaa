"""Write solutions/07-efficient/efficient.ipynb, the nbgrader source of assignment 7.

Run from the repository root: ``python tools/make_07_efficient.py``; then regenerate the
student version with ``nbgrader generate_assignment 07-efficient --force``.
"""

from nbsource import ROOT, answer, code, markdown, setup, tests, write

CELLS = [
    markdown(r"""
# Assignment 7: attention that fits in memory, and a KV cache

Two functions from chapter 7:

1. `chunked_attention`: exact attention that never builds the `(L, S)` score matrix, by
   visiting the keys a chunk at a time with the **online softmax**;
2. `kv_cache_step`: one step of text generation with a cache of keys and values.

Shapes follow PyTorch: queries `(..., L, E)`, keys `(..., S, E)`, values `(..., S, Ev)`.
Each test cell runs a check from `qkv.checks` on many inputs and names the mistake it
recognises. Run the set-up cell first. Calling PyTorch's attention or the course's `qkv`
versions of these functions from your answer does not count: the checks block it.
"""),
    setup(),
    markdown(r"""
## Part 1: the online softmax

For each query keep three running quantities over the keys seen so far: the largest score
`m` (start at `-inf`), the sum `l` of `exp(score - m)` (start at 0) and the unnormalised
output `acc`, the sum of `exp(score - m) * value` (start at 0). For each chunk of keys
`j0 : j0 + chunk_size`:

1. compute the chunk's scores `s` (scaled and masked, as in assignment 4);
2. `m_new = max(m, max of s over the chunk)`;
3. everything accumulated so far was relative to `m`: multiply `l` and `acc` by the
   correction `exp(m - m_new)`, then add the chunk's `exp(s - m_new)` terms;
4. `m = m_new`.

At the end the output is `acc / l`. Two details: a row that has only seen masked keys has
`m_new = -inf`, and `exp(-inf - (-inf))` is NaN, so shift by 0 for such rows; and a row
that may attend to nothing ends with `l = 0`: return zeros for it (as PyTorch does).
The cell below shows the correction at work on one row.
"""),
    code(r"""
torch.manual_seed(0)
s, v = 4 * torch.randn(10), torch.randn(10, 2)
m, l, acc = torch.tensor(float("-inf")), torch.tensor(0.0), torch.zeros(2)
for chunk in torch.arange(10).split(4):
    m_new = torch.maximum(m, s[chunk].max())
    p = torch.exp(s[chunk] - m_new)
    l = torch.exp(m - m_new) * l + p.sum()
    acc = torch.exp(m - m_new) * acc + p @ v[chunk]
    m = m_new
print("online:", acc / l)
print("full:  ", torch.softmax(s, 0) @ v)
"""),
    answer("chunked_attention", r'''
def chunked_attention(query, key, value, attn_mask=None, is_causal=False, scale=None,
                      chunk_size=256):
    """Exact attention, visiting the keys chunk_size at a time (never an (L, S) tensor).

    Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev); attn_mask broadcastable
    to (..., L, S) (bool: True = may attend; float: added). Returns (..., L, Ev).
    """
    ### BEGIN SOLUTION
    L, S = query.shape[-2], key.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    q = query * scale
    run_max = run_sum = run_out = None
    for j0 in range(0, S, chunk_size):
        j1 = min(j0 + chunk_size, S)
        s = q @ key[..., j0:j1, :].transpose(-2, -1)
        if attn_mask is not None:
            block = attn_mask[..., j0:j1]
            if block.dtype == torch.bool:
                s = s.masked_fill(~block, float("-inf"))
            else:
                s = s + block
        if run_max is None:  # before the first chunk: -inf, 0 and 0
            run_max = torch.full_like(s[..., :1], float("-inf"))
            run_sum = torch.zeros_like(run_max)
            run_out = torch.zeros_like(s[..., :1] * value[..., :1, :])
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        shift = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)
        e = torch.exp(s - shift)
        fix = torch.exp(run_max - shift)  # rescales what was summed relative to run_max
        run_sum = fix * run_sum + e.sum(dim=-1, keepdim=True)
        run_out = fix * run_out + e @ value[..., j0:j1, :]
        run_max = new_max
    empty = run_sum == 0  # a row that may attend to nothing: zeros, as PyTorch gives
    return run_out / torch.where(empty, torch.ones_like(run_sum), run_sum)
    ### END SOLUTION
'''),
    tests("test_chunked_attention", 4, r'''
from qkv.checks import check_chunked_attention  # imported in each test cell, on purpose

check_chunked_attention(chunked_attention)  # many inputs; names the mistake if there is one

# Chunk sizes that do not divide S, and one larger than S, give the same answer.
torch.manual_seed(1)
q, k, v = torch.randn(2, 5, 4), torch.randn(2, 11, 4), torch.randn(2, 11, 3)
outs = [chunked_attention(q, k, v, chunk_size=c) for c in (1, 3, 11, 64)]
for o in outs[1:]:
    assert (o - outs[0]).abs().max() < 1e-5, "the result should not depend on chunk_size"
### BEGIN HIDDEN TESTS
check_chunked_attention(chunked_attention, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## Part 2: one step of decoding with a KV cache

When a model generates text, the keys and values of earlier tokens do not change, so they
are kept in a cache. One step takes the queries, keys and values of the `L` new tokens
(usually `L = 1`) and the caches of the `P` earlier ones (or `None` before the first step):

1. append the new keys and values at the end of the caches (dim `-2`);
2. let the new queries attend to all `S = P + L` cached keys. With several new tokens, new
   token `i` sits at position `P + i` and may see keys `0 .. P + i`: a causal mask aligned
   to the **bottom right**, `torch.ones(L, S, dtype=torch.bool).tril(S - L)`. PyTorch's
   `is_causal=True` aligns it to the top left, which is wrong here as soon as `L < S`;
3. return `(output, new_k_cache, new_v_cache)`.

You may use your own attention or `torch.nn.functional.scaled_dot_product_attention` with
an `attn_mask`.
"""),
    answer("kv_cache_step", r'''
def kv_cache_step(query, key, value, k_cache=None, v_cache=None, scale=None):
    """Append the new keys/values to the caches, then attend with the new queries.

    Shapes: query, key (B, H, L, E); value (B, H, L, Ev); k_cache (B, H, P, E) and
    v_cache (B, H, P, Ev) or None. Returns (output (B, H, L, Ev), k_cache, v_cache) with
    P + L rows in the caches.
    """
    ### BEGIN SOLUTION
    if k_cache is not None:
        key = torch.cat([k_cache, key], dim=-2)
        value = torch.cat([v_cache, value], dim=-2)
    L, S = query.shape[-2], key.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = query @ key.transpose(-2, -1) * scale
    allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L)
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ value, key, value
    ### END SOLUTION
'''),
    tests("test_kv_cache_step", 3, r'''
from qkv.checks import check_kv_cache_step

check_kv_cache_step(kv_cache_step)

# Decoding 6 tokens one at a time gives full causal attention over the 6.
torch.manual_seed(2)
q, k, v = torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4)
kc = vc = None
outs = []
for t in range(6):
    o, kc, vc = kv_cache_step(q[..., t:t + 1, :], k[..., t:t + 1, :], v[..., t:t + 1, :], kc, vc)
    outs.append(o)
full = torch.softmax((q @ k.transpose(-2, -1) / 2).masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf")), -1) @ v
assert kc.shape == (1, 2, 6, 4), f"the cache should hold all 6 keys, got {tuple(kc.shape)}"
assert (torch.cat(outs, dim=-2) - full).abs().max() < 1e-5
### BEGIN HIDDEN TESTS
check_kv_cache_step(kv_cache_step, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## What you built

Your `chunked_attention` computes exactly what the textbook formula computes, with memory
that no longer grows with `L * S`: the algorithm inside FlashAttention. Your `kv_cache_step`
is how every language model generates text without recomputing its whole prefix.
"""),
]

if __name__ == "__main__":
    write(ROOT / "solutions" / "07-efficient" / "efficient.ipynb", CELLS)
