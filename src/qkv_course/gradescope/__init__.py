"""``qkv gradescope``: the Gradescope autograder of an assignment, graded by ``qkv grade``'s engine.

- :mod:`.command`: ``qkv gradescope ASSIGNMENT --out DIR`` (the students' notebook and the zip);
- :mod:`.autograder_zip`: what the zip holds (setup.sh, run_autograder, the course, a wheel);
- :mod:`.autograder`: what ``run_autograder`` runs on Gradescope, one submission through
  :mod:`qkv_course.grade`, into ``results.json``.
"""
