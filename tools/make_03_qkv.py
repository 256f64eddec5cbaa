"""Write solutions/03-qkv/qkv.ipynb, the nbgrader source of the query-key-value assignment.

Run from the repository root: ``python tools/make_03_qkv.py``; then regenerate the
student version with ``nbgrader generate_assignment 03-qkv --force``.
"""

from nbsource import ROOT, answer, code, markdown, setup, tests, write

CELLS = [
    markdown(r"""
# Assignment 3: self-attention and cross-attention from three matrices

You will write a complete one-head attention layer from its three projection matrices:

1. `self_attention(x, W_q, W_k, W_v)`: every position of `x` attends to every position of `x`;
2. `cross_attention(x, context, W_q, W_k, W_v)`: the positions of `x` ask, the positions of
   `context` are searched and read.

**Weight layout.** Each matrix has shape `(in_features, out_features)` and is applied on the
right, as in the equations: `Q = x @ W_q`, `K = context @ W_k`, `V = context @ W_v`. (PyTorch's
`nn.Linear` stores the transpose: `W_q = linear.weight.T`.) Then

$$\mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{E}}\right) V, \qquad E = \text{the width of queries and keys.}$$

**Shapes.** `x` is `(L, D)` or batched `(..., L, D)`; `context` is `(S, Dc)` or `(..., S, Dc)`;
`W_q` is `(D, E)`, `W_k` is `(Dc, E)`, `W_v` is `(Dc, Ev)`; the output is `(..., L, Ev)`.
Your functions must work with and without batch dimensions.

The test cells run checks from `qkv.checks` that try your functions on many inputs and, when
something is wrong, say which mistake it looks like. You may use `torch.softmax`; calling
PyTorch's attention or the course's reference `qkv` from your answer does not count (the checks
block it). Run the set-up cell first.
"""),
    setup(),
    markdown(r"""
## Part 1: self-attention

A reminder of the shapes on a small example (run it):
"""),
    code(r"""
x = torch.randn(4, 10)                                # L = 4 tokens of width D = 10
W_q, W_k, W_v = torch.randn(10, 3), torch.randn(10, 3), torch.randn(10, 5)   # E = 3, Ev = 5
Q = x @ W_q                                           # (L, E)
K = x @ W_k                                           # (L, E)
V = x @ W_v                                           # (L, Ev)
print("Q", tuple(Q.shape), "K", tuple(K.shape), "V", tuple(V.shape))
print("scores Q @ K^T", tuple((Q @ K.transpose(-2, -1)).shape))
"""),
    markdown(r"""
Transpose the keys with `K.transpose(-2, -1)`: only the last two axes, whatever batch axes come
before them. `torch.transpose(K, 0, 1)` is right for one sequence and wrong for a batch (the
chapter shows a case where it even runs without an error).
"""),
    answer("self_attention", r'''
def self_attention(x, W_q, W_k, W_v):
    """One attention head over x itself: softmax((x W_q)(x W_k)^T / sqrt(E)) (x W_v).

    Shapes: x (..., L, D), W_q (D, E), W_k (D, E), W_v (D, Ev); returns (..., L, Ev).
    """
    ### BEGIN SOLUTION
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return torch.softmax(scores, dim=-1) @ V
    ### END SOLUTION
'''),
    tests("test_self_attention", 3, r'''
from qkv.checks import check_self_attention  # imported in each test cell, on purpose

check_self_attention(self_attention)  # many inputs; names the mistake if there is one

# By hand: with W_q = 0 every score is 0, so each output is the plain mean of the values.
x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
out = self_attention(x, torch.zeros(2, 2), torch.eye(2), torch.eye(2))
assert out.shape == (3, 2), f"expected (L, Ev) = (3, 2), got {tuple(out.shape)}"
assert torch.allclose(out, x.mean(0).expand(3, 2)), out
### BEGIN HIDDEN TESTS
check_self_attention(self_attention, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## Part 2: cross-attention

Now the queries come from `x` and the keys and values from `context`, which may have another
length `S` and another width `Dc`. The weights of each row now run over the `S` context
positions: the score matrix is `(..., L, S)`.
"""),
    answer("cross_attention", r'''
def cross_attention(x, context, W_q, W_k, W_v):
    """Queries from x; keys and values from context.

    Shapes: x (..., L, D), context (..., S, Dc), W_q (D, E), W_k (Dc, E), W_v (Dc, Ev);
    returns (..., L, Ev).
    """
    ### BEGIN SOLUTION
    Q, K, V = x @ W_q, context @ W_k, context @ W_v
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return torch.softmax(scores, dim=-1) @ V
    ### END SOLUTION
'''),
    tests("test_cross_attention", 3, r'''
from qkv.checks import check_cross_attention

check_cross_attention(cross_attention)

# Shapes: 2 sequences of 3 positions ask 5 context positions of another width.
x, ctx = torch.randn(2, 3, 4), torch.randn(2, 5, 6)
out = cross_attention(x, ctx, torch.randn(4, 8), torch.randn(6, 8), torch.randn(6, 7))
assert out.shape == (2, 3, 7), f"expected (B, L, Ev) = (2, 3, 7), got {tuple(out.shape)}"
# Reordering the context changes nothing: each output is a sum over all of it.
W = torch.randn(4, 8), torch.randn(6, 8), torch.randn(6, 7)
perm = torch.randperm(5)
assert torch.allclose(cross_attention(x, ctx, *W), cross_attention(x, ctx[:, perm], *W), atol=1e-5)
### BEGIN HIDDEN TESTS
check_cross_attention(cross_attention, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## What you built

`self_attention(x, ...)` is `cross_attention(x, x, ...)`: the same layer, searching its own
sequence. Try it: both give the same numbers. A multi-head layer (chapter 5) runs several such
heads side by side, each with its own three matrices, and concatenates their outputs.
"""),
    code(r"""
x = torch.randn(2, 5, 10)
W = torch.randn(10, 4), torch.randn(10, 4), torch.randn(10, 6)
print((self_attention(x, *W) - cross_attention(x, x, *W)).abs().max())
"""),
]

if __name__ == "__main__":
    write(ROOT / "solutions" / "03-qkv" / "qkv.ipynb", CELLS)
