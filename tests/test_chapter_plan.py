"""The landing page's study times are computed from the pages, not typed (qkv_course.sphinx.chapter_plan)."""

from __future__ import annotations

from pathlib import Path

from qkv_course.config import front_matter, toc_pages
from qkv_course.sphinx.chapter_plan import _title, exercise_minutes, page_words

PAGE = '''---
# a comment in the front matter, not the title
plan:
  learn: "x"
---

# A title

Five words of prose here.

```{code-cell} ipython3
---
mystnb:
  figure:
    caption: not read
---
x = 1  # code
```

(a-label)=
:::{note}
:class: dropdown
Two words.
:::
'''


def test_words_count_prose_and_code_but_not_front_matter_or_options(tmp_path: Path):
    page = tmp_path / "01-x.md"
    page.write_text(PAGE)
    # "#", "A", "title"; five; "x", "=", "1", "#", "code"; two
    assert page_words(page) == 3 + 5 + 5 + 2
    assert _title(page) == "A title"


def test_every_exercise_states_its_time_and_no_chapter_types_one():
    pages = toc_pages()
    exercises = [p for p in pages if p.is_exercise]
    assert exercises
    for page in exercises:
        minutes = exercise_minutes(page)
        assert minutes is not None and 5 <= minutes <= 240, (page.name, minutes)
    for page in pages:
        if page.is_chapter:
            plan = front_matter(page.source).get("plan", {})
            assert "learn" in plan and "minutes" not in plan, page.name
