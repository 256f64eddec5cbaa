"""qkv_course: the course's own tooling (not part of the ``qkv`` reference a student installs).

Everything that turns the repository's hand-written sources into what readers, students and
instructors use lives here, in one package with one reader of ``_config.yml``:

- :mod:`qkv_course.config`: the repository root, ``_config.yml`` and the table of contents;
- one sub-package per verb: :mod:`.generate` (every generated file), :mod:`.render` (what a page
  shows, for the book and its Colab copy), :mod:`.grade` (trusted grading), :mod:`.gradescope`,
  :mod:`.nbgrader` (its plugins, and reading graded notebooks), :mod:`.report` (for
  instructors), :mod:`.progress` (for students), :mod:`.sphinx` (the book's extensions);
- :mod:`.cli` (the ``qkv`` command), :mod:`.usage` and :mod:`.outdir`, which the commands share.

CONTRIBUTING.md maps every module (generated from their docstrings).

The reference package ``qkv`` and its checks never import this package (a test keeps it so).
"""
