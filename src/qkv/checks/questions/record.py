"""The first answer to each conceptual question, recorded beside the notebook.

A question is graded on its first answer: :func:`first` stores the first normalised answer to
each question in ``qkv_answers.json`` in the kernel's working directory (the notebook's folder,
which nbgrader collects with the notebook), or in the file the environment variable
``QKV_ANSWERS`` names, and returns it on every later call. Answers that are not answers (no
value yet, a letter that is not a choice) are never recorded. The test cell also prints the
recorded answer, so the notebook's output says which one was graded.

An instructor's source folder (``solutions/<NN-name>/``, which holds the assignment's ``.md``,
model answers and all, beside its notebook) gets no record: there, the model answers would be released with the
notebook, or copied over a student's record when nbgrader autogrades. A notebook run there
records in the temporary directory instead.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Optional, Tuple, Union

#: The record's name in the notebook's folder, and the variable that moves it.
FILE = "qkv_answers.json"
ENV = "QKV_ANSWERS"

Answer = Union[str, float, dict]  # a dict: a per-student question's answer and parameters
_KINDS = (str, int, float, dict)  # what a recorded entry may be (anything else is no entry)


def _is_source_folder(folder: Path) -> bool:
    """Whether ``folder`` holds an assignment's source: a ``.md`` beside a same-named notebook,
    with the model answers in it (a student's own markdown copy of the released notebook,
    from ``nbconvert --to markdown`` or jupytext, has none)."""
    try:
        return any(md.with_suffix(".ipynb").is_file()
                   and "### BEGIN SOLUTION" in md.read_text(encoding="utf-8", errors="replace")
                   for md in folder.glob("*.md"))
    except OSError:
        return False


def path() -> Path:
    """Where the record is."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    if _is_source_folder(Path.cwd()):
        return Path(tempfile.gettempdir()) / f"qkv_answers_{os.getpid()}.json"
    return Path(FILE)


def _read(where: Path) -> Tuple[dict, str]:
    """The record, and "" or what is wrong with it (a file that is there but is no record)."""
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, ""
    except (OSError, UnicodeDecodeError) as e:
        return {}, str(e)
    try:
        data = json.loads(text)
    except ValueError as e:
        return {}, str(e)
    return (data, "") if isinstance(data, dict) else ({}, f"a JSON {type(data).__name__}")


def recorded(question_id: str) -> Optional[Answer]:
    """The first answer recorded for ``question_id``, or None: read only, nothing written (what
    a report of the notebook's progress judges)."""
    data, _ = _read(path())
    value = data.get(question_id)
    return value if type(value) in _KINDS else None


def first(question_id: str, answer: Answer) -> Tuple[Answer, str]:
    """The first answer recorded for ``question_id``; ``answer`` when there is none yet (it is
    recorded then). A record that cannot be written is no reason to lose the answer: it is
    judged all the same (and the next call records it).

    Returns:
        ``(first answer, note)``: the note is "" unless the record is there but cannot be read
        (edited by hand, say). It is then left as it is, never overwritten: the other first
        answers it holds are the student's, and only the student can mend it.
    """
    where = path()
    data, problem = _read(where)
    if problem:
        return answer, (f"{where} cannot be read ({problem[:120]}), so this answer is judged "
                        "but not recorded. It holds your first answers, which are graded: mend "
                        "it (a JSON object, {\"question id\": answer, ...}) or, to start the "
                        "record again, delete it.")
    if question_id in data and type(data[question_id]) in _KINDS:
        return data[question_id], ""
    data[question_id] = answer
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=where.parent or ".", delete=False,
                                         prefix=".qkv_answers.", suffix=".tmp") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(f.name, where)  # whole or not at all: a record is never half written
    except OSError:
        pass
    return answer, ""
