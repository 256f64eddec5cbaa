"""TEMPORARY: the old home of the additive and Luong scores, now in :mod:`qkv.lookup`.

Kept only because ``qkv.checks`` (another branch) still imports ``qkv.additive`` and
``qkv.qkv.dot_product_variance``; revert this commit once the checks use ``qkv.<name>``.
"""

from .lookup import AdditiveAttention, LuongAttention, additive_score, attend, luong_score

__all__ = ["AdditiveAttention", "LuongAttention", "additive_score", "attend", "luong_score"]
