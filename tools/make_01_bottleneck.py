"""Write solutions/01-bottleneck/bottleneck.ipynb, the nbgrader source of assignment 1.

Run from the repository root: ``python tools/make_01_bottleneck.py``; then regenerate the
student version with ``nbgrader generate_assignment 01-bottleneck --force``.
"""

from nbsource import ROOT, answer, code, markdown, setup, tests, write

CELLS = [
    markdown(r"""
# Assignment 1: one step of Bahdanau attention

In chapter 1 a GRU encoder–decoder without attention failed to reverse long sequences, and the
same model with Bahdanau attention did not. Here you write that attention step yourself, plug it
into the course's model (`qkv.bottleneck.Seq2Seq`), train both models for a short while, and check
that yours beats the single context vector on long inputs.

Run the set-up cell first. Calling the course's reference (`qkv.bahdanau_attention`,
`qkv.additive_score`, `qkv.attend`) from your answer does not count: the check blocks it.
"""),
    setup(),
    markdown(r"""
## 1. The attention step

At each output step the decoder's previous state $s$ (the **query**, shape `(B, Hd)`) is compared
with every encoder state $h_j$ (the **keys**, shape `(B, S, He)`, which are also the values):

$$
e_j = v_a^\top \tanh(W_q s + W_k h_j), \qquad
\alpha_j = \frac{e^{e_j}}{\sum_k e^{e_k}}, \qquad
c = \sum_j \alpha_j h_j .
$$

`W_q` has shape `(A, Hd)`, `W_k` `(A, He)`, `v_a` `(A,)`. Return the pair `(context, weights)`:
the context `(B, He)` and the weights `(B, S)`, each row summing to one over the encoder
positions. Keep the softmax stable (subtract the maximum, or use `torch.softmax`).
"""),
    answer("bahdanau_attention", r'''
def bahdanau_attention(query, keys, W_q, W_k, v_a):
    """One step of Bahdanau attention: returns (context (B, He), weights (B, S))."""
    ### BEGIN SOLUTION
    scores = torch.tanh((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) @ v_a  # (B, S)
    weights = torch.softmax(scores, dim=-1)
    context = (weights.unsqueeze(-1) * keys).sum(dim=1)
    return context, weights
    ### END SOLUTION
'''),
    tests("test_bahdanau_attention", 3, r'''
from qkv.checks import check_bahdanau_attention  # imported in each test cell, on purpose

check_bahdanau_attention(bahdanau_attention)

# With v_a = 0 every score is 0: uniform weights, and the context is the mean of the keys.
keys = torch.randn(2, 4, 3)
c, w = bahdanau_attention(torch.randn(2, 5), keys, torch.randn(6, 5), torch.randn(6, 3), torch.zeros(6))
assert w.shape == (2, 4) and c.shape == (2, 3), (tuple(c.shape), tuple(w.shape))
assert torch.allclose(w, torch.full((2, 4), 0.25)) and torch.allclose(c, keys.mean(1), atol=1e-6)
### BEGIN HIDDEN TESTS
check_bahdanau_attention(bahdanau_attention, seed=None)  # fresh random inputs, drawn when grading
### END HIDDEN TESTS
'''),
    markdown(r"""
## 2. Train both models

The cell below builds two models of the same size from the same seed: one reads the input
through the encoder's last state only, the other uses **your** `bahdanau_attention` at every
decoder step. Both are trained on the same batches of the reversal task (inputs of 2 to 12
symbols) for the same number of steps, then scored on fresh inputs of every length. It takes
well under a minute on a laptop CPU.
"""),
    code(r"""
from qkv.bottleneck import ReverseTask, accuracy_by_length, make_model, train

torch.set_num_threads(1)  # tiny matrices: threads cost more than they save
task = ReverseTask(n_symbols=10, min_len=2, max_len=12)
plain = make_model(task, attention=False, seed=0, hidden_dim=32)
mine = make_model(task, attention=True, seed=0, hidden_dim=32, attention_step=bahdanau_attention)
train(plain, task, steps=500, seed=0, desc="without attention")
train(mine, task, steps=500, seed=0, desc="with your attention")
acc_plain = accuracy_by_length(plain, task, n_per_length=100, seed=1)
acc_mine = accuracy_by_length(mine, task, n_per_length=100, seed=1)
for n in range(task.min_len, task.max_len + 1):
    print(f"length {n:2}: without {acc_plain[n]:.2f}   with your attention {acc_mine[n]:.2f}")
"""),
    tests("test_training_result", 2, r'''
longest = range(10, 13)
mean = lambda acc: sum(acc[n] for n in longest) / len(longest)
print(f"mean accuracy at lengths 10-12: without {mean(acc_plain):.2f}, with yours {mean(acc_mine):.2f}")
assert mine.attention_step is bahdanau_attention, "train the model that uses your bahdanau_attention"
assert mean(acc_mine) > mean(acc_plain) + 0.2, "attention should be clearly ahead on the longest inputs"
### BEGIN HIDDEN TESTS
assert acc_mine[2] > 0.9, "even short inputs are not reversed: is the attention step right?"
### END HIDDEN TESTS
'''),
    markdown(r"""
## What you built

Your function is the whole difference between the two models: the same encoder, decoder and
training, but a context computed afresh at every step instead of one vector for the whole input.
Chapter 1 of the book draws the weights it learns: an anti-diagonal, the structure of reversal.
"""),
]

if __name__ == "__main__":
    write(ROOT / "solutions" / "01-bottleneck" / "bottleneck.ipynb", CELLS)
