"""Write solutions/05-multi-head/multi_head.ipynb, the nbgrader source of assignment 5.

Run from the repository root: ``python tools/make_05_multi_head.py``; then regenerate the
student version with ``nbgrader generate_assignment 05-multi-head --force``.
"""

from nbsource import ROOT, answer, code, markdown, setup, tests, write

CELLS = [
    markdown(r"""
# Assignment 5: multi-head attention

Chapter 5 built multi-head attention from three pieces. You will write them:

1. `split_heads`: the projected queries, keys or values `(B, L, D)` viewed as `H` heads of
   width `D // H`, with the heads in front of the sequence: `(B, H, L, D // H)`;
2. `merge_heads`: the inverse, the heads side by side again: `(B, L, D)`;
3. `MultiHeadAttention`: an `nn.Module` that projects, splits, attends in every head at once,
   merges and projects back, with the masks of chapter 6.

Each test cell runs a check from `qkv.checks` on many inputs and, when something is wrong,
says on which input and which mistake it looks like (a reshape without transpose, a missing
output projection, scores scaled by the model width...). Run the set-up cell first. Calling
PyTorch's attention or the course's reference `qkv` from your answers does not count: the
checks block it.
"""),
    setup(extra="from torch import nn"),
    markdown(r"""
## Step 1: splitting into heads

`x.reshape(B, L, H, D // H)` cuts the last dimension of every position into `H` slices; the
slice `h` of every position belongs to head `h`. Then `transpose(1, 2)` moves the head
dimension in front of the sequence, so that each head is one `(L, D // H)` matrix and the
attention of all heads is one batched matrix product.

Reshaping straight to `(B, H, L, D // H)` gives the right shape and the wrong contents: it
cuts the memory in order, so "head 0" gets the first positions whole. The cell below shows it
on a tensor whose entries are their position numbers.
"""),
    code(r"""
B, L, D, H = 1, 4, 6, 2
positions = torch.arange(L, dtype=torch.float32)[None, :, None].expand(B, L, D)
wrong = positions.reshape(B, H, L, D // H)
print("positions in 'head 0' after a bare reshape:", wrong[0, 0].flatten().unique().tolist())
"""),
    answer("split_heads", r'''
def split_heads(x, num_heads):
    """(B, L, D) -> (B, H, L, D // H), head h holding slice h of every position."""
    ### BEGIN SOLUTION
    B, L, D = x.shape
    return x.reshape(B, L, num_heads, D // num_heads).transpose(1, 2)
    ### END SOLUTION
'''),
    tests("test_split_heads", 2, r'''
from qkv.checks import check_split_heads  # imported in each test cell, on purpose

check_split_heads(split_heads)

x = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
y = split_heads(x, 2)
assert y.shape == (2, 2, 3, 2), f"expected (B, H, L, D // H) = (2, 2, 3, 2), got {tuple(y.shape)}"
assert y[0, 1, 2].tolist() == [10.0, 11.0], "head 1 of position 2 holds features 2 and 3 of it"
### BEGIN HIDDEN TESTS
check_split_heads(split_heads, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## Step 2: merging the heads back

The inverse: put the sequence before the heads again (`transpose(1, 2)`), then join the last
two dimensions (`reshape`). After the transpose the tensor is not contiguous in memory, so
`.view` refuses it; `reshape` copies when it must.
"""),
    answer("merge_heads", r'''
def merge_heads(x):
    """(B, H, L, Dh) -> (B, L, H * Dh), head 0 first."""
    ### BEGIN SOLUTION
    B, H, L, Dh = x.shape
    return x.transpose(1, 2).reshape(B, L, H * Dh)
    ### END SOLUTION
'''),
    tests("test_merge_heads", 2, r'''
from qkv.checks import check_merge_heads

check_merge_heads(merge_heads)

x = torch.randn(2, 5, 12)
assert torch.equal(merge_heads(split_heads(x, 3)), x), "merge_heads(split_heads(x, H)) must give x back"
### BEGIN HIDDEN TESTS
check_merge_heads(merge_heads, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## Step 3: the module

Write `MultiHeadAttention` with the constructor and `forward` of `qkv.MultiHeadAttention`
(the check builds your class with `embed_dim, num_heads, kdim=, vdim=, device=, dtype=` and
copies its weights into your four layers, so keep their names):

- `__init__`: four `nn.Linear` layers `q_proj` (`embed_dim -> embed_dim`), `k_proj`
  (`kdim -> embed_dim`), `v_proj` (`vdim -> embed_dim`) and `out_proj`
  (`embed_dim -> embed_dim`), each created with `device=device, dtype=dtype`.
- `forward(query, key=None, value=None, key_padding_mask=None, need_weights=False,
  attn_mask=None, average_attn_weights=True, is_causal=False)`:
  1. `key` defaults to `query` and `value` to `key` (self-attention); a 2-D `query` `(L, D)`
     is one unbatched sequence: add a batch dimension and remove it at the end.
  2. Build one bool mask, `True` where attention is allowed: the causal mask
     `torch.ones(L, S).tril()` if `is_causal`, `attn_mask` `(L, S)` if given, and
     `key_padding_mask` `(B, S)` (`True` for real tokens) as `[:, None, None, :]`; combine them
     with `&`.
  3. Project, split into heads, and compute each head's scores `q @ k^T`, scaled by
     `1 / sqrt(head_dim)` (the width of one head, not of the model), masked with `-inf`;
     softmax over the keys; multiply by the values.
  4. Merge the heads and apply `out_proj`.
  5. Return `(output, weights)`: `weights` is `None` unless `need_weights`; then it is
     `(B, H, L, S)`, averaged over the heads (`(B, L, S)`) when `average_attn_weights`.

In the checks every query may attend to at least one key, so fully masked rows need no
special care here.
"""),
    answer("MultiHeadAttention", r'''
class MultiHeadAttention(nn.Module):
    """Batch-first multi-head attention; bool masks are True where attention is allowed."""

    def __init__(self, embed_dim, num_heads, bias=True, kdim=None, vdim=None, dropout=0.0,
                 device=None, dtype=None):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        kdim = embed_dim if kdim is None else kdim
        vdim = embed_dim if vdim is None else vdim
        ### BEGIN SOLUTION
        f = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)
        self.k_proj = nn.Linear(kdim, embed_dim, bias=bias, **f)
        self.v_proj = nn.Linear(vdim, embed_dim, bias=bias, **f)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)
        ### END SOLUTION

    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=False,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        key = query if key is None else key
        value = key if value is None else value
        ### BEGIN SOLUTION
        batched = query.dim() == 3
        if not batched:
            query, key, value = query[None], key[None], value[None]
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask[None]
        B, L, _ = query.shape
        S = key.shape[1]
        allowed = torch.ones(B, 1, L, S, dtype=torch.bool, device=query.device)
        if is_causal:
            allowed = allowed & torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        if attn_mask is not None:
            allowed = allowed & attn_mask
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        vals = split_heads(self.v_proj(value), self.num_heads)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        out = self.out_proj(merge_heads(weights @ vals))
        if not batched:
            out, weights = out[0], weights[0]
        if not need_weights:
            return out, None
        return out, weights.mean(dim=-3) if average_attn_weights else weights
        ### END SOLUTION
'''),
    tests("test_MultiHeadAttention", 4, r'''
from qkv.checks import check_MultiHeadAttention

check_MultiHeadAttention(MultiHeadAttention)

# Your module against PyTorch's with the same weights (here, outside your code, PyTorch's
# own module may run). PyTorch's masks say True where attention is *forbidden*.
torch.manual_seed(0)
theirs = nn.MultiheadAttention(8, 2, batch_first=True).eval()
mine = MultiHeadAttention(8, 2).eval()
with torch.no_grad():
    for layer, w, b in zip((mine.q_proj, mine.k_proj, mine.v_proj),
                           theirs.in_proj_weight.split(8), theirs.in_proj_bias.split(8)):
        layer.weight.copy_(w)
        layer.bias.copy_(b)
    mine.out_proj.weight.copy_(theirs.out_proj.weight)
    mine.out_proj.bias.copy_(theirs.out_proj.bias)
    x = torch.randn(2, 5, 8)
    keep = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    out, _ = mine(x, key_padding_mask=keep, is_causal=True)
    causal_forbidden = torch.ones(5, 5, dtype=torch.bool).triu(1)
    ref, _ = theirs(x, x, x, key_padding_mask=~keep, attn_mask=causal_forbidden)
assert (out - ref).abs().max() < 1e-5, "not the same function as nn.MultiheadAttention"
### BEGIN HIDDEN TESTS
check_MultiHeadAttention(MultiHeadAttention, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## What you built

With the same weights, your module computes what `nn.MultiheadAttention` computes, and what
the attention layers of the pretrained model in chapter 5 compute. `h` heads of width
`D // h` cost exactly the parameters of one head of width `D`; what they buy is `h` separate
weighted averages per query instead of one.
"""),
]

if __name__ == "__main__":
    write(ROOT / "solutions" / "05-multi-head" / "multi_head.ipynb", CELLS)
