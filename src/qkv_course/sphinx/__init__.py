"""The Sphinx extensions the book is built with, loaded by name from ``_config.yml``
(``sphinx: extra_extensions:``).

- :mod:`qkv_course.sphinx.chapter_plan`: the landing page's ``{chapter-plan}`` table;
- :mod:`qkv_course.sphinx.vendored_js`: the book serves its own JavaScript (MathJax), no CDN;
- :mod:`qkv_course.sphinx.redirects`: pages at the addresses chapters used to have;
- :mod:`qkv_course.sphinx.listing`: the ``{listing}`` directive and the book's CSS;
- :mod:`qkv_course.sphinx.notebooks`: glued numbers recorded for the Colab copies, and the
  Colab copy served as each chapter's download.
"""
