"""The attack corpus: ways of earning a check's points without writing the function.

Each :class:`Attack` is a piece of student code, the answer cell of a notebook: it defines
the exercise's function (or class) and may do anything else a cell can. The test cell is
the one nbgrader restores: ``from qkv.checks import check_<name>``, the visible call, the
hidden call with fresh inputs. Every attack must make that test cell fail (zero points).

``notebook=True`` attacks change the kernel itself (the checks, torch, ``sys.modules``):
they run in a fresh interpreter, set-up cell first, as nbgrader runs a notebook. The
others run in the test process. ``works=True`` marks answers that compute the right result
when no check is running (a delegation): the corpus also checks that they do, so that each
one shows a guard at work rather than a wrong answer.

Kinds (the issue's): helpers, torch entry points, nested calls, subclass, frames, seeds,
files, rebinding, internals, fresh copy, patching, measure; and found later: questions
(answers to check_question built to agree), threads (a thread of the notebook's beside the
check), dispatcher (torch.library kernels for torch's own operators), after the guard
(code of the notebook's that Python, torch or the harness run inside a check once the guard is
off: a warning's message formatted, a signal handler, a global nn.Module hook), kernel (the
kernel's error path changed, so that a failing test cell shows no error; these run through a
real Jupyter kernel in a slow test, and do nothing in the plain runner).
"""

from __future__ import annotations

from dataclasses import dataclass
from textwrap import dedent
from typing import List


@dataclass(frozen=True)
class Attack:
    name: str
    kind: str
    exercise: str  # the function (or class) the answer cell defines and the check is named after
    answer: str
    notebook: bool = False
    works: bool = False
    test: str = ""  # the test cell, when it is not the exercise's check (check_question)

    @property
    def code(self) -> str:
        return dedent(self.answer).strip() + "\n"

    def test_cell(self) -> str:
        if self.test:
            return self.test
        f = self.exercise
        return (f"from qkv.checks import check_{f}\n\ncheck_{f}({f})\n"
                f"check_{f}({f}, seed=None)\n")


def _a(name, kind, exercise, answer, **kw) -> Attack:
    return Attack(name, kind, exercise, answer, **kw)


SDPA_SIG = "query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None"
CHUNK_SIG = "query, key, value, attn_mask=None, is_causal=False, scale=None, chunk_size=256"

# The test cell of a conceptual question.
_Q = 'from qkv.checks import check_question\n\ncheck_question("{0}", {0})\n'

# A wrong softmax (no maximum subtracted... and not normalised): what tampering tries to pass.
WRONG_SOFTMAX = """
import torch
def softmax(x, dim=-1):
    return x.exp()
"""

