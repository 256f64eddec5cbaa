"""The Sphinx extensions the book is built with, loaded by name from ``_config.yml``
(``sphinx: extra_extensions:``):

- :mod:`qkv_course.sphinx.chapter_plan`: the landing page's ``{chapter-plan}`` table;
- :mod:`qkv_course.sphinx.vendored_js`: the book serves its own JavaScript (MathJax), no CDN;
- :mod:`qkv_course.sphinx.redirects`: pages at the addresses chapters used to have.
"""
