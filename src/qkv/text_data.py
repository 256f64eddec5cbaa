"""Real English text that ships with Python: the docstrings of its standard library.

The capstone trains a language model on text that needs no download: the documentation
strings of a fixed list of standard-library modules, read with :mod:`inspect` from the
running interpreter. The text is deterministic for a given Python version (modules in a
fixed order, names sorted); it changes a little between versions, as the library's
documentation does, so measured losses move slightly with the interpreter.

The tokenizer is character-level over a fixed vocabulary (newline and printable ASCII):
small enough that a tiny model learns it in a minute, and the same on every machine.
"""

from __future__ import annotations

import importlib
import inspect
import re
import string
import sys
import warnings
from dataclasses import dataclass
from typing import List, NamedTuple, Sequence, Tuple

import torch
from torch import Tensor

from . import _validate as v

# TextSplit is a record that load_corpus returns (users read it, never build it): it stays
# in this module, not in the package's API, as the other result records do.
__all__ = ["CharTokenizer", "load_corpus", "stdlib_docstrings"]

#: The modules whose documentation makes the corpus, in this order. Public, documented,
#: pure-Python modules present on every platform; no tests and no private modules.
MODULES: Tuple[str, ...] = (
    "abc", "argparse", "base64", "bisect", "calendar", "cmd", "collections", "colorsys",
    "configparser", "contextlib", "copy", "csv", "dataclasses", "datetime", "difflib", "dis",
    "email.message", "enum", "filecmp", "fnmatch", "fractions", "ftplib", "functools",
    "getopt", "gettext", "glob", "gzip", "heapq", "hmac", "html.parser", "http.client",
    "imaplib", "inspect", "ipaddress", "json", "logging", "mailbox", "mimetypes", "netrc",
    "numbers", "operator", "optparse", "os", "pathlib", "pickle", "pkgutil", "platform",
    "poplib", "pprint", "queue", "quopri", "random", "sched", "secrets", "selectors",
    "shlex", "shutil", "smtplib", "socket", "socketserver", "statistics", "string",
    "subprocess", "tarfile", "tempfile", "textwrap", "threading", "timeit", "tokenize",
    "trace", "traceback", "types", "typing", "urllib.parse", "urllib.request", "uuid",
    "warnings", "wave", "weakref", "webbrowser", "xml.dom.minidom", "zipfile",
)

#: Newline, then the 95 printable ASCII characters from space to tilde.
ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127))


def _public(module) -> List[Tuple[str, object]]:
    """The module's own public functions and classes, sorted by name."""
    out = []
    for name in sorted(vars(module)):
        obj = vars(module)[name]
        if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if getattr(obj, "__module__", None) == module.__name__:  # not re-exported from elsewhere
            out.append((name, obj))
    return out


def _members(cls: type) -> List[Tuple[str, object]]:
    """A class's own public methods, sorted by name."""
    return [(n, f) for n, f in sorted(vars(cls).items())
            if not n.startswith("_") and inspect.isfunction(f)]


def _clean(doc: str) -> str:
    """ASCII only (other characters dropped), tabs as spaces, no trailing blanks."""
    doc = doc.replace("\t", "    ")
    doc = "".join(c for c in doc if c in ALPHABET)
    return re.sub(r"[ ]+\n", "\n", doc).strip()


def stdlib_docstrings(modules: Sequence[str] = MODULES) -> List[Tuple[str, str]]:
    """The documentation of each module, one document per module.

    A module's document is its own docstring, then for every public function and class
    defined there (sorted by name) a line with its qualified name and its docstring, and
    for a class the same for its public methods. A docstring seen before is skipped.

    Args:
        modules: names of standard-library modules, in the order wanted.

    Returns:
        ``(module name, text)`` pairs, in the order of ``modules``.
    """
    _check_modules(modules)
    seen = set()
    documents = []
    for name in modules:
        with warnings.catch_warnings():  # importing or reading some modules warns of deprecations
            warnings.simplefilter("ignore")
            documents.append((name, _document(name, seen)))
    return documents


def _check_modules(modules: object) -> None:
    """Raise unless ``modules`` is a non-empty sequence of standard-library module names."""
    if isinstance(modules, (str, bytes)) or not isinstance(modules, Sequence) \
            or not all(isinstance(m, str) for m in modules):
        raise TypeError("modules must be a sequence of module names (strings) such as ('json', 'csv'), "
                        f"got {modules!r}")
    if not modules:
        raise ValueError("modules must name at least one module, got an empty sequence")
    # importing runs a module's code: only the standard library's, whose text the corpus is
    odd = [m for m in modules if m.split(".")[0] not in sys.stdlib_module_names or not m.split(".")[0]]
    if odd:
        raise ValueError(f"modules must name standard-library modules, got {odd[:5]}; "
                         f"see qkv.text_data.MODULES for the capstone's list")