ATTACKS: List[Attack] = [
    # ------------------------------------------------------------ the course's own helpers
    _a("qkv.softmax under another name", "helpers", "softmax", """
        from qkv import softmax as reference
        def softmax(x, dim=-1):
            return reference(x, dim)
        """, works=True),
    _a("qkv.soft_lookup used as a softmax", "helpers", "softmax", """
        import torch, qkv
        def softmax(x, dim=-1):
            xt = x.movedim(dim, -1)
            eye = torch.eye(xt.shape[-1], dtype=x.dtype, device=x.device)
            return qkv.soft_lookup(xt.unsqueeze(-2), eye, eye)[1].squeeze(-2).movedim(-1, dim)
        """, works=True),
    _a("qkv.chunked_attention used as a softmax", "helpers", "softmax", """
        import torch, qkv
        def softmax(x, dim=-1):
            xt = x.movedim(dim, -1)
            eye = torch.eye(xt.shape[-1], dtype=x.dtype, device=x.device)
            out = qkv.chunked_attention(xt.unsqueeze(-2), eye, eye, scale=1.0)
            return out.squeeze(-2).movedim(-1, dim)
        """, works=True),
    _a("the checks' softmax_variant (right with its default switches)", "helpers", "softmax", """
        from qkv.checks._lookup_mistakes import softmax_variant
        def softmax(x, dim=-1):
            return softmax_variant(x, dim)
        """, works=True),
    _a("a mistake's partial, unwrapped to its right default", "helpers", "softmax", """
        from qkv.checks.lookup import SOFTMAX
        def softmax(x, dim=-1):
            return SOFTMAX.mistakes[0].fn.func(x, dim)
        """, works=True),
    _a("the exercise's reference, through the check module", "helpers",
       "scaled_dot_product_attention", f"""
        from qkv.checks.scaling import SCALED_DOT_PRODUCT_ATTENTION as EX
        def scaled_dot_product_attention({SDPA_SIG}):
            return EX.reference(query, key, value, attn_mask, dropout_p, is_causal, scale)
        """, works=True),
    _a("the checks' attend (every mistake switch off)", "helpers",
       "scaled_dot_product_attention", f"""
        from qkv.checks._attention import attend
        def scaled_dot_product_attention({SDPA_SIG}):
            return attend(query, key, value, attn_mask, dropout_p, is_causal, scale)
        """, works=True),
    _a("the checks' online softmax", "helpers", "chunked_attention", f"""
        from qkv.checks._efficient_mistakes import online_variant
        def chunked_attention({CHUNK_SIG}):
            return online_variant(query, key, value, attn_mask, is_causal, scale, chunk_size)
        """, works=True),
    _a("the checks' kv step", "helpers", "kv_cache_step", """
        from qkv.checks._efficient_mistakes import kv_step_variant
        def kv_cache_step(query, key, value, k_cache=None, v_cache=None, scale=None):
            return kv_step_variant(query, key, value, k_cache, v_cache, scale)
        """, works=True),
    _a("the checks' causal variant", "helpers", "causal_mask", """
        from qkv.checks.masking import _causal_variant
        def causal_mask(L, S=None, device=None):
            return _causal_variant(L, S, device)
        """, works=True),
    _a("qkv.grouped_query_attention under another name", "helpers", "grouped_query_attention", """
        import qkv
        gqa = qkv.grouped_query_attention
        def grouped_query_attention(query, key, value, is_causal=False, scale=None):
            return gqa(query, key, value, is_causal=is_causal, scale=scale)
        """, works=True),
    _a("the checks' grouped-query variant", "helpers", "grouped_query_attention", """
        from qkv.checks._variants_mistakes import gqa_variant
        def grouped_query_attention(query, key, value, is_causal=False, scale=None):
            return gqa_variant(query, key, value, is_causal, scale)
        """, works=True),
    _a("qkv.repeat_kv", "helpers", "repeat_kv", """
        import qkv
        def repeat_kv(x, n_rep):
            return qkv.repeat_kv(x, n_rep)
        """, works=True),
    _a("the checks' bottom-right variant", "helpers", "causal_mask_bottom_right", """
        from qkv.checks._variants_mistakes import bottom_right_variant
        def causal_mask_bottom_right(L, S=None, device=None):
            return bottom_right_variant(L, S, device)
        """, works=True),
    _a("the checks' padding variant", "helpers", "padding_mask", """
        from qkv.checks.masking import _padding_variant
        def padding_mask(lengths, S=None):
            return _padding_variant(lengths, S)
        """, works=True),
    _a("the checks' split variant", "helpers", "split_heads", """
        from qkv.checks._multi_head_mistakes import split_variant
        def split_heads(x, num_heads):
            return split_variant(x, num_heads)
        """, works=True),
    _a("the checks' merge variant", "helpers", "merge_heads", """
        import qkv.checks._multi_head_mistakes as m
        def merge_heads(x):
            return m.merge_variant(x)
        """, works=True),
    _a("the checks' self-attention variant", "helpers", "self_attention", """
        from qkv.checks.qkv import _self
        def self_attention(x, W_q, W_k, W_v):
            return _self(x, W_q, W_k, W_v)
        """, works=True),
    _a("the checks' cross-attention variant", "helpers", "cross_attention", """
        from qkv.checks.qkv import _cross
        def cross_attention(x, context, W_q, W_k, W_v):
            return _cross(x, context, W_q, W_k, W_v)
        """, works=True),
    _a("the checks' bahdanau variant", "helpers", "bahdanau_attention", """
        from qkv.checks.bottleneck import bahdanau_variant
        def bahdanau_attention(query, keys, W_q, W_k, v_a):
            return bahdanau_variant(query, keys, W_q, W_k, v_a)
        """, works=True),
    _a("qkv.attention_scores as the Luong dot score", "helpers", "luong_score", """
        import qkv
        def luong_score(query, key, W=None):
            return qkv.attention_scores(query if W is None else query @ W, key, scale=1.0)
        """, works=True),
    _a("qkv.AdditiveAttention's score", "helpers", "additive_score", """
        import qkv
        def additive_score(query, key, W_q, W_k, v_a):
            return qkv.additive_score(query, key, W_q, W_k, v_a)
        """, works=True),
    _a("the softmax helper's code with forged globals calls the reference for the answer",
       "helpers", "scaled_dot_product_attention", """
        import functools, types, torch, qkv
        FORGED = types.FunctionType(qkv.softmax.__code__, {
            "v": types.SimpleNamespace(require_float_tensor=print, require_dim_index=print),
            "torch": types.SimpleNamespace(float16=torch.float64, bfloat16=None)})
        def softmax(x, dim=-1): ...
        def scaled_dot_product_attention(query, key, value, scale=None):
            # The reference as x.float (a partial: no frame of the answer's between), on V with a
            # zero column: the forged softmax's output gives the answer back as a log-ratio.
            v0 = torch.cat([value.double(), value[..., :1].double() * 0], -1)
            call = functools.partial(qkv.scaled_dot_product_attention, query.double(),
                                     key.double(), v0, scale=scale)
            p = FORGED(types.SimpleNamespace(dtype=torch.float64, float=call, dim=int), -1)
            return (p[..., :-1].log() - p[..., -1:].log()).to(query.dtype)
        """, test="from qkv.checks import check_scaled_dot_product_attention as c\n\n"
                  "c(scaled_dot_product_attention, masks=False)\n"
                  "c(scaled_dot_product_attention, seed=None, masks=False)\n", works=False),
    _a("a subclass of qkv.MultiHeadAttention", "helpers", "MultiHeadAttention", """
        import qkv
        class MultiHeadAttention(qkv.MultiHeadAttention):
            pass
        """, works=True),
    _a("qkv.dot_product_variance", "helpers", "dot_product_variance", """
        import qkv
        def dot_product_variance(d_k, n_samples, generator):
            return qkv.dot_product_variance(d_k, n_samples, generator)
        """, works=True),
    # ------------------------------------------------------------ torch entry points
    _a("torch.ops.aten._softmax", "torch entry points", "softmax", """
        import torch
        def softmax(x, dim=-1):
            return torch.ops.aten._softmax(x, dim, False)
        """, works=True),
    _a("torch.ops.aten.softmax.int", "torch entry points", "softmax", """
        import torch
        def softmax(x, dim=-1):
            return torch.ops.aten.softmax.int(x, dim)
        """, works=True),
    _a("torch._safe_softmax", "torch entry points", "softmax", """
        import torch
        def softmax(x, dim=-1):
            return torch._safe_softmax(x, dim)
        """, works=True),
    _a("torch._refs.softmax (Python, no torch function)", "torch entry points", "softmax", """
        import torch._refs
        def softmax(x, dim=-1):
            return torch._refs.softmax(x, dim)
        """, works=True),
    _a("torch's decomposition table", "torch entry points", "softmax", """
        import torch, torch._decomp
        def softmax(x, dim=-1):
            return torch._decomp.decomposition_table[torch.ops.aten._softmax.default](x, dim, False)
        """, works=True),
    _a("torch.ops.aten._scaled_dot_product_attention_math", "torch entry points",
       "scaled_dot_product_attention", f"""
        import torch
        def scaled_dot_product_attention({SDPA_SIG}):
            if attn_mask is not None and attn_mask.dtype == torch.bool:
                attn_mask = torch.zeros(attn_mask.shape, dtype=query.dtype).masked_fill(
                    ~attn_mask, float("-inf"))
            return torch.ops.aten._scaled_dot_product_attention_math(
                query, key, value, attn_mask, 0.0, is_causal, scale=scale)[0]
        """, works=True),
    _a("torch._C._nn.scaled_dot_product_attention", "torch entry points", "kv_cache_step", """
        import torch
        def kv_cache_step(query, key, value, k_cache=None, v_cache=None, scale=None):
            if k_cache is not None:
                key, value = torch.cat([k_cache, key], -2), torch.cat([v_cache, value], -2)
            L, S = query.shape[-2], key.shape[-2]
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L)
            out = torch._C._nn.scaled_dot_product_attention(query, key, value, allowed, scale=scale)
            return out, key, value
        """, works=True),
    _a("torch's causal bias (torch.nn.attention.bias)", "torch entry points", "causal_mask", """
        import torch
        from torch.nn.attention.bias import causal_upper_left
        def causal_mask(L, S=None, device=None):
            S = L if S is None else S
            return causal_upper_left(L, S)._materialize(device=device or torch.device("cpu"))
        """, works=True),
    _a("SDPA with enable_gqa=True", "torch entry points", "grouped_query_attention", """
        import torch.nn.functional as F
        def grouped_query_attention(query, key, value, is_causal=False, scale=None):
            return F.scaled_dot_product_attention(query, key, value, is_causal=is_causal,
                                                  scale=scale, enable_gqa=True)
        """, works=True),
    _a("FlexAttention with enable_gqa=True", "torch entry points", "grouped_query_attention", """
        import warnings
        import torch
        from torch.nn.attention.flex_attention import flex_attention
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        def grouped_query_attention(query, key, value, is_causal=False, scale=None):
            mod = (lambda s, b, h, i, j: torch.where(i >= j, s, float("-inf"))) if is_causal else None
            out = flex_attention(query.float(), key.float(), value.float(), score_mod=mod,
                                 scale=scale, enable_gqa=True)
            return out.to(query.dtype)
        """, works=True),
    _a("torch's lower-right causal bias (torch.nn.attention.bias)", "torch entry points",
       "causal_mask_bottom_right", """
        import torch
        from torch.nn.attention.bias import causal_lower_right
        def causal_mask_bottom_right(L, S=None, device=None):
            S = L if S is None else S
            return causal_lower_right(L, S)._materialize(device=device or torch.device("cpu"))
        """, works=True),
    _a("softmax through torch.distributions", "torch entry points", "softmax", """
        import torch
        def softmax(x, dim=-1):
            return torch.distributions.Categorical(logits=x.movedim(dim, -1)).probs.movedim(-1, dim)
        """),
    _a("softmax under DisableTorchFunction", "torch entry points", "softmax", """
        import torch
        def softmax(x, dim=-1):
            with torch._C.DisableTorchFunction():
                return torch.softmax(x, dim)
        """, works=True),
    _a("softmax with torch's modes taken off", "torch entry points", "softmax", """
        import torch
        from torch.utils._python_dispatch import _disable_current_modes
        def softmax(x, dim=-1):
            with _disable_current_modes():
                return torch.softmax(x, dim)
        """, works=True),
    _a("a TorchScript function compiled in the answer cell", "torch entry points",
       "scaled_dot_product_attention", f"""
        import linecache, torch
        from typing import Optional
        SRC = (
            "def math_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,\\n"
            "              m: Optional[torch.Tensor], c: bool, s: Optional[float]) -> torch.Tensor:\\n"
            "    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v, m, 0.0, c,"
            " scale=s)[0]\\n")
        linecache.cache["<scripted>"] = (len(SRC), None, SRC.splitlines(True), "<scripted>")
        ns = {{"torch": torch, "Optional": Optional, "__name__": "scripted"}}
        exec(compile(SRC, "<scripted>", "exec"), ns)
        scripted = torch.jit.script(ns["math_sdpa"])
        def scaled_dot_product_attention({SDPA_SIG}):
            if attn_mask is not None and attn_mask.dtype == torch.bool:
                attn_mask = torch.zeros(attn_mask.shape, dtype=query.dtype).masked_fill(
                    ~attn_mask, float("-inf"))
            return scripted(query, key, value, attn_mask, is_causal, scale)
        """, works=True),
    _a("scipy's softmax on numpy", "torch entry points", "softmax", """
        import torch, scipy.special
        def softmax(x, dim=-1):
            out = scipy.special.softmax(x.detach().cpu().numpy(), axis=dim)
            return torch.as_tensor(out, dtype=x.dtype, device=x.device)
        """, works=True),
    # ------------------------------------------------------------ nested calls
    _a("torch's SDPA through torch.vmap", "nested calls", "self_attention", """
        import torch
        import torch.nn.functional as F
        def self_attention(x, W_q, W_k, W_v):
            q, k, v = x @ W_q.T, x @ W_k.T, x @ W_v.T
            flat = lambda t: t.reshape(-1, *t.shape[-2:])
            out = torch.vmap(F.scaled_dot_product_attention)(flat(q), flat(k), flat(v))
            return out.reshape(*x.shape[:-1], v.shape[-1])
        """, works=True),
    _a("F.multi_head_attention_forward inside kv_cache_step", "nested calls", "kv_cache_step", """
        import torch
        import torch.nn.functional as F
        def kv_cache_step(query, key, value, k_cache=None, v_cache=None, scale=None):
            if k_cache is not None:
                key, value = torch.cat([k_cache, key], -2), torch.cat([v_cache, value], -2)
            B, H, L, E = query.shape
            S, Ev = key.shape[-2], value.shape[-1]
            q, k, v = (t.reshape(B * H, -1, t.shape[-1]).transpose(0, 1)
                       for t in (query, key, value))
            eye = torch.eye(E, dtype=query.dtype)
            forbidden = ~torch.ones(L, S, dtype=torch.bool).tril(S - L)
            out, _ = F.multi_head_attention_forward(
                q, k, v, E, 1, None, None, None, None, False, 0.0, torch.eye(E, dtype=q.dtype),
                torch.zeros(E, dtype=q.dtype), attn_mask=forbidden, use_separate_proj_weight=True,
                q_proj_weight=eye, k_proj_weight=eye, v_proj_weight=torch.eye(Ev, dtype=q.dtype),
                need_weights=False)
            return out.transpose(0, 1).reshape(B, H, L, -1), key, value
        """),
    _a("nn.MultiheadAttention inside a MultiHeadAttention", "nested calls",
       "MultiHeadAttention", """
        import torch
        from torch import nn
        class MultiHeadAttention(nn.Module):
            def __init__(self, embed_dim, num_heads, bias=True, kdim=None, vdim=None,
                         dropout=0.0, device=None, dtype=None):
                super().__init__()
                f = dict(device=device, dtype=dtype)
                self.num_heads = num_heads
                self.q_proj = nn.Linear(embed_dim, embed_dim, **f)
                self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, **f)
                self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, **f)
                self.out_proj = nn.Linear(embed_dim, embed_dim, **f)
                self.inner = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True, **f)
            def forward(self, query, key=None, value=None, key_mask=None,
                        need_weights=False, mask=None, average_attn_weights=True,
                        is_causal=False):
                return self.inner(query, query if key is None else key,
                                  query if value is None else value, need_weights=False)
        """),
    _a("a thread computing the softmax", "nested calls", "softmax", """
        import threading, torch
        def softmax(x, dim=-1):
            out = {}
            t = threading.Thread(target=lambda: out.setdefault("y", torch.softmax(x, dim)))
            t.start(); t.join()
            return out["y"]
        """, works=True),
    # ------------------------------------------------------------ comparisons fooled
    _a("a Tensor subclass whose comparisons always agree", "subclass", "softmax", """
        import torch
        class Agree(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                if getattr(func, "__name__", "") in ("allclose", "equal", "eq", "__eq__"):
                    return True
                return super().__torch_function__(func, types, args, kwargs or {})
        def softmax(x, dim=-1):
            return torch.zeros_like(x).as_subclass(Agree)
        """),
    _a("a Tensor subclass with lying methods", "subclass", "split_heads", """
        import torch
        class Liar(torch.Tensor):
            def allclose(self, *a, **k): return True
            def equal(self, *a, **k): return True
            def __eq__(self, other): return torch.ones_like(other, dtype=torch.bool)
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return torch.zeros(B, num_heads, L, D // num_heads, dtype=x.dtype).as_subclass(Liar)
        """),
    _a("a float subclass for the variance", "subclass", "dot_product_variance", """
        class Anything(float):
            def __sub__(self, other): return 0.0
            def __rsub__(self, other): return 0.0
            def __ne__(self, other): return True
        def dot_product_variance(d_k, n_samples, generator):
            return Anything(d_k)
        """),
    # ------------------------------------------------------------ the expected result reachable
    _a("searching the callers' frames for the expected result", "frames", "softmax", """
        import sys, torch
        def softmax(x, dim=-1):
            f = sys._getframe(1)
            while f is not None:
                for name in ("expected", "out", "want"):
                    v = f.f_locals.get(name)
                    if isinstance(v, torch.Tensor) and v.shape == x.shape:
                        return v.clone()
                f = f.f_back
            return x
        """),
    _a("a traceback's frames (no call to sys._getframe)", "frames", "softmax", """
        import torch
        def softmax(x, dim=-1):
            try:
                raise RuntimeError
            except RuntimeError as e:
                f = e.__traceback__.tb_frame.f_back
            while f is not None:
                for v in f.f_locals.values():
                    if isinstance(v, torch.Tensor) and v.shape == x.shape and v is not x:
                        return v.clone()
                f = f.f_back
            return x
        """),
    _a("a frame from logging.currentframe: the harness's tolerances made infinite", "frames",
       "softmax", """
        import logging, torch
        def loosen(planned):
            for i, p in enumerate(planned):
                case = object.__new__(type(p.case))
                vars(case).update(vars(p.case), rtol=1e30, atol=1e30)
                q = object.__new__(type(p))
                vars(q).update(vars(p), case=case)
                planned[i] = q
        def softmax(x, dim=-1):
            f = logging.currentframe().f_back  # a library's sys._getframe, handed back
            while f is not None:
                if "planned" in f.f_locals:
                    loosen(f.f_locals["planned"])
                f = f.f_back
            return torch.zeros_like(x)
        """),
    _a("a frame handed back through a library wrapper (a Mock's side effect)", "frames",
       "scaled_dot_product_attention", f"""
        import logging, torch, unittest.mock
        def scaled_dot_product_attention({SDPA_SIG}):
            f = unittest.mock.Mock(side_effect=logging.currentframe)()
            while f is not None:
                for i, p in enumerate(f.f_locals.get("planned", [])):
                    case = object.__new__(type(p.case))
                    vars(case).update(vars(p.case), rtol=1e30, atol=1e30)
                    q = object.__new__(type(p))
                    vars(q).update(vars(p), case=case)
                    f.f_locals["planned"][i] = q
                f = f.f_back
            return torch.zeros_like(query[..., :1]).expand(*query.shape[:-1], value.shape[-1])
        """),
    _a("the garbage collector's tensors", "frames", "softmax", """
        import gc, torch
        def softmax(x, dim=-1):
            for o in gc.get_objects():
                if isinstance(o, torch.Tensor) and o.shape == x.shape and o is not x:
                    return o.clone()
            return x
        """),
    _a("the inputs rebuilt and the reference called after the check module's case", "frames",
       "softmax", """
        import torch
        from qkv.checks.lookup import SOFTMAX
        def softmax(x, dim=-1):
            return SOFTMAX.reference(x, dim)
        """, works=True),
    _a("a table of answers over the fixed seeds", "seeds", "softmax", """
        import torch, qkv
        from qkv.checks.lookup import SOFTMAX
        from qkv.checks._run import plan
        TABLE = {}
        for seed in (0, 1, 2, 3, 2024):
            for p in plan(SOFTMAX, seed):
                (x,), kw = p.inputs()
                TABLE[(x.shape, x.dtype, tuple(x.flatten()[:3].tolist()))] = qkv.softmax(x, **kw)
        def softmax(x, dim=-1):
            return TABLE.get((x.shape, x.dtype, tuple(x.flatten()[:3].tolist())), x)
        """),
    _a("reading the solution notebook while the check runs", "files", "softmax", """
        import json, pathlib, torch, qkv
        ROOT = pathlib.Path(qkv.__file__).resolve().parents[2]
        def softmax(x, dim=-1):
            nb = json.loads((ROOT / "solutions" / "02-lookup" / "lookup.ipynb").read_text())
            src = next("".join(c["source"]) for c in nb["cells"]
                       if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "softmax")
            ns = {"torch": torch}
            exec(src, ns)
            return ns["softmax"](x, dim)
        """),
    _a("reading the reference's source while the check runs", "files", "softmax", """
        import inspect, torch, qkv
        def softmax(x, dim=-1):
            ns = {"torch": torch}
            exec(inspect.getsource(qkv.softmax), ns)
            return ns["softmax"](x, dim)
        """),
    # ------------------------------------------------------------ measuring the wrong thing
    _a("a full softmax row by row (no (L, S) tensor)", "measure", "chunked_attention", f"""
        import math, torch
        def chunked_attention({CHUNK_SIG}):
            L, S = query.shape[-2], key.shape[-2]
            c = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
            if is_causal:
                attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
            rows = []
            for i in range(L):
                s = (query[..., i:i + 1, :] * c) @ key.transpose(-2, -1)
                if attn_mask is not None:
                    m = attn_mask[..., i:i + 1, :] if attn_mask.dim() >= 2 else attn_mask
                    s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
                rows.append(torch.softmax(s, dim=-1) @ value)
            return torch.cat(rows, dim=-2)
        """, works=True),
    _a("row scores as Python numbers, softmax over a fresh tensor", "measure",
       "chunked_attention", f"""
        import math, torch
        def chunked_attention({CHUNK_SIG}):
            c = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
            q = query.reshape(-1, *query.shape[-2:])
            k = key.expand(*query.shape[:-2], *key.shape[-2:]).reshape(-1, *key.shape[-2:])
            v = value.expand(*query.shape[:-2], *value.shape[-2:]).reshape(-1, *value.shape[-2:])
            out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
            for b in range(q.shape[0]):
                for i in range(q.shape[1]):
                    s = torch.tensor([float((q[b, i] * k[b, j]).sum()) * c
                                      for j in range(k.shape[1])], dtype=q.dtype, device=q.device)
                    out[b, i] = torch.softmax(s, 0) @ v[b]
            return out.reshape(*query.shape[:-1], v.shape[-1])
        """),
    _a("the formula plus a little noise from the generator", "measure", "dot_product_variance", """
        import torch
        def dot_product_variance(d_k, n_samples, generator):
            noise = torch.randn(1, generator=generator, device=generator.device).item()
            return d_k + 0.01 * noise
        """),
    _a("the formula plus noise, with enough numbers drawn", "measure", "dot_product_variance", """
        import torch
        def dot_product_variance(d_k, n_samples, generator):
            q = torch.randn(n_samples, d_k, generator=generator, device=generator.device)
            k = torch.randn(n_samples, d_k, generator=generator, device=generator.device)
            return d_k * (1 + 0.001 * float(q[0, 0]))
        """),
    # ------------------------------------------------------------ the notebook's kernel
    _a("rebinding the check on the package", "rebinding", "softmax", WRONG_SOFTMAX + """
import qkv.checks
qkv.checks.check_softmax = lambda f, seed=0: None
""", notebook=True),
    _a("rebinding the check on its module", "rebinding", "softmax", WRONG_SOFTMAX + """
import qkv.checks.lookup as m
m.check_softmax = lambda f, seed=0: None
""", notebook=True),
    _a("writing the package's __dict__", "rebinding", "softmax", WRONG_SOFTMAX + """
import qkv.checks
qkv.checks.__dict__["check_softmax"] = lambda f, seed=0: None
""", notebook=True),
    _a("a fake qkv.checks in sys.modules", "rebinding", "softmax", WRONG_SOFTMAX + """
import sys, types
fake = types.ModuleType("qkv.checks")
fake.__path__ = []
fake.check_softmax = lambda f, seed=0: None
sys.modules["qkv.checks"] = fake
""", notebook=True),
    _a("replacing a check's code", "rebinding", "softmax", WRONG_SOFTMAX + """
import qkv.checks
try:
    qkv.checks.check_softmax.__code__ = (lambda softmax, seed=0: None).__code__
except Exception:
    pass
""", notebook=True),
    _a("replacing run_check in the module's namespace", "internals", "softmax", WRONG_SOFTMAX + """
import qkv.checks.lookup
vars(qkv.checks.lookup)["run_check"] = lambda *a, **k: None
""", notebook=True),
    _a("the harness's comparison through a function's __globals__", "internals", "softmax",
       WRONG_SOFTMAX + """
import qkv.checks._harness as h
h._judge_value.__globals__["close"] = lambda *a, **k: True
h._judge_value.__globals__["_judge_kind"] = lambda *a, **k: None
""", notebook=True),
    _a("the exercise's cases emptied", "internals", "softmax", WRONG_SOFTMAX + """
from qkv.checks.lookup import SOFTMAX
object.__setattr__(SOFTMAX, "cases", ())
""", notebook=True),
    _a("the exercise's reference replaced by the answer", "internals", "softmax",
       WRONG_SOFTMAX + """
from qkv.checks.lookup import SOFTMAX
object.__setattr__(SOFTMAX, "reference", softmax)
""", notebook=True),
    _a("a closure cell of the reference replaced", "internals", "soft_lookup", """
import torch
def soft_lookup(query, keys, values, temperature=1.0):
    w = (query @ keys.transpose(-2, -1)).exp()  # not normalised, no temperature
    return w @ values, w
from qkv.checks.lookup import SOFT_LOOKUP_WEIGHTS, SOFT_LOOKUP_OUTPUT
for ex in (SOFT_LOOKUP_WEIGHTS, SOFT_LOOKUP_OUTPUT):
    ex.reference.__closure__[0].cell_contents = soft_lookup
""", notebook=True),
    _a("the guard's method replaced on its class", "internals", "softmax", """
import torch
def softmax(x, dim=-1):
    return torch.softmax(x, dim)
from qkv.checks import _guard
type.__setattr__(_guard.Guard, "trip", lambda self, what: None)
_guard.Guard.start = lambda self: None
_guard.Guard.stop = lambda self: []
""", notebook=True),
    _a("the harness's module reloaded from an edited copy", "fresh copy", "softmax",
       WRONG_SOFTMAX + """
import sys, types, qkv.checks._harness as h
src = open(h.__file__).read().replace("    if compare(got, expected, run.rtol, run.atol):",
                                      "    if True:")
m = types.ModuleType("qkv.checks._harness")
m.__package__ = "qkv.checks"
try:
    exec(compile(src, h.__file__, "exec"), m.__dict__)
    sys.modules["qkv.checks._harness"] = m
    vars(sys.modules["qkv.checks.lookup"])["run_check"] = m.run_check
except Exception:
    pass
""", notebook=True),
    _a("importlib.reload of a check module", "fresh copy", "softmax", WRONG_SOFTMAX + """
import importlib, qkv.checks.lookup
try:
    importlib.reload(qkv.checks.lookup)
except Exception:
    pass
qkv.checks.lookup.__dict__["run_check"] = lambda *a, **k: None
""", notebook=True),
    _a("a fresh copy of qkv.scaling loaded from disk", "fresh copy", "softmax", """
import importlib.util, qkv
spec = importlib.util.spec_from_file_location("qkv.fresh_scaling", qkv.scaling.__file__)
fresh = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(fresh)
except Exception:
    fresh = qkv.scaling
def softmax(x, dim=-1):
    return fresh.softmax(x, dim)
""", notebook=True),
    _a("the reference's source executed under another file name", "fresh copy", "softmax", """
import qkv
src = open(qkv.scaling.__file__).read().replace("from . import", "from qkv import")
ns = {"__name__": "qkv.copied", "__package__": "qkv"}
try:
    exec(compile(src, "<copied>", "exec"), ns)
except Exception:
    ns["softmax"] = qkv.softmax
def softmax(x, dim=-1):
    return ns["softmax"](x, dim)
""", notebook=True),
    _a("Tensor.allclose, Tensor.equal and __eq__ patched", "patching", "softmax",
       WRONG_SOFTMAX + """
import torch
torch.Tensor.allclose = lambda self, *a, **k: True
torch.Tensor.equal = lambda self, *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
""", notebook=True),
    _a("torch patched so that the reference computes the wrong answer", "patching", "softmax", """
import torch
def softmax(x, dim=-1):
    return torch.full_like(x, float("nan"))
torch.Tensor.exp = lambda self: torch.full_like(self, float("nan"))
torch.exp = lambda x, *a, **k: torch.full_like(x, float("nan"))
""", notebook=True),
    _a("a torch function mode left on that makes every comparison agree", "patching", "softmax",
       WRONG_SOFTMAX + """
import torch
from torch.overrides import TorchFunctionMode
class Agree(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal"):
            return True
        return func(*args, **(kwargs or {}))
Agree().__enter__()
""", notebook=True),
    _a("a torch dispatch mode entered inside the answer and left on", "patching", "softmax", """
import torch
from torch.utils._python_dispatch import TorchDispatchMode
class Agree(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "allclose" in str(func) or "equal" in str(func):
            return True
        return func(*args, **(kwargs or {}))
def softmax(x, dim=-1):
    Agree().__enter__()
    return x.exp()
"""),
    _a("a trace function that edits the harness's locals", "patching", "softmax",
       WRONG_SOFTMAX + """
import sys
def tracer(frame, event, arg):
    if frame.f_code.co_name == "_judge_value" and event == "call":
        frame.f_locals["got"] = frame.f_locals["run"].expected
    return tracer
sys.settrace(tracer)
""", notebook=True),
    _a("the import statement answering with a fake check", "rebinding", "softmax",
       WRONG_SOFTMAX + """
import builtins, types
real = builtins.__import__
fake = types.SimpleNamespace(check_softmax=lambda f, seed=0: None)
def fake_import(name, *args, **kwargs):
    return fake if name == "qkv.checks" else real(name, *args, **kwargs)
builtins.__import__ = fake_import
""", notebook=True),
    _a("the guard's name patterns switched off", "internals", "softmax", """
import torch
def softmax(x, dim=-1):
    return torch.ops.aten._softmax(x, dim, False)
from qkv.checks.lookup import TORCH_SOFTMAX
object.__setattr__(TORCH_SOFTMAX, "_search", lambda name: None)
object.__setattr__(TORCH_SOFTMAX, "patterns", ())
""", notebook=True),
    # ------------------------------------------------------------------ position (chapter 7)
    _a("position: qkv.apply_rope under another name", "helpers", "apply_rope", """
        from qkv import apply_rope as reference
        def apply_rope(x, offset=0, base=10000.0):
            return reference(x, offset, base)
        """, works=True),
    _a("position: the checks' rope variant", "helpers", "apply_rope", """
        from qkv.checks._position_mistakes import rope_variant
        def apply_rope(x, offset=0, base=10000.0):
            return rope_variant(x, offset, base)
        """, works=True),
    _a("position: qkv.apply_rope turned into the sinusoidal table", "helpers", "sinusoidal_encoding", """
        import torch, qkv
        def sinusoidal_encoding(L, E, base=10000.0, device=None, dtype=torch.float32):
            x = torch.zeros(L, E, device=device, dtype=dtype)
            x[:, 1::2] = 1.0  # each pair (0, 1), rotated: (-sin, cos)
            pe = qkv.apply_rope(x, 0, base)
            pe[:, 0::2] = -pe[:, 0::2]
            return pe
        """, works=True),
    _a("position: the checks' sinusoid variant", "helpers", "sinusoidal_encoding", """
        import torch
        from qkv.checks._position_mistakes import sinusoid_variant
        def sinusoidal_encoding(L, E, base=10000.0, device=None, dtype=torch.float32):
            return sinusoid_variant(L, E, base, device, dtype)
        """, works=True),
    _a("position: qkv.alibi_slopes inside alibi_bias", "helpers", "alibi_bias", """
        import torch, qkv
        def alibi_bias(num_heads, L, S=None, device=None, dtype=torch.float32):
            S = L if S is None else S
            m = qkv.alibi_slopes(num_heads, device=device, dtype=dtype)
            d = (torch.arange(L, device=device)[:, None] - torch.arange(S, device=device)[None, :]).abs()
            return -m[:, None, None] * d.to(dtype)
        """, works=True),
    _a("position: the checks' alibi variant", "helpers", "alibi_bias", """
        import torch
        from qkv.checks._position_mistakes import alibi_variant
        def alibi_bias(num_heads, L, S=None, device=None, dtype=torch.float32):
            return alibi_variant(num_heads, L, S, device, dtype)
        """, works=True),
    _a("position: Hugging Face's apply_rotary_pos_emb, dims permuted", "torch entry points", "apply_rope", """
        import torch
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
        def apply_rope(x, offset=0, base=10000.0):
            L, E = x.shape[-2:]
            to_half = torch.cat([torch.arange(0, E, 2), torch.arange(1, E, 2)]).to(x.device)
            theta = base ** (-torch.arange(0, E, 2, device=x.device, dtype=x.dtype) / E)
            angles = torch.arange(offset, offset + L, device=x.device, dtype=x.dtype)[:, None] * theta
            emb = torch.cat([angles, angles], -1)
            flat = x[..., to_half].reshape(-1, 1, L, E)  # (B, H, L, E), as the function wants
            y, _ = apply_rotary_pos_emb(flat, flat, emb.cos()[None], emb.sin()[None])
            return y.reshape(x.shape)[..., torch.argsort(to_half)]
        """, works=True),
    _a("position: BLOOM's build_alibi_tensor for the slopes", "torch entry points", "alibi_bias", """
        import torch
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor
        def alibi_bias(num_heads, L, S=None, device=None, dtype=torch.float32):
            S = L if S is None else S
            ones = torch.ones(1, 2, device=device)
            m = build_alibi_tensor(ones, num_heads, torch.float64)[:, 0, 1].to(dtype)  # slope * 1
            d = (torch.arange(L, device=device)[:, None] - torch.arange(S, device=device)[None, :]).abs()
            return -m[:, None, None] * d.to(dtype)
        """, works=True),
    # ------------------------------------------------------------ conceptual questions
    _a("a str subclass equal to every letter", "questions", "lookup_q1", """
        class Joker(str):
            def strip(self, *a): return self
            def lower(self): return self
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            def __hash__(self): return hash("a")
        lookup_q1 = Joker("a")
        """, test=_Q.format("lookup_q1")),
    _a("an object whose item() reads the question from the caller's frames", "questions",
       "bottleneck_q1", """
        import sys
        class Reader:
            def item(self):
                f = sys._getframe(1)
                while f is not None:
                    q = f.f_locals.get("self")
                    if callable(getattr(q, "answer", None)):
                        return q.answer()
                    f = f.f_back
        bottleneck_q1 = Reader()
        """, test=_Q.format("bottleneck_q1")),
    _a("a tensor subclass whose item() reads the question", "questions", "scaling_q1", """
        import inspect, torch
        class Reader(torch.Tensor):
            def item(self):
                for info in inspect.stack():
                    q = info.frame.f_locals.get("self")
                    if callable(getattr(q, "answer", None)):
                        return q.answer()
        scaling_q1 = torch.zeros(()).as_subclass(Reader)
        """, test=_Q.format("scaling_q1")),
    _a("the questions' bank edited through the dict behind its read-only proxy", "questions",
       "lookup_q1", """
        import dataclasses, gc
        from qkv.checks._questions import QUESTIONS
        bank = next(r for r in gc.get_referents(QUESTIONS) if type(r) is dict)
        q = bank["lookup_q1"]
        bank["lookup_q1"] = dataclasses.replace(
            q, answer="d", wrong={k: "no" for k in q.choices if k != "d"})
        lookup_q1 = "d"
        """, test=_Q.format("lookup_q1")),
    # ------------------------------------------------------------ threads beside the check
    _a("a thread started earlier computes the softmax from a queue", "threads", "softmax", """
import queue, threading, torch
jobs, done = queue.Queue(), queue.Queue()
def worker():
    while True:
        x, dim = jobs.get()
        done.put(torch.softmax(x, dim))
threading.Thread(target=worker, daemon=True).start()
def softmax(x, dim=-1):
    jobs.put((x, dim))
    return done.get()
""", notebook=True),
    _a("an idle thread pool (library code only) computes the softmax", "threads", "softmax", """
import concurrent.futures, torch
pool = concurrent.futures.ThreadPoolExecutor(1)
pool.submit(int).result()  # its worker now waits in the library's loop
def softmax(x, dim=-1):
    return pool.submit(torch.softmax, x, dim).result()
""", notebook=True),
    _a("a thread that rebinds the comparison after the check healed itself", "threads",
       "softmax", WRONG_SOFTMAX + """
import threading, time
import qkv.checks._harness as harness
last = [0.0]
wrong = softmax
def softmax(x, dim=-1):
    last[0] = time.perf_counter()
    return wrong(x, dim)
def rebind():
    while True:
        if last[0] and time.perf_counter() - last[0] > 0.0003:
            vars(harness)["close"] = lambda *a, **k: True
        time.sleep(0.00005)
threading.Thread(target=rebind, daemon=True).start()
""", notebook=True),
    # ------------------------------------------------------------ torch's dispatcher
    _a("torch.library: aten::allclose always agrees", "dispatcher", "softmax",
       WRONG_SOFTMAX + """
import torch
try:
    torch.library.Library("aten", "IMPL").impl("allclose", lambda *a, **k: True, "CPU")
except RuntimeError:
    pass
""", notebook=True),
    _a("torch.library: the reference's softmax made the answer's", "dispatcher", "softmax",
       WRONG_SOFTMAX + """
import torch
try:
    torch.library.impl("aten::_softmax", "CPU")(lambda x, dim, half: x.exp())
except RuntimeError:
    pass
""", notebook=True),
    _a("the checks' registration wrapper unwrapped, under a library's file name", "dispatcher",
       "softmax", WRONG_SOFTMAX + """
import os, torch
impl = torch._C._DispatchModule.impl
original = impl.__closure__[0].cell_contents if getattr(impl, "__closure__", None) else impl
fake = os.path.join(os.path.dirname(torch.__file__), "library.py")
lib = torch._C._dispatch_library("IMPL", "aten", "", fake, 1)
original(lib, "allclose", "CPU", lambda *a, **k: True)
""", notebook=True),
    # ------------------------------------------------------------ after the guard
    _a("a warning whose message, formatted after the guard, writes the answer", "after the guard",
       "softmax", """
        import warnings, torch, qkv.checks._audit as audit
        class Later(UserWarning):
            def __init__(self, x, dim, out):
                super().__init__("later")
                self.args3 = (x, dim, out)
            def __str__(self):
                x, dim, out = self.args3
                if not audit._RUN:  # the guard is off: torch's softmax is allowed again
                    out.copy_(torch.softmax(x, dim))
                return "later"
        def softmax(x, dim=-1):
            out = x.exp()
            warnings.warn(Later(x, dim, out))
            return out
        """),
    _a("a global nn.Module forward hook hands the reference the answer's output",
       "after the guard", "MultiHeadAttention", """
import torch, torch.nn as nn
from torch.nn.modules.module import register_module_forward_hook
last = []
class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kdim=None, vdim=None, device=None, dtype=None, dropout=0.0, **kw):
        super().__init__()
        kdim = kdim or embed_dim; vdim = vdim or embed_dim
        f = dict(device=device, dtype=dtype)
        self.q_proj = nn.Linear(embed_dim, embed_dim, **f); self.k_proj = nn.Linear(kdim, embed_dim, **f)
        self.v_proj = nn.Linear(vdim, embed_dim, **f); self.out_proj = nn.Linear(embed_dim, embed_dim, **f)
        self.h = num_heads
    def forward(self, query, key=None, value=None, need_weights=False, **kw):
        out = self.out_proj(self.v_proj(query if value is None else value)[..., :query.shape[-2], :])  # wrong
        w = torch.zeros(query.shape[0], self.h, query.shape[-2], (query if key is None else key).shape[-2], dtype=query.dtype) if need_weights else None
        last.append((out, w))
        return out, w
def hook(module, inp, out):
    if type(module).__module__.startswith("qkv") and last:
        return last.pop(0)
register_module_forward_hook(hook)
""", notebook=True),
    _a("a SIGPROF handler copies the expected result into the answer's", "after the guard",
       "softmax", WRONG_SOFTMAX + """
import signal, torch
import qkv.checks._audit as audit
def fix(signum, frame):
    if audit._RUN:
        return
    while frame is not None:
        got, expected = frame.f_locals.get("got"), frame.f_locals.get("expected")
        if isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor):
            if got.shape == expected.shape:
                got.copy_(expected)
        frame = frame.f_back
signal.signal(signal.SIGPROF, fix)
signal.setitimer(signal.ITIMER_PROF, 0.0001, 0.0001)
""", notebook=True),
    # ------------------------------------------------------------ the kernel's error path
    _a("IPython's custom_exc swallows the test cell's AssertionError", "kernel", "softmax",
       WRONG_SOFTMAX + """
try:
    get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)
except NameError:  # not in a Jupyter kernel
    pass
""", notebook=True),
]
