"""Write solutions/04-scaling/scaling.ipynb, the nbgrader source of the first assignment.

Run from the repository root: ``python tools/make_04_scaling.py``; then regenerate the
student version with ``nbgrader generate_assignment 04-scaling --force``.
"""

from nbsource import ROOT, answer, code, markdown, setup, tests, write, written

CELLS = [
    markdown(r"""
# Assignment 4: scaled dot-product attention, step by step

You will write the attention function that every transformer layer calls,
$\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{E}} + \text{mask}\right) V$,
in three small functions:

1. `attention_scores`: how well each query matches each key (the **scores**), **scaled**
   and **masked**;
2. `softmax`: scores into weights that sum to one, without overflowing;
3. `scaled_dot_product_attention`: the **weighted sum** of the values.

They take the same arguments as PyTorch's `torch.nn.functional.scaled_dot_product_attention`
and follow its shapes: queries `(..., L, E)`, keys `(..., S, E)`, values `(..., S, Ev)`,
where `...` is any number of batch dimensions (batch, heads).

Each test cell runs a check from `qkv.checks` that tries your function on many inputs
(batched and not, float32 and float64, with and without masks) and, when something is
wrong, tells you on which input and which mistake it looks like. Run the set-up cell
first. Calling PyTorch's attention (or the course's reference `qkv`) from your answer
does not count: the checks block it.
"""),
    setup(),
    markdown(r"""
## Steps 1 to 3: scores, scale, mask

**Scores.** Query $i$ is compared with key $j$ by their dot product. For all pairs at once
that is `query @ key.transpose(-2, -1)`, of shape `(..., L, S)`. Transpose only the last two
axes: `key.T` would reverse *all* of them on a batched tensor.

**Scale.** If the entries of a query and a key are independent with variance 1, their dot
product is a sum of $E$ terms and has variance $E$. Large scores push the softmax towards a
one-hot vector whose gradients vanish, so the scores are multiplied by $1/\sqrt{E}$, which
brings their spread back to about 1 whatever $E$ is. The cell below measures it. When the
caller passes `scale`, use that number instead.
"""),
    code(r"""
# The spread of q . k grows like sqrt(E); dividing by sqrt(E) undoes it.
for E in (4, 64, 1024):
    q, k = torch.randn(10_000, E), torch.randn(10_000, E)
    dots = (q * k).sum(-1)
    print(f"E={E:5d}  std of q.k: {dots.std():7.2f}   after / sqrt(E): {(dots / math.sqrt(E)).std():.2f}")
"""),
    markdown(r"""
**Mask.** A bool `attn_mask` is `True` where attention is **allowed** (PyTorch's SDPA
convention; `nn.MultiheadAttention` uses the opposite). A forbidden score becomes `-inf`,
so that the softmax gives it weight exactly zero: `scores.masked_fill(~attn_mask, float("-inf"))`.
A float `attn_mask` is simply added to the scores. `is_causal=True` means query $i$ may see
keys $0..i$ only: the mask `torch.ones(L, S, dtype=torch.bool).tril()` (aligned to the top-left
corner, as in PyTorch). Create every tensor on the inputs' device (`device=query.device`).

Write `attention_scores`: each gap below is one step.
"""),
    answer("attention_scores", r'''
def attention_scores(query, key, attn_mask=None, is_causal=False, scale=None):
    """Scaled, masked scores: query @ key^T * scale, with -inf where attention is not allowed.

    Shapes: query (..., L, E), key (..., S, E), attn_mask broadcastable to (..., L, S);
    returns (..., L, S).
    """
    # Step 1: the dot product of every query with every key.
    ### BEGIN SOLUTION
    scores = query @ key.transpose(-2, -1)
    ### END SOLUTION
    # Step 2: the scale (1/sqrt(E) unless `scale` is given).
    ### BEGIN SOLUTION
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = scores * scale
    ### END SOLUTION
    # Step 3: the mask (is_causal, a bool mask, or a float mask to add).
    ### BEGIN SOLUTION
    L, S = scores.shape[-2], scores.shape[-1]
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    ### END SOLUTION
    return scores
'''),
    tests("test_attention_scores", 3, r'''
from qkv.checks import check_attention_scores  # imported in each test cell, on purpose

check_attention_scores(attention_scores)  # many inputs; names the mistake if there is one

# By hand: E = 4, so the scale is 1/2; the causal mask hides key 1 from query 0.
q = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0]])
k = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
s = attention_scores(q, k, is_causal=True)
assert s.shape == (2, 2), f"expected shape (L, S) = (2, 2), got {tuple(s.shape)}"
assert s[0, 0].item() == 0.5 and s[1, 0].item() == 0.0 and s[1, 1].item() == 1.0, s
assert s[0, 1].item() < -1e4, "query 0 may not see key 1 under is_causal=True"
### BEGIN HIDDEN TESTS
check_attention_scores(attention_scores, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## Step 4: a softmax that does not overflow

$\mathrm{softmax}(x)_j = e^{x_j} / \sum_k e^{x_k}$. Written like that it breaks on large
logits: `exp` overflows to `inf`, and `inf / inf` is `NaN`. Run the cell below.

The cure costs one line: softmax does not change when the same number is subtracted from
every logit, so subtract the maximum first. The largest exponent is then $e^0 = 1$, and
masked logits ($-\infty$) still give exactly 0. Reduce along `dim` and keep that dimension
(`keepdim=True`) so that the maximum and the sum broadcast back. Do not call
`torch.softmax` here: this exercise is to write it.
"""),
    code(r"""
x = torch.tensor([1000.0, 999.0, 0.0])
naive = x.exp() / x.exp().sum()
shifted = (x - x.max()).exp() / (x - x.max()).exp().sum()
print("naive:  ", naive)
print("shifted:", shifted)
"""),
    answer("softmax", r'''
def softmax(x, dim=-1):
    """Numerically stable softmax of `x` along `dim` (same shape, dtype and device as x)."""
    ### BEGIN SOLUTION
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)
    ### END SOLUTION
'''),
    tests("test_softmax", 2, r'''
from qkv.checks import check_softmax

check_softmax(softmax)

w = softmax(torch.tensor([[1.0, 2.0, 3.0], [1000.0, 1000.0, 0.0]]))
assert torch.isfinite(w).all(), f"large logits gave {w}: subtract the maximum first"
assert abs(w[0].sum().item() - 1.0) < 1e-6, "each row should sum to one"
assert abs(w[1, 0].item() - 0.5) < 1e-6
### BEGIN HIDDEN TESTS
check_softmax(softmax, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## Step 5: the weighted sum

Each row of `softmax(scores)` holds one query's weights over the keys; the output for that
query is the weighted sum of the values, `weights @ value`, of shape `(..., L, Ev)`. Use your
two functions above. `dropout_p` drops weights at random during training; the check passes
`0.0`, so you may ignore it (or apply `torch.dropout(weights, dropout_p, train=True)` when it
is positive).

A query whose every key is masked has no weights to give: with `-inf` everywhere its softmax
is `NaN`. PyTorch returns zeros for such rows; the checks do not test them.
"""),
    answer("scaled_dot_product_attention", r'''
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """softmax(query @ key^T * scale + mask) @ value, like torch's SDPA.

    Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev); returns (..., L, Ev).
    """
    ### BEGIN SOLUTION
    scores = attention_scores(query, key, attn_mask, is_causal, scale)
    weights = softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = torch.dropout(weights, dropout_p, train=True)
    return weights @ value
    ### END SOLUTION
'''),
    tests("test_scaled_dot_product_attention", 3, r'''
import torch.nn.functional as F

from qkv.checks import check_scaled_dot_product_attention

check_scaled_dot_product_attention(scaled_dot_product_attention)

# Your function against PyTorch's on one batched example (here, outside your code, PyTorch's
# own attention may be called).
torch.manual_seed(0)
q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 5)
out = scaled_dot_product_attention(q, k, v, is_causal=True)
assert out.shape == (2, 3, 4, 5), f"expected (B, H, L, Ev) = (2, 3, 4, 5), got {tuple(out.shape)}"
assert (out - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max() < 1e-5
### BEGIN HIDDEN TESTS
check_scaled_dot_product_attention(scaled_dot_product_attention, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## Step 6: measure the variance yourself

The scale rests on one claim: if the $E$ (here written $d_k$) components of $q$ and of $k$ are
independent with mean 0 and variance 1, then $\mathrm{Var}(q \cdot k) = d_k$. Write
`dot_product_variance(d_k, n_samples, generator)`, which **measures** it: draw `n_samples`
queries and `n_samples` keys of width `d_k` with standard normal components, compute the
`n_samples` dot products (one per pair), and return their variance as a number.

Draw every random number from `generator` and on its device
(`torch.randn(..., generator=generator, device=generator.device)`), so that the same seed
gives the same answer. The check runs d_k = 4, 64 and 256 with 20,000 samples and accepts an
answer within 5 standard errors of d_k: the standard error of such an estimate is about
$d_k\sqrt{(2 + 6/d_k)/n}$, about 1% of d_k here.
"""),
    answer("dot_product_variance", r'''
def dot_product_variance(d_k, n_samples, generator):
    """Measured variance of q . k over n_samples pairs with independent N(0, 1) components."""
    ### BEGIN SOLUTION
    q = torch.randn(n_samples, d_k, generator=generator, device=generator.device)
    k = torch.randn(n_samples, d_k, generator=generator, device=generator.device)
    return (q * k).sum(dim=-1).var().item()
    ### END SOLUTION
'''),
    tests("test_dot_product_variance", 2, r'''
from qkv.checks import check_dot_product_variance

check_dot_product_variance(dot_product_variance)

for d in (16, 128):
    v = dot_product_variance(d, 20_000, torch.Generator().manual_seed(0))
    print(f"d_k = {d:4d}: measured Var(q.k) = {v:8.2f}")
    assert abs(v - d) < 0.1 * d, f"expected about {d}, got {v}"
### BEGIN HIDDEN TESTS
check_dot_product_variance(dot_product_variance, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## A question in words

Suppose a colleague removes the division by $\sqrt{d_k}$ from a model whose heads have width
$d_k = 512$, initialised so that queries and keys have unit-variance components. In three to
five sentences: what happens to the attention weights at the start of training, and why does
that make learning harder? Refer to the softmax's gradient. (This answer is graded by hand.)
"""),
    written("written_no_scale", 2, r"""
Without the scale the scores have standard deviation about $\sqrt{512} \approx 23$, so the
differences between a row's scores are large and the softmax saturates: nearly all of each
row's weight goes to one key (close to one-hot, entropy near zero), chosen by chance at
initialisation. The softmax's Jacobian $\mathrm{diag}(p) - pp^\top$ is then close to zero, so
almost no gradient reaches the scores, and through them $W_Q$ and $W_K$, for most rows; only
rows where two scores happen to be nearly tied pass back (large) gradients. Learning which keys
to attend to is therefore slow and erratic. Dividing by $\sqrt{d_k}$ brings the scores back to
unit variance, so the weights start spread out whatever the width.
"""),
    markdown(r"""
## What you built

Your `scaled_dot_product_attention` computes what `torch.nn.functional.scaled_dot_product_attention`
computes, for any batch shape, mask and dtype. PyTorch's version gives the same numbers but
never stores the `(L, S)` weight matrix when it can avoid it; a later chapter shows how
(the online softmax of FlashAttention).
"""),
]

if __name__ == "__main__":
    write(ROOT / "solutions" / "04-scaling" / "scaling.ipynb", CELLS)
