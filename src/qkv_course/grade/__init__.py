"""Trusted grading (``qkv grade``): student code in a sandbox, judged and recorded here.

- :mod:`.plan`: what is graded, from the instructor's source (tests, check calls, seeds);
- :mod:`.submission`: a submitted notebook read as untrusted data (which cells are the student's);
- :mod:`.sandbox`, :mod:`.worker`, :mod:`.protocol`: the sandbox and the data-only protocol;
- :mod:`.checks_api`: the checks' grading API (inputs, verdicts), in the trusted process;
- :mod:`.judge`: one submission's tests through its sandbox;
- :mod:`.results`: one result file per submission, the record;
- :mod:`.gradebook`: nbgrader's gradebook and autograded notebooks, from the result files;
- :mod:`.flags`: delegation, flagged for a person;
- :mod:`.run`, :mod:`.command`: the run (jobs, shards, summary) and the ``qkv grade`` command.
"""
