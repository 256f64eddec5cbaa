"""The capstone: the decoder's blocks, its cache, its ablation switches, the corpus, the checks."""

from __future__ import annotations

import math

import pytest
import torch

import answers_capstone as answers
from qkv import capstone
from qkv.checks import capstone as checks
from qkv.checks.mistakes.capstone import attention_variant
from qkv.checks import check_ablation, check_attention_forward, check_block_forward
from qkv.text_data import CharTokenizer, load_corpus, stdlib_docstrings
from qkv.transformer import Block, CausalSelfAttention, DecoderLM

V = 96


@pytest.fixture(autouse=True)
def one_thread():
    """Every test here as the chapter runs: one thread (the tensors are tiny, and a busy
    machine's other thread only slows them down)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


def _model(**options):
    torch.manual_seed(0)
    return DecoderLM(V, **{**capstone.BASELINE, **options}).eval()


def test_block_keeps_the_stream_shape_and_its_parts_have_theirs():
    block = Block(16, 4, 2).eval()
    x = torch.randn(3, 7, 16)
    out, (k, v) = block(x)
    assert out.shape == x.shape
    assert k.shape == v.shape == (3, 2, 7, 4)  # Hkv = 2 heads of width 16 / 4
    assert block.attn.k_proj.weight.shape == (8, 16)  # GQA: half the key projection of MHA


def test_block_is_pre_norm_with_residuals():
    """With the attention and MLP outputs zeroed, the block is the identity (residuals,
    nothing normalises the stream itself)."""
    block = Block(16, 4, 2).eval()
    with torch.no_grad():
        block.attn.out_proj.weight.zero_()
        block.mlp.down.weight.zero_()
    x = 5 * torch.randn(2, 6, 16)
    torch.testing.assert_close(block(x)[0], x)


@pytest.mark.parametrize("options", [{}, {"window": 3}, {"position": "none"}])
def test_logits_ignore_the_future(options):
    model = _model(**options)
    x = torch.randint(0, V, (2, 12))
    y = x.clone()
    y[:, 8:] = (y[:, 8:] + 1) % V
    with torch.no_grad():
        a, b = model(x), model(y)
    torch.testing.assert_close(a[:, :8], b[:, :8])
    assert (a[:, 8:] - b[:, 8:]).abs().max() > 1e-4


@pytest.mark.parametrize("options", [{}, {"window": 4}, {"num_kv_heads": 1}, {"scale": False}])
def test_the_cache_gives_the_logits_of_the_whole_sequence(options):
    model = _model(**options)
    x = torch.randint(0, V, (2, 11))
    with torch.no_grad():
        full = model(x)
        caches: list = []
        parts = [model(x[:, a:b], caches) for a, b in ((0, 5), (5, 6), (6, 9), (9, 11))]
    torch.testing.assert_close(torch.cat(parts, 1), full, rtol=1e-4, atol=1e-5)
    assert caches[0][0].shape[-2] == 11


def test_generate_with_and_without_the_cache_draws_the_same_tokens():
    model = _model()
    prompt = torch.randint(0, V, (2, 4))
    a = model.generate(prompt, 12, generator=torch.Generator().manual_seed(3))
    b = model.generate(prompt, 12, generator=torch.Generator().manual_seed(3), use_cache=False)
    assert a.shape == (2, 16) and torch.equal(a, b) and torch.equal(a[:, :4], prompt)
    greedy = model.generate(prompt, 5, temperature=0)
    assert torch.equal(greedy, model.generate(prompt, 5, temperature=0, use_cache=False))


def test_ablation_switches_do_what_they_say():
    x = torch.randn(1, 10, 16)
    torch.manual_seed(0)
    rope = CausalSelfAttention(16, 4, 2)
    plain = CausalSelfAttention(16, 4, 2, position="none")
    plain.load_state_dict(rope.state_dict())
    # without positions, attention is permutation-equivariant among the visible keys: the
    # last query's output does not change when earlier positions are shuffled
    perm = torch.cat([torch.randperm(9), torch.tensor([9])])
    last = lambda m, t: m(t)[0][:, -1]  # noqa: E731
    torch.testing.assert_close(last(plain, x), last(plain, x[:, perm]))
    assert (last(rope, x) - last(rope, x[:, perm])).abs().max() > 1e-4
    # scale=False multiplies the scores by sqrt(E): the same as queries sqrt(E) times larger
    unscaled = CausalSelfAttention(16, 4, 2, scale=False)
    unscaled.load_state_dict(rope.state_dict())
    with torch.no_grad():
        rope.q_proj.weight.mul_(2.0)  # E = 4: sqrt(E) = 2
    torch.testing.assert_close(unscaled(x)[0], rope(x)[0])
    # a window of w: position t ignores positions before t - w + 1
    windowed = CausalSelfAttention(16, 4, 2, window=3)
    y = x.clone()
    y[:, :5] = torch.randn(1, 5, 16)
    torch.testing.assert_close(windowed(x)[0][:, 7:], windowed(y)[0][:, 7:])
    assert (windowed(x)[0][:, 6] - windowed(y)[0][:, 6]).abs().max() > 1e-4
    # MHA: as many key/value heads as query heads
    assert DecoderLM(V, num_heads=4, num_kv_heads=None).blocks[0].attn.num_kv_heads == 4


def test_bad_settings_are_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="num_kv_heads=3 must divide num_heads"):
        CausalSelfAttention(16, 4, 3)
    with pytest.raises(ValueError, match="position must be"):
        CausalSelfAttention(16, 4, position="learned")
    with pytest.raises(ValueError, match="settings DecoderLM's baseline does not have"):
        capstone.ablation_loss({"depth": 3}, 1, steps=1)


def test_corpus_is_deterministic_real_text_split_by_module(corpus):
    again = load_corpus()
    assert torch.equal(corpus.train, again.train) and torch.equal(corpus.valid, again.valid)
    assert len(corpus.train) > 200_000 and len(corpus.valid) > 20_000
    assert not set(corpus.train_modules) & set(corpus.valid_modules)
    text = corpus.tokenizer.decode(corpus.train[:5000])
    words = text.split()
    assert sum(w.lower() in {"the", "a", "of", "to", "is"} for w in words) > 0.05 * len(words)
    docs = dict(stdlib_docstrings(("json",)))
    assert "JSON" in docs["json"]


def test_the_set_up_cells_warning_hook_leaves_the_corpus_as_it_was(corpus):
    # Every exercise's set-up cell calls warnings_to_stdout, which replaces
    # warnings.showwarning; `qkv grade` measures the reference's ablation loss outside that
    # kernel. A hook that changed the text (it dropped showwarning's docstring) made every
    # student's loss differ from the grader's by 1e-3: each right ablation scored 0.
    import warnings

    from qkv.checks import warnings_to_stdout
    before = warnings.showwarning
    try:
        warnings_to_stdout()
        assert warnings.showwarning is not before
        again = load_corpus()
    finally:
        warnings.showwarning = before
    assert torch.equal(corpus.train, again.train) and torch.equal(corpus.valid, again.valid)


def test_tokenizer_round_trips_and_refuses_what_it_cannot_encode():
    tok = CharTokenizer()
    assert tok.vocab_size == V and tok.decode(tok.encode("def f(x):\n    return x")) == "def f(x):\n    return x"
    with pytest.raises(ValueError, match="outside the alphabet"):
        tok.encode("café")


def test_a_short_ablation_is_the_start_of_the_long_run(corpus):
    """The chapter reads the baseline at step n from its long run: the same run up to there."""
    small = corpus._replace(train=corpus.train[:20_000], valid=corpus.valid[:4_000])
    torch.manual_seed(0)
    model = DecoderLM(V, **capstone.BASELINE)
    log = capstone.train_lm(model, small, 6, seed=0, eval_every=3, progress=False)
    short = capstone.ablation_loss({}, 0, steps=3, split=small, progress=False)
    assert log.step.tolist() == [0, 3, 6]
    assert abs(short - log.valid_loss[1].item()) < 1e-5
    assert log.valid_loss[0] == pytest.approx(math.log(V), abs=0.1)


def test_the_functional_forms_are_the_modules():
    torch.manual_seed(0)
    block = Block(16, 4, 2).eval()
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(capstone.block_forward(x, block.state_dict(), 4, 2), block(x)[0])
    params = {n[5:]: t for n, t in block.state_dict().items() if n.startswith("attn.")}
    kc, vc = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 3, 4)
    want = block.attn(x, (kc, vc))
    got = capstone.attention_forward(x, params, 4, 2, kc, vc)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(attention_variant(x, params, 4, 2, kc, vc)[0], want[0])


# ----------------------------------------------------------------------------- the checks
def test_the_checks_pass_a_right_answer():
    check_attention_forward(answers.make_attention())
    check_block_forward(answers.make_block())


@pytest.mark.parametrize("mistake", checks.ATTENTION_FORWARD.mistakes, ids=lambda m: m.name[:40])
def test_the_attention_check_names_each_mistake(mistake):
    with pytest.raises(AssertionError, match="known mistake") as info:
        check_attention_forward(answers.make_attention(**mistake.fn.keywords))
    assert mistake.name in str(info.value)


@pytest.mark.parametrize("mistake", checks.BLOCK_FORWARD.mistakes, ids=lambda m: m.name[:40])
def test_the_block_check_names_each_mistake(mistake):
    with pytest.raises(AssertionError, match="known mistake") as info:
        check_block_forward(answers.make_block(**mistake.fn.keywords))
    assert mistake.name in str(info.value)


def _ablation(options, loss=2.5, shape="pair"):
    """A student's ablation that reports ``loss`` without training (None: trains)."""
    def ablation(seed, steps=200):
        value = capstone.ablation_loss(options, seed, steps, progress=False) if loss is None else loss
        return (options, value) if shape == "pair" else value
    return ablation


