"""A chapter's MyST Markdown as plain Markdown, for its Colab copy (Colab renders no MyST).

:func:`plain` turns one Markdown cell of a chapter into what Colab can show:

- ``{glue:text}`name:fmt``` (and ``{glue}``, ``{glue:md}``) -> the number, formatted as the
  page formats it, from the build's record (:mod:`qkv_course.render.glued`);
- ``{listing}`` -> the same code as the page (:mod:`qkv_course.render.listing`) and the link to the
  whole function; ``{literalinclude}`` -> the object (or file) it names, whole;
- admonitions (``{note}``, ``{admonition} Title``, ...) and other directives with a body ->
  a quoted block with the title in bold; ``{figure}``/``{image}`` -> an image from the
  repository with its caption; ``{math}`` -> ``$$ ... $$``; ``{code-block}`` -> a fenced block;
- ``{math}`` roles -> ``$...$``, ``{doc}`` -> a link to the other chapter's notebook, every
  other role (``{ref}``, ``{cite}``, ...) -> its text; ``(label)=`` targets and ``%`` comments
  -> nothing; an equation's ``$$ (label)`` -> ``$$``.

A directive that needs the build's outputs (``{glue:figure}``, ...) raises :class:`MystError`:
the generator must not leave markup that Colab would show raw.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from myst_nb.core.variables import format_plain_text

from ..config import ROOT, config, repository_url
from .listing import object_source, source_link, teaching_source

ROLE = re.compile(r"\{([A-Za-z][\w:.-]*)\}`([^`]*)`")
FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:.-]+)\}[ \t]*(?P<arg>.*)$")
GLUE_ROLES = {"glue", "glue:text", "glue:md"}
ADMONITIONS = {"note", "tip", "warning", "important", "seealso", "caution", "attention", "hint",
               "danger", "error", "admonition", "dropdown", "margin", "sidebar", "topic", "epigraph"}
CODE_ROLES = {"code", "file", "command", "kbd", "samp", "py:func", "py:class", "py:meth", "py:mod",
              "py:attr", "py:obj", "func", "class", "meth", "mod", "attr", "obj"}


class MystError(ValueError):
    """A chapter uses MyST that has no plain-Markdown form here."""


@dataclass(frozen=True)
class Context:
    """What converting one chapter needs: where it is and the numbers its build glued."""

    md: Path
    glue: Mapping[str, str]  # name -> text/plain, from the chapter's record
    root: Path = ROOT


def glue_names(text: str) -> set:
    """Every name a Markdown text glues in (``{glue:text}`name:fmt``` -> ``name``)."""
    return {_split_glue(m.group(2))[0] for m in ROLE.finditer(text) if m.group(1) in GLUE_ROLES}


def _split_glue(content: str) -> Tuple[str, str]:
    # As myst-nb reads it: the format spec follows the last colon.
    key, _, fmt = content.rpartition(":") if ":" in content else (content, "", "")
    return (key, fmt) if key else (content, "")


def _title_and_target(content: str) -> Tuple[str, str]:
    m = re.fullmatch(r"\s*(.*?)\s*<([^<>]+)>\s*", content, re.S)
    return (m.group(1), m.group(2)) if m else (content.strip(), content.strip())


def _role(m: re.Match, ctx: Context) -> str:
    name, content = m.group(1), m.group(2)
    if name in GLUE_ROLES:
        key, fmt = _split_glue(content)
        if key not in ctx.glue:
            raise MystError(f"{ctx.md.name}: no recorded value for glued {key!r}")
        return format_plain_text(ctx.glue[key], fmt)
    if name == "math":
        return f"${content}$"
    title, target = _title_and_target(content)
    if name == "doc":
        stem = Path(target).name
        if (ctx.md.parent / f"{stem}.md").is_file():
            return f"[{title if title != target else stem}]({stem}.ipynb)"
        return title
    if name in CODE_ROLES:
        return f"`{title.lstrip('~')}`"
    return title


def _options(lines: List[str]) -> Tuple[Dict[str, str], List[str]]:
    """A directive's ``:key: value`` lines (or ``---`` YAML block) and the rest of its body."""
    opts: Dict[str, str] = {}
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
        for line in lines[1:end]:
            key, _, value = line.partition(":")
            opts[key.strip()] = value.strip()
        return opts, lines[end + 1:]
    i = 0
    while i < len(lines) and re.match(r"^:[\w-]+:", lines[i]):
        key, value = re.match(r"^:([\w-]+):\s*(.*)$", lines[i]).groups()
        opts[key] = value
        i += 1
    return opts, lines[i:]