def _document(name: str, seen: set) -> str:
    """One module's text for :func:`stdlib_docstrings`; adds the docstrings it uses to ``seen``."""
    try:
        module = importlib.import_module(name)
    except (ImportError, ValueError) as error:
        raise ValueError(f"modules has {name!r}, which this Python cannot import ({error})") from None
    parts: List[str] = []

    def add(title: str, obj: object) -> None:
        doc = inspect.getdoc(obj) if obj is not module else module.__doc__
        doc = _clean(doc or "")
        if len(doc) < 40 or doc in seen:  # too short to read, or inherited
            return
        seen.add(doc)
        parts.append(f"{title}\n{doc}\n")

    add(name, module)
    for attr, obj in _public(module):
        add(f"{name}.{attr}", obj)
        if inspect.isclass(obj):
            for method, f in _members(obj):
                add(f"{name}.{attr}.{method}", f)
    return "\n".join(parts)


@dataclass(frozen=True)
class CharTokenizer:
    """Characters to ids and back, over a fixed alphabet (by default newline and printable ASCII).

    Args:
        alphabet: the characters, each once; a character's id is its index.
    """

    alphabet: str = ALPHABET

    def __post_init__(self) -> None:
        if not isinstance(self.alphabet, str) or len(set(self.alphabet)) != len(self.alphabet) \
                or not self.alphabet:
            raise ValueError("alphabet must be a non-empty string with each character once")

    @property
    def vocab_size(self) -> int:
        """Number of ids ``V``."""
        return len(self.alphabet)

    def encode(self, text: str) -> Tensor:
        """Ids of ``text``'s characters.

        Args:
            text: characters of the alphabet only.

        Returns:
            ``(N,)`` int64 ids.
        """
        index = {c: i for i, c in enumerate(self.alphabet)}
        missing = sorted(set(text) - set(index))
        if missing:
            raise ValueError(f"text has characters outside the alphabet: {''.join(missing[:10])!r}; "
                             f"clean it first (qkv.text_data keeps printable ASCII and newlines)")
        return torch.tensor([index[c] for c in text], dtype=torch.long)

    def decode(self, ids: Tensor) -> str:
        """The text of ``ids``.

        Args:
            ids: ``(N,)`` ids below :attr:`vocab_size`.

        Returns:
            The characters, joined.
        """
        v.require_tokens("ids", v.require_tensor("ids", ids).reshape(1, -1), self.vocab_size, "(N,)")
        return "".join(self.alphabet[i] for i in ids.reshape(-1).tolist())


class TextSplit(NamedTuple):
    """A corpus encoded and split by module: the last modules are held out for validation.

    Shape:
        - train, valid: ``(N,)`` int64 ids
    """

    train: Tensor
    valid: Tensor
    train_modules: Tuple[str, ...]
    valid_modules: Tuple[str, ...]
    tokenizer: CharTokenizer


def load_corpus(valid_fraction: float = 0.1, modules: Sequence[str] = MODULES) -> TextSplit:
    """The standard library's docstrings, encoded, split into training and validation text.

    Whole modules are held out (the last ones in ``modules`` whose text makes up about
    ``valid_fraction`` of the characters), so the validation loss measures text the
    model has never seen, not neighbouring lines of the same docstring.

    Args:
        valid_fraction: share of the characters to hold out, in (0, 1).
        modules: as for :func:`stdlib_docstrings`.

    Returns:
        A :class:`TextSplit`.
    """
    v.require_probability("valid_fraction", valid_fraction)
    if not 0 < valid_fraction < 1:
        raise ValueError(f"valid_fraction must be strictly between 0 and 1, got {valid_fraction}")
    documents = stdlib_docstrings(modules)
    total = sum(len(text) for _, text in documents)
    held, n = [], 0
    while documents and n < valid_fraction * total and len(documents) > 1:
        held.insert(0, documents.pop())
        n += len(held[0][1])
    if not held:
        raise ValueError(f"modules must hold at least two modules with documentation to split them "
                         f"into training and validation text, got {list(modules)}")
    tok = CharTokenizer()
    join = lambda docs: tok.encode("\n".join(text for _, text in docs))
    return TextSplit(join(documents), join(held), tuple(m for m, _ in documents),
                     tuple(m for m, _ in held), tok)


# The alphabet is printable ASCII: `string.printable` minus the rarer whitespace.
assert set(ALPHABET) == set(string.printable) - set("\t\r\x0b\x0c")
