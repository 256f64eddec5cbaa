"""The catalogues of known mistakes: deliberately wrong versions of the reference, one module
per reference module (:mod:`.attention` holds what every attention exercise shares), and the
way :func:`qkv.checks.check_MultiHeadAttention` builds and runs a module
(:mod:`.multi_head_module`)."""