def test_the_ablation_check_passes_a_measurement():
    check_ablation(_ablation({"window": 4}, loss=None))


@pytest.mark.parametrize("ablation, message", [
    (_ablation({}), "non-empty dict"),
    (_ablation({"window": None}), "change nothing"),
    (_ablation({"depth": 1}), "does not have"),
    (_ablation({"window": 4}, loss="2.5"), "a number"),
    (_ablation({"window": 4}, shape="loss"), "return \\(options, loss\\)"),
    (_ablation({"window": 4}, loss=2.5), "measures"),  # a number typed in
    (_ablation({"position": "none"}, loss=None), "the chapter's own ablation"),
    (_ablation({"window": 8, "scale": True}, loss=None), "the chapter's own ablation"),
], ids=["empty", "no change", "unknown", "string", "loss only", "typed", "chapter's",
        "chapter's, with a baseline value"])
def test_the_ablation_check_refuses_what_is_no_measurement(ablation, message):
    with pytest.raises(AssertionError, match=message):
        check_ablation(ablation)


def test_the_ablation_check_refuses_a_run_with_other_steps():
    def ablation(seed, steps=200):
        return {"window": 4}, capstone.ablation_loss({"window": 4}, seed, steps + 3, progress=False)
    with pytest.raises(AssertionError, match="for the seed and steps you are given"):
        check_ablation(ablation)


def test_a_right_block_gets_no_notice_for_the_pieces_it_may_use(capsys):
    """The block's answer calls the student's attention_forward, which uses the pieces of
    earlier assignments: no notice about them."""
    check_block_forward(answers.make_block())
    check_attention_forward(answers.make_attention())
    assert "note:" not in capsys.readouterr().out


def test_the_ablation_check_refuses_a_run_from_another_seed():
    """Another seed's loss lands a few 1e-3 away, within the 0.01 the check once allowed."""
    def ablation(seed, steps=200):
        return {"window": 4}, capstone.ablation_loss({"window": 4}, 7, steps, progress=False)
    with pytest.raises(AssertionError, match="for the seed and steps you are given"):
        check_ablation(ablation)
