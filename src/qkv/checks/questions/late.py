"""The conceptual questions of assignments 6 to 11 (see :mod:`.kinds`).

Each assignment asks its questions in a markdown cell that prints the choices as written here
(``tests/checks/test_checks_questions.py`` checks that, and checks every right answer against
:mod:`qkv`).
"""

from __future__ import annotations

import torch

from .kinds import Choice, Computed, Number

MASKING_Q1 = Choice(
    id="masking_q1",
    choices={"a": "ones(4, 4).tril()", "b": "ones(4, 4).triu()", "c": "ones(4, 4).tril(-1)",
             "d": "ones(4, 4).tril(1)"},
    key="2fbb535072efc019c18570cc",
    explain={
        "a": "query i may see keys 0..i: the lower triangle, diagonal included",
        "b": "the upper triangle allows the future and hides the past: it is the causal "
             "mask read in the other convention (True = blocked)",
        "c": "that hides the diagonal too: no query could see its own token, and query 0 "
             "would see nothing at all",
        "d": "that lets every query see one token of the future",
    },
)

MASKING_Q2 = Choice(
    id="masking_q2",
    choices={"a": "keep", "b": "~keep", "c": "keep.float()", "d": "keep.T"},
    key="09a585581b7a24bfb9bcfa36",
    explain={
        "a": "key_padding_mask is True where a key is ignored: keep would hide the real "
             "tokens and attend to the padding",
        "b": "nn.MultiheadAttention's key_padding_mask is True where a key is ignored, the "
             "opposite of the course's (and SDPA's) True = allowed",
        "c": "a float mask is added to the scores: adding 1 to the real tokens hides nothing",
        "d": "both are (B, S): the convention is the problem, not the layout",
    },
)

POSITION_Q1 = Choice(
    id="position_q1",
    choices={"a": "m + n", "b": "m - n", "c": "m alone", "d": "nothing: RoPE leaves scores as "
             "they are"},
    key="5dd5d621082f821741b9a6ad",
    explain={
        "a": "the two rotations meet in the dot product as R(m)^T R(n) = R(n - m): their "
             "angles subtract",
        "b": "q is rotated by angles proportional to m, k by angles proportional to n, and their "
             "dot product sees only the difference of the angles",
        "c": "the key is rotated too, by its own position n",
        "d": "the score of rotated vectors depends on the angle between the rotations: "
             "that is how RoPE gives attention position",
    },
)

POSITION_Q2 = Number(
    id="position_q2",
    key="a0fedc9cb1f23f073846c288",
    why="ALiBi's slopes are 2^(-8(h+1)/H) for heads h = 0..H-1: head 0 gets 2^-1",
    wrong=lambda: {
        2.0 ** -8: "2^-8 is the last head's slope: head 0 gets the steepest, 2^-1",
        1.0: "2^0 leaves out the + 1 of the exponent: head 0 gets 2^(-8(0+1)/8), not 2^0",
        0.25: "2^-2 is head 1's slope: one head off",
    },
    hint="with H = 8 heads the slopes are 2^(-8(h+1)/H) for heads h = 0..H-1",
)

def _score_mib(length: int) -> float:
    """MiB of one (length, length) float32 score matrix."""
    return length * length * torch.finfo(torch.float32).bits / 8 / 2**20


# Per student: the length comes from the student's seed (the assignment says how).
_LENGTHS = tuple(1024 * (seed % 7 + 2) for seed in range(7))


def _stale(other: int) -> str:
    """What a wrong number also is when it is the answer for another student's length."""
    return (f" (or the answer for length {other}, not yours: re-run the cell that prints "
            "your length)") if other in _LENGTHS else ""


