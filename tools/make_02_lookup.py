"""Write solutions/02-lookup/lookup.ipynb, the nbgrader source of assignment 2.

Run from the repository root: ``python tools/make_02_lookup.py``; then regenerate the
student version with ``nbgrader generate_assignment 02-lookup --force``.
"""

from nbsource import ROOT, answer, code, markdown, setup, tests, write

CELLS = [
    markdown(r"""
# Assignment 2: attention as a soft lookup

You will write the four small functions behind the attention of 2015, before transformers:

1. `softmax`: scores into weights that sum to one, without overflowing;
2. `soft_lookup`: the weighted mean of all values, weights `softmax(query . key / temperature)`;
3. `additive_score`: Bahdanau's score $v_a^\top \tanh(W_q q + W_k k)$;
4. `luong_score`: Luong's scores $q^\top k$ ("dot") and $q^\top W k$ ("general").

Shapes follow PyTorch's legend: queries `(..., L, E)`, keys `(..., S, E)`, values `(..., S, Ev)`,
where `...` is any number of batch dimensions. Each test cell runs a check from `qkv.checks`
that tries your function on many inputs and, when something is wrong, tells you on which input
and which mistake it looks like. Run the set-up cell first. Calling the course's reference
(`qkv`) or PyTorch's attention from your answer does not count: the checks block it.
"""),
    setup(),
    markdown(r"""
## 1. A softmax that does not overflow

$\mathrm{softmax}(x)_j = e^{x_j} / \sum_k e^{x_k}$ breaks on large logits: `exp(1000.0)` is `inf`,
and `inf / inf` is `NaN`. Subtracting the maximum along `dim` first changes nothing
mathematically and keeps every exponent at most 0. Keep the reduced dimension
(`keepdim=True`) so that it broadcasts back. Do not call `torch.softmax`: write it.
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
from qkv.checks import check_softmax  # imported in each test cell, on purpose

check_softmax(softmax)

w = softmax(torch.tensor([1000.0, 1000.0, 0.0]))
assert torch.isfinite(w).all(), f"large logits gave {w}: subtract the maximum first"
assert abs(w[0].item() - 0.5) < 1e-6
### BEGIN HIDDEN TESTS
check_softmax(softmax, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## 2. The soft lookup

A dictionary returns the value of the one key that matches. A soft lookup scores the query
against **every** key with a dot product, divides the scores by a `temperature`, turns them
into weights with a softmax over the keys (the last axis), and returns the weighted mean of
all the values. Return the pair `(output, weights)`:
`output` has shape `(..., L, Ev)` and `weights` `(..., L, S)`.
You may use your `softmax` (or `torch.softmax`).
"""),
    answer("soft_lookup", r'''
def soft_lookup(query, keys, values, temperature=1.0):
    """Return (output, weights): weights = softmax(query @ keys^T / temperature), output = weights @ values."""
    ### BEGIN SOLUTION
    weights = softmax((query @ keys.transpose(-2, -1)) / temperature, dim=-1)
    return weights @ values, weights
    ### END SOLUTION
'''),
    tests("test_soft_lookup", 3, r'''
from qkv.checks import check_soft_lookup

check_soft_lookup(soft_lookup)

# A cold lookup is nearly a dictionary; a hot one returns the mean of the values.
keys = torch.eye(3)
values = torch.tensor([[10.0], [20.0], [30.0]])
cold, _ = soft_lookup(keys[1:2], keys, values, temperature=0.01)
hot, _ = soft_lookup(keys[1:2], keys, values, temperature=1000.0)
assert abs(cold.item() - 20.0) < 1e-3, cold
assert abs(hot.item() - 20.0) < 1e-2 and abs(soft_lookup(keys[:1], keys, values, 1000.0)[0].item() - 20.0) < 0.1
### BEGIN HIDDEN TESTS
check_soft_lookup(soft_lookup, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    code(r"""
# The temperature at work: one query, four entries.
scores_keys = torch.tensor([[2.0, 0.0], [1.0, 0.0], [0.5, 0.0], [-1.0, 0.0]])
for T in (0.25, 1.0, 4.0):
    _, w = soft_lookup(torch.tensor([[1.0, 0.0]]), scores_keys, torch.zeros(4, 1), temperature=T)
    print(f"T = {T:4}: weights {[round(x, 3) for x in w[0].tolist()]}")
"""),
    markdown(r"""
## 3. Bahdanau's additive score

Bahdanau et al. (2015) score a query $q$ (a decoder state) against a key $k$ (an encoder state)
with a small network: $e = v_a^\top \tanh(W_q q + W_k k)$, with `W_q` of shape `(A, Eq)`,
`W_k` of shape `(A, Ek)` and `v_a` of shape `(A,)`. Compute it for **every** query–key pair at once:
project the queries (`query @ W_q.T`, shape `(..., L, A)`) and the keys (`(..., S, A)`), add them
with broadcasting so that entry `[..., i, j, :]` is query `i` plus key `j` (insert a key axis into
one and a query axis into the other), take the `tanh`, and contract with `v_a`. Return `(..., L, S)`.
"""),
    answer("additive_score", r'''
def additive_score(query, key, W_q, W_k, v_a):
    """Bahdanau's score v_a^T tanh(W_q q_i + W_k k_j) for every pair: shape (..., L, S)."""
    ### BEGIN SOLUTION
    pq = (query @ W_q.T).unsqueeze(-2)  # (..., L, 1, A)
    pk = (key @ W_k.T).unsqueeze(-3)  # (..., 1, S, A)
    return torch.tanh(pq + pk) @ v_a
    ### END SOLUTION
'''),
    tests("test_additive_score", 3, r'''
from qkv.checks import check_additive_score

check_additive_score(additive_score)

# By hand: A = 1, W_q = W_k = [[1]], v_a = [2]: the score is 2 tanh(q + k).
one = torch.ones(1, 1)
s = additive_score(torch.tensor([[0.5]]), torch.tensor([[0.0], [1.0]]), one, one, torch.tensor([2.0]))
assert s.shape == (1, 2), f"expected (L, S) = (1, 2), got {tuple(s.shape)}"
assert abs(s[0, 1].item() - 2 * math.tanh(1.5)) < 1e-6
### BEGIN HIDDEN TESTS
check_additive_score(additive_score, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## 4. Luong's multiplicative scores

Luong et al. (2015) use a product instead: the **dot** score $q^\top k$ (query and key of the
same width), and the **general** score $q^\top W k$ with a learned `W` of shape `(Eq, Ek)`.
`luong_score(query, key)` gives the dot score, `luong_score(query, key, W)` the general one;
both return `(..., L, S)`. No scaling here: the $1/\sqrt{E}$ came later, with the transformer.
"""),
    answer("luong_score", r'''
def luong_score(query, key, W=None):
    """Luong's score: query @ key^T ("dot"), or query @ W @ key^T ("general") when W is given."""
    ### BEGIN SOLUTION
    if W is not None:
        query = query @ W
    return query @ key.transpose(-2, -1)
    ### END SOLUTION
'''),
    tests("test_luong_score", 2, r'''
from qkv.checks import check_luong_score

check_luong_score(luong_score)

q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
assert torch.allclose(luong_score(q, k, torch.eye(4)), luong_score(q, k), atol=1e-6), \
    "the general score with W = I should equal the dot score"
### BEGIN HIDDEN TESTS
check_luong_score(luong_score, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## What you built

Your four functions are the pieces of every attention layer before the transformer: a score
(additive or multiplicative), a softmax, and a weighted mean. Chapter 2 of the book counts their
parameters and times them side by side; the scaled dot product of the transformer is your
`soft_lookup` with `temperature = sqrt(E)`.
"""),
]

if __name__ == "__main__":
    write(ROOT / "solutions" / "02-lookup" / "lookup.ipynb", CELLS)
