"""Trusted grading (``qkv grade``): student code in a sandbox, judged and recorded here.

The untrusted half: run a submission's code in a sandbox, exchange only data.

- :mod:`.client`: :class:`Pool`, the sandboxed job slots the trusted grader drives, and
  :mod:`.child`: :class:`Submission`, one submission run in its own child of a slot;
- :mod:`.sandbox`: the bubblewrap sandbox (what it sees, its namespaces); :mod:`.slot`: a job
  slot, one sandbox whose zygote forks a child per submission;
- :mod:`.zygote` and :mod:`.worker`: what runs inside (the grader never runs them itself);
- :mod:`.protocol`: the data-only wire format; :mod:`.results`: what comes back besides data;
- :mod:`.limits`: :class:`Limits`, what one submission may spend; :mod:`.cgroup`: each slot's
  share of the CPU and memory, where cgroups can be written.

The grader runs each submission's code cells in a fresh child of a sandboxed zygote, calls
what the instructor's source names through ``qkv.checks.grading.run_student`` there, receives
plain data (tensors as raw bytes, never pickles), and judges and writes grades itself.

The trusted half (the parent, which alone judges and writes):

- :mod:`.plan`: what is graded, from the instructor's source (tests, check calls, seeds);
- :mod:`.notebook_file`: a submitted file read as bytes and JSON (sizes, links, encodings);
- :mod:`.submission`: a submitted notebook read as untrusted data (which cells are the student's);
- :mod:`.checks_api`: the checks' grading API (inputs, verdicts), in the trusted process;
- :mod:`.judge`: one submission's tests through its sandbox; :mod:`.one`: one submission
  graded and its record built;
- :mod:`.records`: one result file per submission, the record;
- :mod:`.gradebook`: nbgrader's gradebook and autograded notebooks, from the result files;
  :mod:`.autograded`: one submission's autograded notebook, as ``nbgrader autograde`` writes it;
  :mod:`.outdated`: a grade of an earlier submission, kept and flagged; :mod:`.roster`: a
  submission folder that names no registered student, graded, said and flagged;
- :mod:`.flags`: delegation, flagged for a person; :mod:`.names`: the names a cell of code
  uses, read as IPython runs it; :mod:`.uses`: the code an answer's name reaches;
- :mod:`.run`, :mod:`.summary`, :mod:`.command`: the run (sandboxes, limits, the gradebook
  written), its summary lines, and the ``qkv grade`` command; :mod:`.jobs`: which submissions a
  run is about (shards, the jobs, what cannot be graded); :mod:`.compare`: ``--compare``,
  against what nbgrader recorded.
"""

from .child import Submission
from .client import Pool
from .limits import Limits
from .protocol import ProtocolError
from .results import CellOutcome, Failed, Missing, NotData, Raised
from .sandbox import NoNamespaces, SandboxUnavailable

__all__ = ["CellOutcome", "Failed", "Limits", "Missing", "NoNamespaces", "NotData", "Pool",
           "ProtocolError", "Raised", "SandboxUnavailable", "Submission"]
