"""Break Python lines that are wider than a column, keeping the code valid and its meaning.

Used for the book's listings (:mod:`qkv_course.render.listing`) and, once, to fit the chapters' own
code cells. Three moves, tried in order on each line that is too wide:

1. a run of comment lines is re-flowed to the width;
2. a comment at the end of a code line moves to its own line above;
3. ``a, b = x, y`` becomes ``a, b = (`` and one item a line; otherwise the line's outermost
   bracket pair with the most inside is opened: its content goes on its
   own line, indented four more, or one item a line when that is too wide; the same is
   applied to the new lines.

4. a line that is one string literal becomes two adjacent literals, cut at a space.

A statement that already spans lines is joined into one line first. A line that cannot be broken
(a long docstring, say) is left as it is; the result is
parsed again, and when it would not parse the text comes back unchanged.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from typing import List, Optional, Tuple

_OPEN, _CLOSE = "([{", ")]}"


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _tokens(line: str) -> Optional[List[tokenize.TokenInfo]]:
    """Tokens of one physical line that is a whole logical line; None when it is not."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    if any(t.type == tokenize.ERRORTOKEN and not t.string.isspace() for t in toks):
        return None
    return toks


def _split_comment(line: str) -> Optional[Tuple[str, str]]:
    """``(code, comment)`` for a code line ending in a comment."""
    toks = _tokens(line)
    if not toks:
        return None
    comments = [t for t in toks if t.type == tokenize.COMMENT]
    if not comments or comments[0].start[1] == 0:
        return None
    stripped = line.strip()
    col = comments[0].start[1]
    return stripped[:col].rstrip(), stripped[col:]


def _explode(line: str, width: int) -> Optional[List[str]]:
    """Open the top-level bracket pair with the most inside; None when there is none to open."""
    toks = _tokens(line)
    if not toks:
        return None
    body = line.strip()
    pairs: List[Tuple[int, int]] = []
    stack: List[int] = []
    for t in toks:
        if t.type == tokenize.OP and t.string in _OPEN:
            stack.append(t.start[1])
        elif t.type == tokenize.OP and t.string in _CLOSE and stack:
            start = stack.pop()
            if not stack:
                pairs.append((start, t.start[1]))
    if not pairs:
        return None
    start, close = max(pairs, key=lambda pair: pair[1] - pair[0])
    if close - start <= 1:
        return None
    head, inner, tail = body[: start + 1], body[start + 1 : close], body[close:]
    pad, more = _indent(line), _indent(line) + "    "
    items = _top_level_items(inner)
    if len(more + inner.strip()) <= width or len(items) == 1:
        middle = [more + part for part in _split_for(inner.strip(), width - len(more))]
    else:
        middle = [f"{more}{item}," for item in items]
    return [pad + head, *middle, pad + tail]


def _split_for(inner: str, width: int) -> List[str]:
    """A too-wide comprehension's content, its ``for`` (and ``if``) clauses on lines of their own."""
    toks = _tokens(inner)
    if len(inner) <= width or not toks:
        return [inner]
    cuts = _top_level(toks, tokenize.NAME, ("for", "if"))
    cuts = [c for c in cuts if c > 0]
    if not cuts or "for" not in inner[cuts[0]:cuts[0] + 3]:
        return [inner]
    edges = [0, *cuts, len(inner)]
    return [inner[a:b].strip() for a, b in zip(edges, edges[1:])]


def _top_level(toks: List[tokenize.TokenInfo], kind: int, strings: tuple) -> List[int]:
    """Columns of the tokens of ``kind`` spelled as one of ``strings`` outside any bracket."""
    depth, found = 0, []
    for t in toks:
        if t.type == tokenize.OP and t.string in _OPEN:
            depth += 1
        elif t.type == tokenize.OP and t.string in _CLOSE:
            depth -= 1
        elif t.type == kind and t.string in strings and depth == 0:
            found.append(t.start[1])
    return found


def _tuple_assignment(line: str) -> Optional[List[str]]:
    """``a, b = x, y`` as ``a, b = (`` / one item a line / ``)``: the same statement."""
    toks = _tokens(line)
    if not toks:
        return None
    equals = _top_level(toks, tokenize.OP, ("=",))
    if not equals:
        return None
    eq = equals[-1]
    body = line.strip()
    items = _top_level_items(body[eq + 1:])
    if len(items) < 2:
        return None
    pad = _indent(line)
    return [f"{pad}{body[:eq].rstrip()} = (", *[f"{pad}    {item}," for item in items], f"{pad})"]


def _top_level_items(inner: str) -> List[str]:
    """The comma-separated items of a bracket's content (commas inside brackets or strings kept)."""
    toks = _tokens(inner)
    if not toks:
        return [inner.strip()]
    cuts = _top_level(toks, tokenize.OP, (",",))
    text = inner.strip()
    pieces, prev = [], 0
    for cut in cuts:
        pieces.append(text[prev:cut].strip())
        prev = cut + 1
    pieces.append(text[prev:].strip())
    return [p for p in pieces if p]


def _split_commas(line: str) -> Optional[List[str]]:
    """A continuation line's top-level items, one a line (valid only inside brackets)."""
    items = _top_level_items(line)
    if len(items) < 2:
        return None
    ends_with_comma = line.rstrip().endswith(",")
    pad = _indent(line)
    return [f"{pad}{item}," for item in items[:-1]] + [pad + items[-1] + ("," if ends_with_comma else "")]


