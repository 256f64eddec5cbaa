"""``qkv report COURSE_DIR --out DIR``: what a class got wrong, for its instructor.

- :mod:`.command`: the command: reads the class, writes the three files into ``--out``;
- :mod:`.mistakes`: every submission's tests read and counted, and ``mistakes.csv``;
  :mod:`.exported`: which ``results.json`` files are the Gradescope autograder's;
- :mod:`.page`: ``report.html``, charts of the mistakes and pass rates;
- :mod:`.similarity`: ``similarity.html``, answers that look copied.
"""
