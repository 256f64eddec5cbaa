"""Linear attention's slips (assignment 9) that got only "largest difference", the misleading
"rows" hint, or a wrong name (wrong14 B6, C2): each written as a student would; the words
are what the message must say, and what it must not."""

import math

import pytest
import torch
import torch.nn.functional as F

from qkv import checks

from named import assert_named


def linear(kind=""):
    def linear_attention(query, key, value, is_causal=False):
        phi = F.relu if kind == "relu" else (lambda t: F.elu(t) + 1)
        sim = phi(query) @ phi(key).transpose(-2, -1)
        if kind == "scaled":
            sim = sim / math.sqrt(query.shape[-1])
        if is_causal and kind != "mask_after":
            sim = sim.tril()
        w = sim / (sim.sum(-1, keepdim=True) + (0.0 if kind == "no_eps" else 1e-6))
        if is_causal and kind == "mask_after":
            w = w.tril()
        return w @ value
    return linear_attention


def grouped(kind=""):
    def grouped_causal_linear_attention(query, key, value):
        G = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
        pq, pk = F.elu(query) + 1, F.elu(key) + 1
        kv = torch.einsum("bhle,bhlv->bhlev", pk, value)
        S, z = kv.cumsum(2), pk.cumsum(2)
        if kind == "exclusive":
            S, z = S - kv, z - pk
        num = torch.einsum("bhle,bhlev->bhlv", pq, S)
        return num / (torch.einsum("bhle,bhle->bhl", pq, z)[..., None] + 1e-6)
    return grouped_causal_linear_attention


SCALE = "linear attention has no 1/sqrt(E)"
EPS = "the normaliser's + 1e-6 left out"
# name: (check, answer, words the message must hold, words it must not)
NAMED = {
    "linear_attention: scaled by 1/sqrt(E)": ("check_linear_attention", linear("scaled"),
                                              SCALE, EPS),
    "linear_attention: + 1e-6 left out": ("check_linear_attention", linear("no_eps"),
                                          EPS, SCALE),
    "linear_attention: tril after normalising": (
        "check_linear_attention", linear("mask_after"), "causal mask applied after normalising",
        "right for rows"),
    "linear_attention: relu feature map": ("check_linear_attention", linear("relu"),
                                           "feature map relu(x)", "largest difference"),
    "grouped_causal_linear_attention: running sums over j < i": (
        "check_grouped_causal_linear_attention", grouped("exclusive"), "running sums over j < i",
        "largest difference"),
}


@pytest.mark.parametrize("name", NAMED)
def test_the_slip_is_named(name):
    assert_named(*NAMED[name])


@pytest.mark.parametrize("check,answer", [("check_linear_attention", linear()),
                                          ("check_grouped_causal_linear_attention", grouped())])
def test_the_right_answers_written_so_pass(check, answer):
    getattr(checks, check)(answer)
