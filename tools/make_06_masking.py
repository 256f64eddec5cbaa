"""Write solutions/06-masking/masking.ipynb, the nbgrader source of assignment 6.

Run from the repository root: ``python tools/make_06_masking.py``; then regenerate the
student version with ``nbgrader generate_assignment 06-masking --force``.
"""

from nbsource import ROOT, answer, code, markdown, setup, tests, write

CELLS = [
    markdown(r"""
# Assignment 6: masks

Chapter 6 showed what masks are for: hiding the padding of a batch, hiding the future from a
model that generates text, and both at once. You will write:

1. `causal_mask(L, S=None, device=None)`: query `i` may see keys `0..i`;
2. `padding_mask(lengths, S=None)`: each sequence may see its real tokens only;
3. `scaled_dot_product_attention` that takes an `attn_mask` (bool or float) and
   `is_causal`, with your `causal_mask`.

A bool mask is `True` where attention is **allowed**, as in PyTorch's
`torch.nn.functional.scaled_dot_product_attention` (and the opposite of
`nn.MultiheadAttention`). Run the set-up cell first; the checks name the mistake they
recognise (an inverted mask, a diagonal off by one, a mask on the wrong device...).
"""),
    setup(),
    markdown(r"""
## Step 1: the causal mask

Row `i` of an `(L, S)` mask belongs to query `i`; column `j` to key `j`. Query `i` may look at
keys `j <= i`: a lower triangle, diagonal included, starting at the top-left corner even
when `S != L` (as PyTorch's `is_causal=True`). Return a bool tensor created on `device`.
"""),
    answer("causal_mask", r'''
def causal_mask(L, S=None, device=None):
    """(L, S) bool mask, True where key j <= query i (upper-left aligned)."""
    ### BEGIN SOLUTION
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()
    ### END SOLUTION
'''),
    tests("test_causal_mask", 2, r'''
from qkv.checks import check_causal_mask  # imported in each test cell, on purpose

check_causal_mask(causal_mask)

m = causal_mask(3, 4)
assert m.dtype == torch.bool and m.shape == (3, 4), f"expected a (3, 4) bool mask, got {m.dtype} {tuple(m.shape)}"
assert m[0].tolist() == [True, False, False, False], "query 0 may see key 0 only"
### BEGIN HIDDEN TESTS
check_causal_mask(causal_mask, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## Step 2: the padding mask

A batch pads its sequences at the end to a common length `S` (by default the longest).
`lengths` holds the true length of each sequence, as a list of ints or a 1-D integer tensor;
the mask `(B, S)` is `True` at positions `0 .. length - 1` of each row. Compare a row of
positions (`torch.arange(S)`) with a column of lengths and let broadcasting do the rest; when
`lengths` is a tensor, create the positions on its device.
"""),
    code(r"""
positions = torch.arange(5)
lengths = torch.tensor([5, 3, 1])
print(positions[None, :].shape, lengths[:, None].shape, "->", (positions[None, :] + lengths[:, None]).shape)
"""),
    answer("padding_mask", r'''
def padding_mask(lengths, S=None):
    """(B, S) bool mask, True for the real tokens of each sequence."""
    ### BEGIN SOLUTION
    lengths = torch.as_tensor(lengths)
    S = int(lengths.max()) if S is None else S
    positions = torch.arange(S, device=lengths.device)
    return positions[None, :] < lengths[:, None]
    ### END SOLUTION
'''),
    tests("test_padding_mask", 2, r'''
from qkv.checks import check_padding_mask

check_padding_mask(padding_mask)

m = padding_mask([3, 1], 4)
assert m.tolist() == [[True, True, True, False], [True, False, False, False]], m
### BEGIN HIDDEN TESTS
check_padding_mask(padding_mask, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## Step 3: attention with masks

Compute the scores `query @ key.transpose(-2, -1) * scale` (`scale` is `1 / sqrt(E)` unless
given). Then mask them:

- `is_causal=True`: use your `causal_mask(L, S, device=query.device)` as the bool mask;
- a bool `attn_mask` (broadcastable to `(..., L, S)`): put `-inf` where it is `False`
  (`scores.masked_fill(~mask, float("-inf"))`), so those keys get weight exactly zero;
- a float `attn_mask`: add it to the scores.

Then the softmax over the keys (here you may use `torch.softmax`) and the weighted sum of the
values. The mask is applied *before* the softmax: zeroing weights after it leaves rows that no
longer sum to one. `dropout_p` may be ignored (the checks pass `0.0`). The checks give every
query at least one allowed key.
"""),
    answer("scaled_dot_product_attention", r'''
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """softmax(query @ key^T * scale + mask) @ value; bool masks are True where allowed."""
    ### BEGIN SOLUTION
    L, S = query.shape[-2], key.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        attn_mask = causal_mask(L, S, device=query.device)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return torch.softmax(scores, dim=-1) @ value
    ### END SOLUTION
'''),
    tests("test_scaled_dot_product_attention", 3, r'''
import torch.nn.functional as F

from qkv.checks import check_scaled_dot_product_attention

check_scaled_dot_product_attention(scaled_dot_product_attention)

# Changing future tokens must leave earlier outputs unchanged; changing padding, nothing.
torch.manual_seed(0)
q, k, v = torch.randn(1, 6, 8), torch.randn(1, 6, 8), torch.randn(1, 6, 8)
k2, v2 = k.clone(), v.clone()
k2[:, 4:], v2[:, 4:] = torch.randn(1, 2, 8), torch.randn(1, 2, 8)
a = scaled_dot_product_attention(q, k, v, is_causal=True)
b = scaled_dot_product_attention(q, k2, v2, is_causal=True)
assert torch.equal(a[:, :4], b[:, :4]), "outputs before position 4 changed when only the future did"
keep = padding_mask([4], 6)[:, None, :]  # (B, 1, S): the same keys for every query
c = scaled_dot_product_attention(q, k, v, attn_mask=keep)
d = scaled_dot_product_attention(q, k2, v2, attn_mask=keep)
assert torch.equal(c, d), "changing padded keys and values changed the output"
assert (c - F.scaled_dot_product_attention(q, k, v, attn_mask=keep)).abs().max() < 1e-5
### BEGIN HIDDEN TESTS
check_scaled_dot_product_attention(scaled_dot_product_attention, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## What you built

Your attention treats masks as PyTorch's SDPA does. One case was left out: a query whose
every key is masked. Its softmax over `-inf` scores is NaN; the course's reference and
PyTorch's SDPA return zeros for such a row instead (chapter 6 shows why and how).
"""),
]

if __name__ == "__main__":
    write(ROOT / "solutions" / "06-masking" / "masking.ipynb", CELLS)
