"""``python -m qkv_course generate``: every generated file of the repository, from its source.

- :mod:`.command`: the one command (``--check``, ``--force``, ``--only``) and its list of
  generators, each a module with ``targets(root) -> {path: text}``:
- :mod:`.toc` (``_toc.yml``), :mod:`.assignments` (solution notebooks from
  ``solutions/*/*.md``), :mod:`.exercises` (nbgrader's release of them), :mod:`.points`
  (``solutions/POINTS.md``), :mod:`.colab` (the chapters' Colab copies), :mod:`.exports`
  (``qkv``'s export lists), :mod:`.concept_map` and :mod:`.tooling_map` (CONTRIBUTING.md's
  tables);
- :mod:`.setup_cell`: the first code cell of every notebook a reader or a student opens;
- :mod:`.checks_intro`: the end of every assignment's intro, what its checks try and refuse.

What a Colab copy shows of a page (plain Markdown, listings, glued numbers) comes from
:mod:`qkv_course.render`.
"""
