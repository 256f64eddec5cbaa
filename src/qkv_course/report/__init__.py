"""``qkv report COURSE_DIR --out DIR``: what a class got wrong, for its instructor.

- :mod:`.command`: the command (the CSV of named mistakes, per assignment);
- :mod:`.page`: ``report.html``, charts of the mistakes and pass rates;
- :mod:`.similarity`: ``similarity.html``, answers that look copied.
"""
