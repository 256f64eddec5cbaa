"""What a page shows, rendered once for the book build and its Colab copy alike.

- :mod:`.listing`: the part of a reference function that teaches (the ``{listing}`` text),
  fitted to the book's column by ruff's formatter;
- :mod:`.plain_markdown`: a chapter's MyST Markdown as the plain Markdown Colab renders;
- :mod:`.glued`: the numbers a chapter glues into its text, recorded by the book build;
- :mod:`.glue`: ``glue`` in a reader's own kernel (what a Colab copy imports).
"""