def _split_string(line: str, width: int) -> Optional[List[str]]:
    """A line holding one string literal, as two adjacent literals (Python joins them)."""
    toks = [t for t in (_tokens(line) or []) if t.type not in (tokenize.NEWLINE, tokenize.ENDMARKER)]
    if not toks or toks[0].type != tokenize.STRING:
        return None
    pad = _indent(line)
    if len(toks) > 1 and toks[1].type == tokenize.STRING:
        # Adjacent literals (a joined statement): one a line, the last with what follows it.
        body = line.strip()
        n = next((k for k, t in enumerate(toks) if t.type != tokenize.STRING), len(toks))
        starts = [t.start[1] for t in toks[:n]] + [len(body)]
        return [pad + body[a:b].strip() for a, b in zip(starts, starts[1:])]
    literal = toks[0].string
    prefix = re.match(r"^[A-Za-z]*", literal).group(0)
    quote = literal[len(prefix)]
    if literal[len(prefix):].startswith(quote * 3):
        return None
    room = width - len(pad) - 1  # the first piece gets a closing quote
    depth, cut = 0, None
    for k, ch in enumerate(literal[: room]):
        if "f" in prefix.lower() and ch in "{}":
            depth += 1 if ch == "{" else -1
        elif ch == " " and depth == 0 and k > len(prefix) + 1 and literal[k - 1] != "\\":
            cut = k + 1  # keep the space at the end of the first piece
    if cut is None:
        return None
    rest = line.strip()[len(literal):]
    return [pad + literal[:cut] + quote, pad + prefix + quote + literal[cut:] + rest]


def _fit_one(line: str, width: int, depth: int = 0) -> List[str]:
    """One too-wide code line, broken (the comment runs are handled by :func:`_fit`)."""
    if len(line) <= width or depth > 4:
        return [line]
    split = _split_comment(line)
    if split:
        code, comment = split
        return _fit([_indent(line) + comment, _indent(line) + code], width, depth + 1)
    broken = _tuple_assignment(line) or _explode(line, width) or _split_commas(line) or _split_string(line, width)
    return _fit(broken, width, depth + 1) if broken else [line]


def _fit(lines: List[str], width: int, depth: int = 0) -> List[str]:
    out: List[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if len(line) > width and line.lstrip().startswith("#"):
            # The whole run of comment lines at this indentation, re-flowed.
            pad, j, words = _indent(line), i, []
            while j < len(lines) and lines[j].lstrip().startswith("#") and _indent(lines[j]) == pad:
                words.append(lines[j].strip().lstrip("#").strip())
                j += 1
            out += textwrap.wrap(" ".join(words), width, initial_indent=pad + "# ", subsequent_indent=pad + "# ",
                                 break_on_hyphens=False)
            i = j
            continue
        out += _fit_one(line, width, depth)
        i += 1
    return out


def _statements(code: str) -> List[Tuple[int, int]]:
    """0-based ``(first, last)`` lines of every statement that spans lines with no comment in it."""
    spans, start, commented = [], None, False
    try:
        for t in tokenize.generate_tokens(io.StringIO(code + "\n").readline):
            if t.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
                continue
            if t.type == tokenize.COMMENT:
                commented = commented or start is not None
                continue
            if start is None:
                start = t.start[0] - 1
            if t.type == tokenize.NEWLINE:
                if t.start[0] - 1 > start and not commented:
                    spans.append((start, t.start[0] - 1))
                start, commented = None, False
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    return spans


def _joined(lines: List[str]) -> str:
    """A statement's lines as one line (no space after an opening or before a closing bracket)."""
    out = lines[0].rstrip()
    for line in lines[1:]:
        piece = line.strip()
        glue = "" if out[-1:] in _OPEN or piece[:1] in _CLOSE else " "
        out += glue + piece
    return out


def _tree(code: str) -> Optional[str]:
    try:
        return ast.dump(ast.parse(textwrap.dedent(code)))
    except SyntaxError:
        return None


def fit_lines(code: str, width: int) -> str:
    """``code`` with its lines broken to at most ``width`` characters where this can be done.

    Args:
        code: Python source (a whole statement or more).
        width: the widest line wanted.

    Returns:
        The code with the same syntax tree, its long lines broken; a line whose breaking would
        change the tree (or that cannot be broken) stays as it is.
    """
    lines = code.split("\n")
    want = _tree(code)
    if want is None or all(len(line) <= width for line in lines):
        return code
    i = 0
    while i < len(lines):
        if len(lines[i]) <= width:
            i += 1
            continue
        # One wide line (or comment run, or statement) at a time, kept only if the code still
        # means the same.
        j = i + 1
        if lines[i].lstrip().startswith("#"):
            while j < len(lines) and lines[j].lstrip().startswith("#"):
                j += 1
            fitted = _fit(lines[i:j], width)
        else:
            span = next(((a, b) for a, b in _statements("\n".join(lines)) if a <= i <= b), None)
            if span is not None:
                i, j = span[0], span[1] + 1
                fitted = _fit([_joined(lines[i:j])], width)
            else:
                fitted = _fit(lines[i:j], width)
        candidate = lines[:i] + fitted + lines[j:]
        if _tree("\n".join(candidate)) == want:
            lines, i = candidate, i + len(fitted)
        else:
            i = j
    return "\n".join(lines)
