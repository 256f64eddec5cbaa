"""The course's side of nbgrader: the plugins ``nbgrader_config.py`` names, and reading what
nbgrader writes.

nbgrader itself is imported by the modules that need it, never here (``qkv progress`` reads
graded notebooks without it).

- :mod:`.collect`: ``nbgrader zip_collect``'s collector (every file goes to a student);
  :mod:`.timestamps`: the submission times of ``timestamps.csv`` that reach no one, or miss;
- :mod:`.overwrite`: autograding's cell check without the false alarm;
- :mod:`.provisional`: grades waiting for a person, in feedback (``templates/``) and exports;
- :mod:`.graded`: a graded notebook's questions and what each test cell's outputs say;
- :mod:`.api`: nbgrader's API on a course directory (the generators, tests and benchmarks).
"""