EFFICIENT_Q1 = Computed(
    id="efficient_q1",
    params=("length",),
    answer=_score_mib,
    why=lambda length: (f"{length} * {length} scores of 4 bytes each is "
                        f"{length * length * 4:,} bytes, {_score_mib(length):g} MiB, for every "
                        "head and every sequence of the batch"),
    wrong=lambda length: {
        _score_mib(length) / 2: "that is 2 bytes per score (float16); a float32 takes 4",
        _score_mib(length) / 4: "that is 1 byte per score; a float32 takes 4" + _stale(length // 2),
        _score_mib(length) * 2: "that is 8 bytes per score (float64); a float32 takes 4",
        _score_mib(length) / 1024: "that is in GiB; the question asks MiB (2^20 bytes)",
        length * length * 4 / 10**6: "that is in MB (10^6 bytes); the question asks MiB "
                                     "(2^20 bytes)",
        length * 4 / 2**20: "that is one row of scores; the matrix has length rows",
        length * length * 4: "that is in bytes; the question asks MiB (divide by 2^20)",
        length * length * 4 / 2**10: "that is in KiB; the question asks MiB (2^20 bytes)",
    },
    hint="L * S scores, 4 bytes each in float32, and 2^20 bytes to a MiB",
    examples=tuple({"length": n} for n in _LENGTHS),
)

EFFICIENT_Q2 = Choice(
    id="efficient_q2",
    choices={"a": "multiplied by exp(m - m')", "b": "multiplied by exp(m' - m)",
             "c": "left as it is", "d": "reset to zero"},
    key="e38fd65854bd85a5cf0b06a1",
    explain={
        "a": "its terms were exp(s - m); against the new max they are exp(s - m') = "
             "exp(s - m) exp(m - m')",
        "b": "that makes it larger, but m' > m makes every exp(s - m') smaller than exp(s - m)",
        "c": "its terms were computed against the old max m, and the new chunk's against m': "
             "the sum would mix two scales",
        "d": "the keys already visited would be forgotten: attention over the last chunk only",
    },
)

def _either(slips: list) -> dict:
    """Each wrong number with what it comes from; two slips that land on the same number (bits
    for bytes, with 4 key/value heads, is the 32 query heads' cache) are both said."""
    said: dict = {}
    for number, why in slips:
        said[number] = f"{said[number]}; or {why}" if number in said else why
    return said


def _kv_cache_bytes(layers: int, kv_heads: int) -> int:
    """Bytes of a GQA model's bfloat16 KV cache per token: keys and values, every layer,
    ``kv_heads`` key/value heads of 128 dims."""
    return 2 * layers * kv_heads * 128 * torch.finfo(torch.bfloat16).bits // 8


# Per student: the layers and key/value heads come from the student's seed.
VARIANTS_Q1 = Computed(
    id="variants_q1",
    params=("layers", "kv_heads"),
    answer=_kv_cache_bytes,
    why=lambda layers, kv_heads: (f"keys and values (2) in each of {layers} layers, for "
                                  f"{kv_heads} key/value heads of 128 dims, 2 bytes each"),
    wrong=lambda layers, kv_heads: _either([
        (2 * layers * 32 * 128 * 2, "that caches all 32 query heads, multi-head attention's "
                                    "cache; GQA stores only the key/value heads"),
        (layers * kv_heads * 128 * 2, "the cache holds the keys and the values: twice that"),
        (2 * layers * kv_heads * 128 * 4, "twice the answer: 4 bytes per number is float32; a "
                                          "16-bit float takes 2"),
        (2 * layers * kv_heads * 128 * 16, "that counts bits: a 16-bit number takes 2 bytes"),
        (2 * kv_heads * 128 * 2, "that is one layer; every layer has a cache of its own"),
        (_kv_cache_bytes(layers, kv_heads) / 2**10, "that is in KiB; the question asks bytes"),
        (_kv_cache_bytes(layers, kv_heads) / 2**20, "that is in MiB; the question asks bytes"),
        (_kv_cache_bytes(layers, kv_heads) / 1000, "that is in kB; the question asks bytes"),
    ]),
    hint="bytes per token = 2 (keys and values) x layers x key/value heads x head dim x bytes "
         "per number",
    examples=tuple({"layers": 16 + 4 * (seed % 5), "kv_heads": 2 ** (seed % 3 + 1)}
                   for seed in range(15)),
)

VARIANTS_Q2 = Choice(
    id="variants_q2",
    choices={"a": "key 0 only", "b": "keys 0 to 3", "c": "all 5 keys", "d": "keys 3 and 4"},
    key="2eb94f1b8be021f453a8a55a",
    explain={
        "a": "that is the top-left alignment of is_causal=True, right without a cache; "
             "here query 0 is token 3 of the sequence",
        "b": "it is token 3 of the sequence: the 3 cached keys and itself (the bottom-right "
             "alignment)",
        "c": "key 4 is the second new token, in the first one's future",
        "d": "the cached keys 0 to 2 are its past, which it may see; key 4 is its future",
    },
)

HEADS_Q1 = Choice(
    id="heads_q1",
    choices={"a": "head h's output, and nothing else", "b": "head h's attention weights",
             "c": "every head of that layer", "d": "the queries of head h"},
    key="35a33524523caa1c3352e14b",
    explain={
        "a": "a head reaches the residual stream only through its slice of W^O, the columns "
             "that read its output: zero them and its contribution is 0, the rest untouched",
        "b": "the head still computes its weights; only what it writes is lost",
        "c": "each head owns its own columns of W^O; the others' columns are untouched",
        "d": "the queries come from W_q, which is untouched; the head still attends",
    },
)

HEADS_Q2 = Choice(
    id="heads_q2",
    choices={"a": "the key just before it (t - 1)", "b": "the first token of the sequence",
             "c": "the key just after the previous occurrence of token t",
             "d": "the previous occurrence of token t itself"},
    key="8bf95a905a2a4ce5d990ba1f",
    explain={
        "a": "that is a previous-token head, the induction head's partner in the layer below",
        "b": "some heads park their weight on the first token when they have nothing to do; "
             "an induction head has something to do on a repeat",
        "c": "it looks for an earlier key whose previous token was the current token (written "
             "there by the previous-token head) and copies the token after it: A B ... A -> B",
        "d": "copying that key would predict the current token again; the prediction is the "
             "token that followed it",
    },
)

CAPSTONE_Q1 = Choice(
    id="capstone_q1",
    choices={"a": "the stream is never normalised: each block's input reaches its output unchanged",
             "b": "it normalises the stream twice as often",
             "c": "the norm makes the attention weights sum to 1",
             "d": "it needs no residual connection"},
    key="bec97c03e9cdc6965e2dbec5",
    explain={
        "a": "the residual additions form an identity path from the first block to the last, so "
             "the gradient reaches every block whatever the sublayers do (Xiong et al., 2020); "
             "post-norm puts a norm on that path in every block",
        "b": "both normalise twice per block, once per sublayer; what differs is where the norm "
             "sits: on the sublayer's input, or on the stream itself",
        "c": "the softmax makes the weights sum to 1 in either arrangement; the norm rescales "
             "the features of the stream",
        "d": "pre-norm keeps the residual connection and relies on it: x + attn(norm(x))",
    },
)

CAPSTONE_Q2 = Choice(
    id="capstone_q2",
    choices={"a": "the same: the 2 heads are repeated to 8 before caching", "b": "a quarter",
             "c": "half", "d": "an eighth"},
    key="c057cec35bb307ea0303f565",
    explain={
        "a": "repeat_kv comes after the cache: repeating the heads before storing them would "
             "throw GQA's saving away",
        "b": "the cache holds 2 key heads and 2 value heads instead of 8 of each: each group of "
             "4 query heads shares one key head and one value head",
        "c": "half would be 4 key/value heads; here 8 / 2 = 4 query heads share each of the 2",
        "d": "an eighth is the cache of multi-query attention (num_kv_heads=1), one key/value "
             "head for all 8 query heads",
    },
)

QUESTIONS = (MASKING_Q1, MASKING_Q2, POSITION_Q1, POSITION_Q2, EFFICIENT_Q1, EFFICIENT_Q2,
             VARIANTS_Q1, VARIANTS_Q2, HEADS_Q1, HEADS_Q2, CAPSTONE_Q1, CAPSTONE_Q2)