def _source(arg: str, opts: Dict[str, str], ctx: Context, teach: bool) -> str:
    path = (ctx.md.parent / arg.strip()).resolve()
    rel = path.relative_to(ctx.root.resolve()).as_posix()
    lang = opts.get("language", "python" if path.suffix == ".py" else "")
    if "pyobject" not in opts:
        return f"```{lang}\n{path.read_text().rstrip()}\n```"
    if teach:
        listing = teaching_source(path, opts["pyobject"], start_at=opts.get("start-at"), end_at=opts.get("end-at"))
    else:
        listing = object_source(path, opts["pyobject"])
    block = f"```{lang}\n{listing.text}\n```"
    if not teach:
        return block
    text, url = source_link(rel, listing, ctx.root)
    return f"{block}\n\n[{text}]({url})"


def _image(arg: str, opts: Dict[str, str], body: str, ctx: Context) -> str:
    src = arg.strip()
    if not re.match(r"^[a-z]+://", src):
        rel = (ctx.md.parent / src).resolve().relative_to(ctx.root.resolve()).as_posix()
        org_repo = repository_url(ctx.root).split("github.com/")[1]
        branch = config(ctx.root)["repository"].get("branch", "main")
        src = f"https://raw.githubusercontent.com/{org_repo}/{branch}/{rel}"
    alt = opts.get("alt") or body.strip().split("\n")[0] or Path(src).stem
    caption = f"\n\n*{body.strip()}*" if body.strip() else ""
    return f"![{alt}]({src}){caption}"


def _quote(title: str, body: str) -> str:
    text = (f"**{title}**\n\n" if title else "") + body.strip()
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.split("\n"))


def _directive(name: str, arg: str, lines: List[str], ctx: Context) -> str:
    opts, rest = _options(lines)
    body = "\n".join(rest)
    if name in {"listing", "literalinclude"}:
        return _source(arg, opts, ctx, teach=name == "listing")
    if name in {"code-block", "code", "sourcecode", "code-cell"}:
        return f"```{arg.strip()}\n{body.strip()}\n```"
    if name in {"math"}:
        return f"$$\n{body.strip()}\n$$"
    if name in {"figure", "image"}:
        return _image(arg, opts, _convert(body, ctx), ctx)
    if name.startswith("glue") or name in {"toctree", "raw", "include", "eval-rst"}:
        raise MystError(f"{ctx.md.name}: the directive {{{name}}} has no plain-Markdown form in Colab")
    title = arg.strip() or (name.capitalize() if name in ADMONITIONS else "")
    return _quote(title, _convert(body, ctx))


def _closing(fence: str) -> re.Pattern:
    return re.compile(rf"^{re.escape(fence[0])}{{{len(fence)},}}\s*$")


def _convert(text: str, ctx: Context) -> str:
    """Directives (outermost first, their bodies recursively), then roles and targets."""
    lines, out, i = text.split("\n"), [], 0
    in_code: Optional[str] = None
    while i < len(lines):
        line = lines[i]
        plain_fence = re.match(r"^(`{3,}|~{3,})(?!\{)", line)
        if in_code is not None:
            out.append(line)
            if re.match(rf"^{re.escape(in_code)}\s*$", line):
                in_code = None
            i += 1
            continue
        if plain_fence:
            in_code = plain_fence.group(1)
            out.append(line)
            i += 1
            continue
        m = FENCE.match(line)
        if not m:
            kept = _inline(line, ctx)
            if kept is not None:
                out.append(kept)
            i += 1
            continue
        close = _closing(m.group("fence"))
        end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), len(lines))
        out.append(_directive(m.group("name"), m.group("arg"), lines[i + 1:end], ctx))
        i = end + 1
    return "\n".join(out)


def _inline(line: str, ctx: Context) -> Optional[str]:
    if re.match(r"^\([\w:.-]+\)=\s*$", line) or re.match(r"^%", line):
        return None
    line = re.sub(r"^(\s*\$\$)\s*\([\w:.-]+\)\s*$", r"\1", line)
    return ROLE.sub(lambda m: _role(m, ctx), line)


def plain(text: str, ctx: Context) -> str:
    """One Markdown cell of a chapter, with no MyST left (see the module's docstring)."""
    # Targets and comments leave blank lines behind: no more than one in a row.
    return re.sub(r"\n{3,}", "\n\n", _convert(text, ctx)).strip("\n")
