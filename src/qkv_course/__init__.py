"""qkv_course: the course's own tooling (not part of the ``qkv`` reference a student installs).

Everything that turns the repository's hand-written sources into what readers, students and
instructors use lives here, in one package with one reader of ``_config.yml``:

- :mod:`qkv_course.config`: the repository root, ``_config.yml`` and the table of contents;
- notebook generation (assignments, Colab copies of the chapters) and the regenerate command;
- the Sphinx extensions the book is built with.

The reference package ``qkv`` and its checks never import this package (a test keeps it so).
"""
