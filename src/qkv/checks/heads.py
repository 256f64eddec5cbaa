"""Checks for assignment 10 (what heads do): ``mean_ablate``, ``repeat_loss`` and
``duplicate_token_score``.

``mean_ablate`` is a variation on the chapter's ablation, which zeroes a head's slice of the
output projection: *mean* ablation replaces the head's output by its average over the batch and
the positions, so the rest of the model still receives the head's typical contribution and only
what it computes for each token is lost. The assignment prints a version with bugs; each
:class:`Mistake` below is the right function with one bug put back. ``repeat_loss`` is the
in-context loss of :func:`qkv.measure_induction`, written by the student for the experiment.
``duplicate_token_score`` is a variation on the chapter's head scores that :mod:`qkv.heads`
does not contain: the weight on earlier copies of the query's own token (a duplicate-token
head), one key before the induction head's target.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor

from ._ablation_experiment import ABLATION_CHECK
from .harness import Case, Exercise, ExerciseRule, Mistake, checks_of, randn, make_check
from .mistakes.heads import mean_ablate as mean_ablate_variant
from .mistakes.heads import repeat_loss as repeat_loss_variant

__all__ = ["check_ablation_rise", "check_duplicate_token_score", "check_mean_ablate",
           "check_repeat_loss"]


def _new_tensor(student, head_outputs: Tensor, heads, num_heads) -> Tensor:
    """The student's mean_ablate, refused when it hands back its input's storage: the text
    asks for a new tensor, and the caller may change the result in place."""
    out = student(head_outputs, heads, num_heads)
    if isinstance(out, Tensor) and out.untyped_storage().data_ptr() == \
            head_outputs.untyped_storage().data_ptr():
        raise ExerciseRule(
            f"with heads={list(heads)} it returned head_outputs itself (or a view of it), "
            "not a new tensor", "start from head_outputs.clone(), then replace the listed "
            "heads' columns: changing the result must leave the input as it was")
    return out


def _ablate_case(B, T, D, heads, num_heads):
    def build(gen, device, dtype):
        return (randn(gen, B, T, D, device=device, dtype=dtype) + 1.0, list(heads),
                num_heads), {}
    return build


MEAN_ABLATE = Exercise(
    name="mean_ablate", reference=mean_ablate_variant, legend="(B, T, D)",
    run_student=_new_tensor,
    cases=[Case("B=2, T=5, D=8, 2 heads, heads=[1]", _ablate_case(2, 5, 8, [1], 2),
                torch.float64),
           Case("B=3, T=4, D=12, 4 heads, heads=[0, 2]", _ablate_case(3, 4, 12, [0, 2], 4),
                torch.float32),
           Case("B=1, T=6, D=6, 3 heads, heads=[]", _ablate_case(1, 6, 6, [], 3),
                torch.float64)],
    mistakes=[
        Mistake("the mean over the features (dim=-1) (a bug of the printed function)",
                "average over the batch and the positions, dims (0, 1), one mean per feature",
                partial(mean_ablate_variant, dims=(-1,))),
        Mistake("the mean over the positions of each sequence only",
                "average over the batch too: dims (0, 1)", partial(mean_ablate_variant, dims=(1,))),
        Mistake("the mean over the batch only, one per position",
                "average over the positions too: dims (0, 1)",
                partial(mean_ablate_variant, dims=(0,))),
        Mistake("one mean per head over all its columns (a scalar), not one per feature",
                "keep one mean per feature: mean over dims (0, 1) only, not over the head's "
                "columns", partial(mean_ablate_variant, dims=(0, 1, 2))),
        Mistake("head h's columns taken as h .. h + d (a bug of the printed function)",
                "head h owns columns h * d .. (h + 1) * d, d = D // num_heads",
                partial(mean_ablate_variant, narrow=True)),
        Mistake("the head zeroed instead of replaced by its mean",
                "mean ablation keeps the head's average output", partial(mean_ablate_variant,
                                                                          zero=True)),
    ],
)


def _loss_case(B, T, V):
    def build(gen, device, dtype):
        logits = randn(gen, B, T, V, device=device, dtype=dtype) * 2
        tokens = torch.randint(0, V, (B, T), generator=gen).to(device)
        repeat = torch.rand(B, T, generator=gen) < 0.4
        repeat[:, 0] = True  # every sequence has a position to score
        repeat[:, -1] = True  # unscored (no next token): a target rolled around would count it
        return (logits, tokens, repeat.to(device)), {}
    return build


REPEAT_LOSS = Exercise(
    name="repeat_loss", reference=repeat_loss_variant, legend="() a scalar tensor",
    cases=[Case("B=2, T=6, V=5", _loss_case(2, 6, 5), torch.float64),
           Case("B=4, T=10, V=32", _loss_case(4, 10, 32), torch.float32)],
    mistakes=[
        Mistake("position t scored on token t, not t + 1", "query t predicts token t + 1: "
                "logits[:, :-1] against tokens[:, 1:], marks repeat[:, :-1]",
                partial(repeat_loss_variant, shift=False)),
        Mistake("the mean over every position", "average only where repeat is True",
                partial(repeat_loss_variant, everywhere=True)),
        Mistake("the mean of each sequence's mean", "one mean over every marked position of "
                "the batch: sequences with more marked positions weigh more (loss[marks].mean())",
                partial(repeat_loss_variant, per_sequence=True)),
        Mistake("the last position scored, on a target rolled around (tokens.roll(-1))",
                "the last position has no next token: score positions 0 .. T-2, logits[:, :-1] "
                "against tokens[:, 1:], marks repeat[:, :-1]",
                partial(repeat_loss_variant, roll=True)),
        Mistake("the marks of the target token (repeat[:, 1:]), not of the position scored",
                "repeat marks the positions whose next token is scored: repeat[:, :-1]",
                partial(repeat_loss_variant, marks_of_target=True)),
        Mistake("the losses times the marks averaged over every position ((loss * marks)"
                ".mean()): the unmarked positions count as zeros in the mean",
                "average over the marked positions only: loss[marks].mean(), or (loss * marks)"
                ".sum() / marks.sum()", partial(repeat_loss_variant, zeros_counted=True)),
        *(Mistake("the shift the wrong way: position t + 1 scored on token t (logits[:, 1:] "
                  "against tokens[:, :-1])", "query t predicts token t + 1: logits[:, :-1] "
                  "against tokens[:, 1:], marks repeat[:, :-1]",
                  partial(repeat_loss_variant, backwards=True, marks_of_target=marks))
          for marks in (False, True)),
        Mistake("probabilities handed to cross_entropy (a softmax first)", "F.cross_entropy "
                "takes the logits themselves: it applies log_softmax inside",
                partial(repeat_loss_variant, probabilities=True)),
        Mistake("the marked losses summed (.sum()) instead of averaged", "the repeat loss is "
                "a mean: loss[marks].mean(), the sum divided by the number of marked positions",
                partial(repeat_loss_variant, summed=True)),
        Mistake("F.nll_loss on the logits themselves (no log_softmax first)", "F.nll_loss "
                "expects log-probabilities: F.nll_loss(F.log_softmax(logits, -1), ...), or "
                "F.cross_entropy(logits, ...), which does both", partial(repeat_loss_variant,
                                                                         raw_nll=True)),
    ],
)


def _duplicate_score(weights: Tensor, tokens: Tensor, *, shift: int = 0, self_too: bool = False,
                     last_only: bool = False, every_query: bool = False,
                     per_sequence: bool = False, transposed: bool = False,
                     later_too: bool = False, pairs_later: bool = False,
                     mean_weight: bool = False) -> Tensor:
    """Each head's duplicate-token score: the total weight query ``t`` puts on the earlier keys
    ``j < t`` holding its own token, averaged over every (sequence, query) pair that has such a
    key; or a known mistake (the switches; ``mean_weight``: the mean weight per earlier copy,
    not their total)."""
    T = tokens.shape[-1]
    t, j = torch.arange(T, device=tokens.device)[:, None], torch.arange(T, device=tokens.device)
    same = tokens[:, :, None] == tokens[:, None, :]  # (B, T, T): [b, query t, key j]
    dup = same & (j < t)
    has = (same & (j != t) if pairs_later else dup).any(-1)  # (B, T)
    target = same & (j <= t) if self_too else same & (j != t) if later_too else dup
    if last_only:  # only the most recent earlier occurrence
        last = torch.where(dup, j, -1).amax(-1, keepdim=True)
        target = dup & (j == last)
    if shift:  # the key after each earlier occurrence: the induction target
        target = torch.nn.functional.pad(target[..., :-shift], (shift, 0))
    w = weights.transpose(-2, -1) if transposed else weights
    on = (w * target[:, None].to(w.dtype)).sum(-1)  # (B, H, T)
    if mean_weight:
        on = on / target.sum(-1)[:, None].clamp(min=1).to(w.dtype)
    if every_query:
        return on.mean((0, 2))
    mask = has[:, None].to(w.dtype)
    if per_sequence:
        return ((on * mask).sum(-1) / mask.sum(-1)).mean(0)
    return (on * mask).sum((0, 2)) / mask.sum((0, 2))


def _score_case(B, H, T, V, distinct_batch=False, causal=True):
    def build(gen, device, dtype):
        scores = randn(gen, B, H, T, T, device=device, dtype=dtype) * 2
        allowed = torch.ones(T, T, dtype=torch.bool, device=device)
        if causal:  # as a trained model's weights; without: later keys have weight too
            allowed = allowed.tril()
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        tokens = torch.randint(0, V, (B, T), generator=gen)
        tokens[:, 1] = tokens[:, 0]  # every sequence has a duplicate
        if distinct_batch:  # one sequence with a single duplicate, the others with many
            tokens[0] = torch.arange(T) % (T - 1)
        return (weights, tokens.to(device)), {}
    return build


DUPLICATE_TOKEN_SCORE = Exercise(
    name="duplicate_token_score", reference=_duplicate_score, legend="(H,) one score per head",
    cases=[Case("B=2, H=3, T=8, 3 token ids (tokens repeat often)", _score_case(2, 3, 8, 3),
                torch.float64),
           Case("B=3, H=2, T=10, 6 token ids", _score_case(3, 2, 10, 6), torch.float32),
           Case("B=3, H=2, T=9, one sequence with a single duplicate, the others with many",
                _score_case(3, 2, 9, 2, distinct_batch=True), torch.float64),
           Case("B=2, H=2, T=8, 3 token ids, weights of a head without a causal mask (later keys "
                "have weight too: only the earlier ones count)",
                _score_case(2, 2, 8, 3, causal=False), torch.float64)],
    mistakes=[
        Mistake("off by one: the key after the earlier occurrence (j + 1; that is the induction "
                "score)", "a duplicate-token head looks at the earlier occurrence itself: key j "
                "with tokens[j] == tokens[t], j < t", partial(_duplicate_score, shift=1)),
        Mistake("the query's own key counted (j <= t: every token matches itself)",
                "only earlier keys count: j < t, the diagonal excluded",
                partial(_duplicate_score, self_too=True)),
        Mistake("the query's own key counted (tril() instead of tril(-1): every token is its own "
                "duplicate, so every query is averaged)", "only earlier keys count: j < t, "
                "ones(T, T).tril(-1), the diagonal excluded; with it every query has a match "
                "(itself) and the average takes in queries without a real duplicate",
                partial(_duplicate_score, self_too=True, every_query=True)),
        Mistake("later copies of the token counted too (j != t instead of j < t)",
                "only the earlier keys count: j < t", partial(_duplicate_score, later_too=True)),
        Mistake("queries whose token comes back only later counted among the pairs averaged",
                "average over the (sequence, query) pairs whose token appeared before the query "
                "(some key j < t holds it); a token that only repeats later has no such key",
                partial(_duplicate_score, pairs_later=True)),
        Mistake("only the most recent earlier occurrence counted",
                "sum the weight on every earlier key that holds the query's token",
                partial(_duplicate_score, last_only=True)),
        Mistake("averaged over every query, also those whose token has not appeared before",
                "average only over the (sequence, query) pairs that have an earlier duplicate",
                partial(_duplicate_score, every_query=True)),
        Mistake("each sequence averaged first, then the sequences (a mean of means)",
                "one average over every (sequence, query) pair that has a duplicate: divide the "
                "sum over the batch and the queries by their number",
                partial(_duplicate_score, per_sequence=True)),
        Mistake("the mean weight per earlier copy instead of their total",
                "the score is the TOTAL weight query t puts on the earlier keys holding its "
                "token: sum those weights, do not divide by how many copies there are",
                partial(_duplicate_score, mean_weight=True)),
        # Both read the weights of queries on LATER keys: the same numbers.
        Mistake("the weights read as [key, query] instead of [query, key], or the later keys "
                "taken (triu instead of tril)",
                "weights[b, h, t, j] is query t's weight on key j, and the earlier keys are "
                "j < t: tril(diagonal=-1)", partial(_duplicate_score, transposed=True)),
    ],
)


#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(MEAN_ABLATE, REPEAT_LOSS, DUPLICATE_TOKEN_SCORE, ABLATION_CHECK,
                   given=("InductionTask", "ablate_heads"))


# --------------------------------------------------------------------------- the checks

check_mean_ablate = make_check(
    CHECKS, "check_mean_ablate", __name__,
    "Check the fixed ``mean_ablate(head_outputs, heads, num_heads)``: the heads' outputs side by "
    "side, ``(B, T, D)``, with each listed head replaced by its mean over the batch and the "
    "positions; a bug of the printed version left in is named.")

check_repeat_loss = make_check(
    CHECKS, "check_repeat_loss", __name__,
    "Check ``repeat_loss(logits, tokens, repeat)``: the mean next-token cross-entropy over the "
    "positions ``repeat`` marks (position ``t`` predicts token ``t + 1``).")

check_duplicate_token_score = make_check(
    CHECKS, "check_duplicate_token_score", __name__,
    "Check ``duplicate_token_score(weights, tokens)``: per head, the total weight a query puts on"
    " the earlier keys holding its own token, averaged over the (sequence, query) pairs that have"
    " one; ``weights (B, H, T, T)``, ``tokens (B, T)``, the result ``(H,)``.")

check_ablation_rise = make_check(
    CHECKS, "check_ablation_rise", __name__,
    "Check the experiment ``ablation_rise(model, layer, head, how, generator)`` as a measurement "
    "on a trained model (see :mod:`._ablation_experiment`).")
