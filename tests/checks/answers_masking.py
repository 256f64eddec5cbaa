"""Catalogues of student answers for the masking checks (causal_mask, padding_mask): wrong ones
(each with the words its hint must contain) and right ones written differently (each passes)."""

import torch


# ----------------------------------------------------------------------------- causal_mask
def causal_ok(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()


def causal_arange(L, S=None, device=None):
    S = L if S is None else S
    return torch.arange(S, device=device)[None, :] <= torch.arange(L, device=device)[:, None]


def causal_moved(L, S=None, device=None):
    S = L if S is None else S
    return ~torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1).to(device)


def causal_triu(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).triu(1)


def causal_no_diag(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(-1)


def causal_bottom(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(S - L)


def causal_no_device(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool).tril()


def causal_float(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, device=device).tril()


CAUSAL_WRONG = {
    "inverted": (causal_triu, "inverted mask"),
    "off by one": (causal_no_diag, "off by one"),
    "bottom right": (causal_bottom, "bottom right"),
    "float instead of bool": (causal_float, "bool"),
}
CAUSAL_RIGHT = {"tril": causal_ok, "arange comparison": causal_arange, "moved with .to": causal_moved}


# ----------------------------------------------------------------------------- padding_mask
def _lengths(lengths):
    return lengths if isinstance(lengths, torch.Tensor) else torch.tensor(lengths)


def padding_ok(lengths, S=None):
    lengths = torch.as_tensor(lengths)
    S = int(lengths.max()) if S is None else S
    return torch.arange(S, device=lengths.device)[None, :] < lengths[:, None]


def padding_loop(lengths, S=None):
    lengths = _lengths(lengths)
    S = int(lengths.max()) if S is None else S
    mask = torch.zeros(len(lengths), S, dtype=torch.bool, device=lengths.device)
    for i, n in enumerate(lengths.tolist()):
        mask[i, :n] = True
    return mask


def padding_inverted(lengths, S=None):
    return ~padding_ok(lengths, S)


def padding_inclusive(lengths, S=None):
    lengths = torch.as_tensor(lengths)
    S = int(lengths.max()) if S is None else S
    return torch.arange(S, device=lengths.device)[None, :] <= lengths[:, None]


def padding_no_device(lengths, S=None):
    lengths = torch.as_tensor(lengths)
    S = int(lengths.max()) if S is None else S
    return torch.arange(S)[None, :] < lengths[:, None]


def padding_list_fails(lengths, S=None):
    S = int(lengths.max()) if S is None else S
    return torch.arange(S, device=lengths.device)[None, :] < lengths[:, None]


PADDING_WRONG = {
    "inverted": (padding_inverted, "inverted mask"),
    "off by one": (padding_inclusive, "off by one"),
    "list input": (padding_list_fails, "torch.as_tensor"),
}
PADDING_RIGHT = {"arange comparison": padding_ok, "loop": padding_loop}


# ----------------------------------------------------------------------------- found by trying
# Mistakes a student made while trying the exercises (issue 13, item 5).
def causal_none_S(L, S=None, device=None):
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()  # S=None not handled


def padding_ignores_S(lengths, S=None):
    lengths = _lengths(lengths)
    positions = torch.arange(int(lengths.max()))  # no device= either: the value is told first
    return positions[None, :] < lengths[:, None]


CAUSAL_WRONG["S=None not handled"] = (causal_none_S, "at line")
PADDING_WRONG["S ignored, no device"] = (padding_ignores_S, "S ignored")


# ----------------------------------------------------------------------------- masked_scores
# Assignment 6's masking step: each answer calls ``causal_mask`` as the exercise invites
# (the course's while the check runs).
from qkv import causal_mask  # noqa: E402 (the notebook's own, in a real submission)

_NEG = float("-inf")


def _refuse(attn_mask, is_causal):
    if is_causal and attn_mask is not None:
        raise ValueError("pass either attn_mask or is_causal=True, not both")


def scores_ok(scores, attn_mask=None, is_causal=False):
    _refuse(attn_mask, is_causal)
    if is_causal:
        attn_mask = causal_mask(scores.shape[-2], scores.shape[-1], device=scores.device)
    if attn_mask is None:
        return scores
    if attn_mask.dtype == torch.bool:
        return scores.masked_fill(~attn_mask, _NEG)
    return scores + attn_mask


def scores_where(scores, attn_mask=None, is_causal=False):
    """torch.where, and the float mask first."""
    _refuse(attn_mask, is_causal)
    if attn_mask is not None and attn_mask.is_floating_point():
        return scores + attn_mask
    if is_causal:
        attn_mask = causal_mask(scores.shape[-2], scores.shape[-1], device=scores.device)
    return scores if attn_mask is None else torch.where(attn_mask, scores, _NEG)


def scores_additive(scores, attn_mask=None, is_causal=False):
    """Every mask made additive (0 / -inf), then added: a copy is always returned."""
    _refuse(attn_mask, is_causal)
    L, S = scores.shape[-2:]
    if is_causal:
        attn_mask = causal_mask(L, S, device=scores.device)
    if attn_mask is None:
        return scores.clone()
    if attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros_like(attn_mask, dtype=scores.dtype).masked_fill(~attn_mask, _NEG)
    return scores + attn_mask


def _variant(change):
    def answer(scores, attn_mask=None, is_causal=False):
        return change(scores, attn_mask, is_causal)
    return answer


def _fill(value, transpose=False, keep_full_rows=False, invert=False):
    def change(scores, attn_mask, is_causal):
        _refuse(attn_mask, is_causal)
        if is_causal:
            attn_mask = causal_mask(scores.shape[-2], scores.shape[-1], device=scores.device)
        if attn_mask is None:
            return scores
        if not attn_mask.dtype == torch.bool:
            return scores + attn_mask
        if transpose:
            attn_mask = attn_mask.mT
        if keep_full_rows:
            attn_mask = attn_mask | ~attn_mask.any(-1, keepdim=True)
        return scores.masked_fill(attn_mask if invert else ~attn_mask, value)
    return _variant(change)


def scores_causal_shift(diag):
    def change(scores, attn_mask, is_causal):
        _refuse(attn_mask, is_causal)
        if is_causal:
            L, S = scores.shape[-2:]
            attn_mask = torch.ones(L, S, dtype=torch.bool, device=scores.device).tril(diag)
        if attn_mask is None:
            return scores
        if attn_mask.dtype == torch.bool:
            return scores.masked_fill(~attn_mask, _NEG)
        return scores + attn_mask
    return _variant(change)


def scores_no_refusal(scores, attn_mask=None, is_causal=False):
    if is_causal:
        causal = causal_mask(scores.shape[-2], scores.shape[-1], device=scores.device)
        attn_mask = causal if attn_mask is None else causal & attn_mask
    if attn_mask is None:
        return scores
    if attn_mask.dtype == torch.bool:
        return scores.masked_fill(~attn_mask, _NEG)
    return scores + attn_mask


def scores_indexed(scores, attn_mask=None, is_causal=False):
    _refuse(attn_mask, is_causal)
    if is_causal:
        attn_mask = causal_mask(scores.shape[-2], scores.shape[-1], device=scores.device)
    if attn_mask is None:
        return scores
    out = scores.clone()
    out[~attn_mask] = _NEG  # boolean indexing: no broadcasting
    return out


def scores_in_place(scores, attn_mask=None, is_causal=False):
    _refuse(attn_mask, is_causal)
    if is_causal:
        attn_mask = causal_mask(scores.shape[-2], scores.shape[-1], device=scores.device)
    if attn_mask is None:
        return scores
    return scores.masked_fill_(~attn_mask, _NEG)  # changes the caller's scores


SCORES_WRONG = {
    "inverted": (_fill(_NEG, invert=True), "inverted bool mask"),
    "zero fill": (_fill(0.0), "set to 0 instead of -inf"),
    "multiplied by the mask": (_variant(lambda s, m, c: s * m if m is not None else s),
                               "set to 0 instead of -inf"),
    "finite fill -1e9": (_fill(-1e9), "finite fill"),
    "finfo.min fill": (_variant(lambda s, m, c: _fill(torch.finfo(s.dtype).min)(s, m, c)),
                       "finite fill"),
    "fully masked row kept": (_fill(_NEG, keep_full_rows=True), "hides every key left unmasked"),
    "transposed mask": (_fill(_NEG, transpose=True), "wrong axes"),
    "diagonal hidden": (scores_causal_shift(-1), "the diagonal is masked"),
    "one future key": (scores_causal_shift(1), "one future key is allowed"),
    "no refusal": (scores_no_refusal, "instead of raising ValueError"),
    "boolean indexing": (scores_indexed, "does not broadcast"),
    "in place": (scores_in_place, "in place"),
}
SCORES_RIGHT = {"masked_fill": scores_ok, "torch.where": scores_where, "additive": scores_additive}


# ----------------------------------------------------------------------------- global_window_mask
def window_ok(L, window, n_global, device=None):
    i = torch.arange(L, device=device)[:, None]
    j = torch.arange(L, device=device)[None, :]
    return ((j <= i) & (j > i - window)) | (i < n_global) | (j < n_global)


def window_tril(L, window, n_global, device=None):
    ones = torch.ones(L, L, dtype=torch.bool, device=device)
    mask = ones.tril() & ~ones.tril(-window)
    mask[:n_global, :] = True
    mask[:, :n_global] = True
    return mask


def _window(change):
    def answer(L, window, n_global, device=None):
        i = torch.arange(L, device=device)[:, None]
        j = torch.arange(L, device=device)[None, :]
        return change(i, j, window, n_global)
    return answer


WINDOW_WRONG = {
    "inverted": (_window(lambda i, j, w, g: ~(((j <= i) & (j > i - w)) | (i < g) | (j < g))),
                 "inverted mask"),
    "window one too wide": (_window(lambda i, j, w, g: ((j <= i) & (j >= i - w)) | (i < g)
                                    | (j < g)), "one key too many"),
    "window not causal": (_window(lambda i, j, w, g: ((i - j).abs() < w) | (i < g) | (j < g)),
                          "not causal"),
    "globals only seen": (_window(lambda i, j, w, g: ((j <= i) & (j > i - w)) | (j < g)),
                          "do not see all"),
    "globals only see": (_window(lambda i, j, w, g: ((j <= i) & (j > i - w)) | (i < g)),
                         "not seen by all"),
    "one global too many": (_window(lambda i, j, w, g: ((j <= i) & (j > i - w)) | (i <= g)
                                    | (j <= g)), "one global token too many"),
}
WINDOW_RIGHT = {"arange comparison": window_ok, "tril and slices": window_tril}
