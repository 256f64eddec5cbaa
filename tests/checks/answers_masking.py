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
