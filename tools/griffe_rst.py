"""Griffe extension for the API reference (mkdocs.yml): RST-flavoured docstrings as Markdown.

The docstrings are Google style with a little reStructuredText, written to read well in
``help()``. Before mkdocstrings renders them as Markdown, this extension rewrites:

- roles (``:func:`name```, ``:class:`~pkg.Name```, ...) into code that links to the object when
  the reference documents it (an optional cross-reference: never a broken link);
- doctest blocks (``>>>`` lines and their output) into fenced ``pycon`` code;
- simple RST tables (``====  ====`` borders) into Markdown tables;
- ``text::`` literal-block markers into ``text:`` (the indented block is code in Markdown too);
- a ``Name:`` line followed by an indented block that is not a Google section (e.g.
  ``Shapes:``) into the line and the block, dedented, as Markdown reads it.

It also gives module constants their ``#:`` comment as docstring (as Sphinx does), leaves out
special methods and instance attributes that have no docstring (``__repr__``, ``self.base``:
the constructor's parameters document them).
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

# Google section titles that Griffe parses itself (their indented bodies stay as they are).
_GOOGLE_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "params",
        "parameters",
        "keyword args",
        "keyword arguments",
        "other args",
        "other arguments",
        "other params",
        "other parameters",
        "raises",
        "exceptions",
        "returns",
        "yields",
        "receives",
        "examples",
        "example",
        "attributes",
        "functions",
        "methods",
        "classes",
        "modules",
        "type aliases",
        "warns",
        "warnings",
        "note",
        "notes",
        "warning",
        "see also",
        "abstract",
        "attention",
        "bug",
        "caution",
        "danger",
        "error",
        "hint",
        "info",
        "important",
        "tip",
        "todo",
        "question",
        "quote",
        "success",
        "failure",
        "seealso",
    }
)

_NAMED_SECTIONS = frozenset(
    {"args", "arguments", "params", "parameters", "keyword args", "keyword arguments", "attributes"}
)
_GROUPED_PARAM = re.compile(r"^( +)(\w+(?: *, *\w+)+): (.*)$")
_ROLE = re.compile(
    r":(?:py:)?(func|class|meth|attr|data|mod|obj|exc|const):`(~?)([\w.]+)(?:\(\))?`"
)
_HEADER = re.compile(r"^([A-Z][\w ]*)(?: \([^()]*\))?:$")
_BORDER = re.compile(r"^ *=+( +=+)+ *$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _qualify(name: str, obj: griffe.Object, role: str) -> str:
    """The full path a role's target most likely has, seen from ``obj``'s docstring."""
    if "." in name:
        return name
    if role in {"meth", "attr"}:
        owner = obj if obj.is_class else obj.parent
        if owner is not None and owner.is_class:
            return f"{owner.path}.{name}"
    module = obj if obj.is_module else obj.module
    return f"{module.path}.{name}"


def _roles(text: str, obj: griffe.Object) -> str:
    def link(match: re.Match[str]) -> str:
        role, short, name = match.groups()
        shown = name.rsplit(".", 1)[-1] if short else name
        if role in {"func", "meth"}:
            shown += "()"
        target = _qualify(name, obj, role)
        return f'<autoref identifier="{target}" optional><code>{shown}</code></autoref>'

    return _ROLE.sub(link, text)


def _doctests(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(">>>"):
            pad = " " * _indent(line)
            if out and out[-1].strip():
                out.append("")
            out.append(f"{pad}```pycon")
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append(f"{pad}```")
            continue
        out.append(line)
        i += 1
    return out


def _table(block: list[str]) -> list[str]:
    """A simple RST table (three ``=`` borders, header between the first two) as Markdown."""
    border = block[0]
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", border)]
    rows: list[list[str]] = []
    header_rows = 0
    borders_seen = 0
    for line in block:
        if _BORDER.match(line):
            borders_seen += 1
            if borders_seen == 2:
                header_rows = len(rows)
            continue
        starts = [start for start, _ in spans]
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line)], strict=True)]
        if rows and not cells[0] and not (borders_seen == 2 and len(rows) == header_rows):
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    header, body = rows[: max(header_rows, 1)], rows[max(header_rows, 1) :]
    merged = [" ".join(col).strip() for col in zip(*header, strict=True)]
    out = ["| " + " | ".join(merged) + " |", "|" + "---|" * len(merged)]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body]
    return out


def _tables(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        if _BORDER.match(lines[i]):
            borders = [i]
            j = i + 1
            while j < len(lines) and len(borders) < 3:
                if _BORDER.match(lines[j]):
                    borders.append(j)
                elif not lines[j].strip():
                    break
                j += 1
            if len(borders) == 3:
                out.extend(_table(lines[i : borders[2] + 1]))
                i = borders[2] + 1
                continue
        out.append(lines[i])
        i += 1
    return out


def _literal_markers(lines: list[str]) -> list[str]:
    out = []
    in_fence = False
    for line in lines:
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        stripped = line.rstrip()
        if not in_fence and stripped.endswith("::"):
            head = stripped[:-2]
            if not head.strip():
                continue  # a lone "::" line
            line = head.rstrip() if head.endswith(" ") else head + ":"
        out.append(line)
    return out


def _plain_headers(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        match = _HEADER.match(line)
        if (
            match
            and match.group(1).lower() not in _GOOGLE_SECTIONS
            and i + 1 < len(lines)
            and _indent(lines[i + 1]) > 0
            and lines[i + 1].strip()
        ):
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > 0):
                j += 1
            out += [line, "", *textwrap.dedent("\n".join(lines[i + 1 : j])).split("\n")]
            i = j
            continue
        out.append(line)
        i += 1
    return out


def _grouped_params(lines: list[str]) -> list[str]:
    """``a, b: text`` in an Args or Attributes section as one ``a: text`` and one ``b: text``.

    Griffe then checks each name against the signature and shows its type and default.
    """
    out: list[str] = []
    section_indent: int | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        header = _HEADER.match(line.strip())
        if header:
            is_named = header.group(1).lower() in _NAMED_SECTIONS
            section_indent = _indent(line) if is_named else None
        elif line.strip() and section_indent is not None and _indent(line) <= section_indent:
            section_indent = None
        match = _GROUPED_PARAM.match(line) if section_indent is not None else None
        if match:
            pad, names, text = match.groups()
            j = i + 1
            while j < len(lines) and lines[j].strip() and _indent(lines[j]) > len(pad):
                j += 1
            for name in re.split(r" *, *", names):
                out += [f"{pad}{name}: {text}", *lines[i + 1 : j]]
            i = j
            continue
        out.append(line)
        i += 1
    return out


def to_markdown(text: str, obj: griffe.Object) -> str:
    """``text`` (a cleaned docstring) with the RST constructs above rewritten as Markdown."""
    lines = text.split("\n")
    lines = _grouped_params(lines)
    lines = _tables(lines)
    lines = _doctests(lines)
    lines = _literal_markers(lines)
    lines = _plain_headers(lines)
    return _roles("\n".join(lines), obj)


def _doc_comment(obj: griffe.Object) -> str | None:
    """The ``#:`` comment lines right above an attribute's assignment, if any."""
    if obj.filepath is None or obj.lineno is None or isinstance(obj.filepath, list):
        return None
    lines = obj.lines_collection[obj.filepath]
    found: list[str] = []
    k = obj.lineno - 2  # the line above, 0-based
    while k >= 0 and lines[k].lstrip().startswith("#:"):
        found.insert(0, lines[k].lstrip()[2:].strip())
        k -= 1
    return "\n".join(found) or None


def _rewrite(obj: griffe.Object) -> None:
    if obj.docstring is None and obj.is_attribute and (comment := _doc_comment(obj)):
        obj.docstring = griffe.Docstring(comment, lineno=obj.lineno, parent=obj)
    if obj.docstring is not None:
        obj.docstring.value = to_markdown(obj.docstring.value, obj)
    for name, member in list(obj.members.items()):
        if member.is_alias:
            continue
        if (
            obj.is_class
            and member.is_function
            and member.is_special
            and name not in {"__init__", "__new__"}  # their parameters are the class's
            and not member.docstring
        ):
            obj.del_member(name)  # __repr__, __post_init__: nothing to read
            continue
        if member.is_attribute and "instance-attribute" in member.labels and not member.docstring:
            obj.del_member(name)  # self.x = check(x) in __init__: the parameter documents it
            continue
        _rewrite(member)  # type: ignore[arg-type]


class RstMarkup(griffe.Extension):
    """Rewrites every docstring of the loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        _rewrite(pkg)
