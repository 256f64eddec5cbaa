"""Every public function checks its arguments (through qkv._validate) before torch sees them."""

from __future__ import annotations

import inspect

import pytest
import torch

import qkv
from qkv import _validate as v

WRONG = "not an argument"  # the wrong type for every first argument in qkv.__all__


def _plausible(annotation: str):
    """A valid-looking value for a parameter, from its annotation."""
    if "Tensor" in annotation:
        return torch.zeros(2, 2)
    if "int" in annotation:
        return 2
    return torch.Generator() if "Generator" in annotation else None


def _call_with_wrong_first(obj):
    target = obj.__init__ if inspect.isclass(obj) else obj
    params = [p for p in inspect.signature(target).parameters.values() if p.name != "self"]
    rest = [_plausible(str(p.annotation)) for p in params[1:] if p.default is inspect.Parameter.empty]
    obj(WRONG, *rest)


def _takes_arguments(name: str) -> bool:
    obj = getattr(qkv, name)
    target = obj.__init__ if inspect.isclass(obj) else obj
    return any(p != "self" for p in inspect.signature(target).parameters)


# (A function of no arguments, qkv.chapter_ablations, has no first argument to get wrong.)
@pytest.mark.parametrize("name", [n for n in qkv.__all__ if _takes_arguments(n)])
def test_a_wrong_first_argument_is_named_in_the_error(name):
    obj = getattr(qkv, name)
    target = obj.__init__ if inspect.isclass(obj) else obj
    first = next(p for p in inspect.signature(target).parameters if p != "self")
    with pytest.raises((TypeError, ValueError)) as e:
        _call_with_wrong_first(obj)
    assert first in str(e.value), f"{name}: {e.value}"
    assert "str" in str(e.value) or repr(WRONG) in str(e.value), f"{name} does not say what it got: {e.value}"


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda: qkv.attention_scores(torch.zeros(2, 3, 4), torch.zeros(2, 5, 3)), ValueError,
         ["query and key", "same last dim E", "(2, 3, 4)", "(2, 5, 3)"]),
        (lambda: qkv.attention_scores(torch.zeros(3, 4).long(), torch.zeros(5, 4)), TypeError,
         ["query", "floating-point", "torch.int64"]),
        (lambda: qkv.attention_scores(torch.zeros(3, 4), torch.zeros(5, 4), scale=0), ValueError,
         ["scale", "positive", "0"]),
        (lambda: qkv.attention_scores(torch.zeros(3, 4), torch.zeros(5, 4), torch.ones(3, 4, dtype=torch.bool)),
         ValueError, ["attn_mask", "(..., 3, 5)", "(3, 4)"]),
        (lambda: qkv.attention_weights(torch.zeros(3, 4, dtype=torch.long)), TypeError,
         ["scores", "floating-point"]),
        (lambda: qkv.attend(torch.zeros(2, 3, 5), torch.zeros(2, 4, 6)), ValueError,
         ["scores and value", "number of keys S", "(2, 3, 5)", "(2, 4, 6)"]),
        (lambda: qkv.combine_masks(None, None, False, 2, -1, 3, torch.zeros(2, 1, 4)), ValueError,
         ["L", "non-negative", "-1"]),
        (lambda: qkv.combine_masks(None, None, False, 2, 1, 3, [0.0]), TypeError,
         ["query", "torch.Tensor", "list"]),
        (lambda: qkv.additive_score(torch.zeros(3, 4), torch.zeros(5, 6, dtype=torch.float64),
                                    torch.zeros(7, 4), torch.zeros(7, 6), torch.zeros(7)), TypeError,
         ["dtype", "key: torch.float64"]),
        (lambda: qkv.MultiHeadAttention(8, 2, dropout=1.5), ValueError, ["dropout", "[0, 1]", "1.5"]),
        (lambda: qkv.MultiHeadAttention(8, True), ValueError, ["num_heads", "positive int", "True"]),
        (lambda: qkv.MultiHeadAttention(8, 2)(torch.zeros(4, 8), torch.zeros(5, 8), torch.zeros(6, 8)),
         ValueError, ["agree on B and S", "(5, 8)", "(6, 8)"]),
        (lambda: qkv.LuongAttention(4.0), ValueError, ["query_dim", "positive int", "4.0"]),
        (lambda: qkv.padding_mask("abc"), TypeError, ["lengths", "ints", "'abc'"]),
        (lambda: qkv.to_additive_mask(torch.ones(2, dtype=torch.bool), dtype=torch.long), TypeError,
         ["dtype", "floating-point", "torch.int64"]),
        (lambda: qkv.sliding_window_mask(4, 4, 0), ValueError, ["window", "positive int", "0"]),
        (lambda: qkv.chunked_attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4),
                                       is_causal=True, window=1.5), ValueError, ["window", "1.5"]),
        (lambda: qkv.kv_cache_step(torch.zeros(1, 4), torch.zeros(1, 4), torch.zeros(1, 4).long()),
         TypeError, ["value", "floating-point"]),
        (lambda: qkv.scaled_dot_product_attention(torch.zeros(3, 4), torch.zeros(5, 4), torch.zeros(5, 2),
                                                  scale=True), ValueError, ["scale", "True"]),
        (lambda: qkv.softmax(torch.zeros(2, 2), dim="last"), ValueError, ["dim='last'", "x", "(2, 2)"]),
    ],
)
def test_new_validations_name_the_argument(call, exc, words):
    with pytest.raises(exc) as e:
        call()
    for w in words:
        assert w in str(e.value), (w, str(e.value))


@pytest.mark.parametrize(
    "value, minimum, message",
    [
        (0, 1, "n must be a positive int, got 0"),
        (True, 1, "n must be a positive int, got True"),
        (2.0, 1, "n must be a positive int, got 2.0"),
        (-1, 0, "n must be a non-negative int, got -1"),
        (1, 2, "n must be an int >= 2, got 1"),
    ],
)
def test_require_int_one_rule_for_every_size(value, minimum, message):
    with pytest.raises(ValueError) as e:
        v.require_int("n", value, minimum)
    assert str(e.value) == message


def test_require_int_returns_what_passes():
    assert v.require_int("n", 3) == 3 and v.require_int("n", 0, minimum=0) == 0


def test_require_int_sequence_accepts_any_iterable_of_integers():
    assert v.require_int_sequence("xs", range(3)) == [0, 1, 2]
    assert v.require_int_sequence("xs", (torch.tensor(2).item(),)) == [2]
    for bad in ([1.5], [True], "12", 3):
        with pytest.raises(TypeError, match="xs must be a sequence of ints"):
            v.require_int_sequence("xs", bad)
