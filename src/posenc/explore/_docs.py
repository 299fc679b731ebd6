"""The tutorial pages the guided path links to, served by the explorer itself (offline).

The pages are the repository's Markdown (``docs/tutorial.md``, ``docs/rope.md``,
``docs/attention-biases.md``): a wheel carries them inside the package
(``posenc/explore/docs/``, the ``force-include`` of ``pyproject.toml``), a source tree reads
them from its ``docs/`` folder. :func:`page` writes one as a small HTML page: headings with
the anchors a Markdown site gives them (:func:`slug`), paragraphs, lists, tables, code, and
links between these pages kept inside the explorer. Images are named by their description
(the figures are the explorer's own, live). The HTML has no inline style or script: the
page keeps the explorer's Content-Security-Policy.
"""

from __future__ import annotations

import html
import re
from importlib import resources
from pathlib import Path

#: The pages served, by name (``/docs/NAME``).
DOCS = ("tutorial", "rope", "attention-biases")


class MissingPage(LookupError):
    """A page that is not one of :data:`DOCS`, or not installed with this copy of posenc."""


def slug(heading: str) -> str:
    """The anchor a Markdown site gives a heading (lower case, punctuation dropped, spaces
    as hyphens).

    >>> slug("2. Why the score depends only on the distance"), slug("T5 and DeBERTa buckets")
    ('2-why-the-score-depends-only-on-the-distance', 't5-and-deberta-buckets')
    """
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def source(name: str) -> str:
    """The Markdown of page ``name``: the packaged copy, else the source tree's ``docs/``."""
    if name not in DOCS:
        raise MissingPage(f"no tutorial page {name!r}; the explorer serves {', '.join(DOCS)}")
    packaged = resources.files(__package__) / "docs" / f"{name}.md"
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    tree = Path(__file__).resolve().parents[3] / "docs" / f"{name}.md"
    if tree.is_file():
        return tree.read_text(encoding="utf-8")
    raise MissingPage(f"the tutorial page {name}.md is not installed with this copy of posenc")


def _link(target: str) -> str | None:
    """Where a link of a page points in the explorer: pages of :data:`DOCS` stay inside, other
    pages of the docs are not served (None: the link is written as text and the file's name)."""
    page, _, anchor = target.partition("#")
    if page.endswith(".md") and "/" not in page and page[:-3] in DOCS:
        return f"/docs/{page[:-3]}" + (f"#{anchor}" if anchor else "")
    if not page:
        return f"#{anchor}"
    if "://" not in page:
        return None
    return target


def _anchor(match: re.Match[str]) -> str:
    text, target = match.group(1), match.group(2)
    href = _link(html.unescape(target))
    if href is None:
        return f"{text} (docs/{html.escape(target.partition('#')[0])})"
    return f'<a href="{html.escape(href)}">{text}</a>'


def _inline(text: str) -> str:
    """One line's Markdown (code, links, images, bold, italics) as HTML, escaped."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        part = html.escape(part, quote=False)
        part = re.sub(r"!\[([^\]]*)\]\(([^)]*)\)", r"<em>[figure: \1]</em>", part)
        part = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", _anchor, part)
        part = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", part)
        out.append(part)
    return "".join(out)


def _table(rows: list[str]) -> str:
    cells = [[c.strip() for c in r.strip().strip("|").split("|")] for r in rows]
    body = [r for r in cells[1:] if not all(set(c) <= set("-: ") for c in r)]
    head = "".join(f"<th scope='col'>{_inline(c)}</th>" for c in cells[0])
    rows_ = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows_}</tbody></table>"


def body(markdown: str) -> str:
    """The HTML of ``markdown`` (the subset the docs use).

    >>> print(body("## 1. Why positions\\n\\nSee `PE[p]` in [RoPE](rope.md#1-pairs)."))
    <h2 id="1-why-positions">1. Why positions</h2>
    <p>See <code>PE[p]</code> in <a href="/docs/rope#1-pairs">RoPE</a>.</p>
    >>> print(body("The [explorer](explore.md) draws it."))
    <p>The explorer (docs/explore.md) draws it.</p>
    """
    out: list[str] = []
    lines = markdown.splitlines()
    paragraph: list[str] = []
    items: list[str] = []
    kind = ""

    def flush() -> None:
        nonlocal kind
        if paragraph:
            out.append(f"<p>{_inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if items:
            tag = "ol" if kind == "ol" else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + f"</{tag}>")
            items.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            code = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                code.append(lines[i])
                i += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(code).strip(chr(10)))}</code></pre>")
        elif match := re.match(r"(#{1,6}) (.*)", line):
            flush()
            level, text = len(match.group(1)), match.group(2).strip()
            out.append(f'<h{level} id="{slug(text)}">{_inline(text)}</h{level}>')
        elif stripped.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(lines[i])
                i += 1
            out.append(_table(rows))
            continue
        elif line.startswith("    ") and not items and not paragraph:
            code = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                code.append(lines[i][4:])
                i += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(code).rstrip())}</code></pre>")
            continue
        elif match := re.match(r"(- |\d+\. )(.*)", line):
            if paragraph or (items and kind != ("ol" if match.group(1)[0].isdigit() else "ul")):
                flush()
            kind = "ol" if match.group(1)[0].isdigit() else "ul"
            items.append(match.group(2))
        elif items and line.startswith("  ") and stripped:
            items[-1] += " " + stripped
        elif not stripped:
            flush()
        else:
            if items:
                flush()
            paragraph.append(stripped)
        i += 1
    flush()
    return "\n".join(out)


def page(name: str) -> str:
    """Page ``name`` of :data:`DOCS` as a whole HTML document (``MissingPage`` otherwise)."""
    markdown = source(name)
    title = next((m.group(1) for m in re.finditer(r"^# (.*)$", markdown, re.M)), name)
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)} · posenc explore</title>\n"
        '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">\n'
        '<link rel="stylesheet" href="/static/explore.css">\n</head>\n<body class="doc">\n'
        '<p><a href="/#path">← back to the explorer</a> · '
        + " · ".join(f'<a href="/docs/{d}">{d}</a>' for d in DOCS)
        + "</p>\n<main>\n"
        + body(markdown)
        + "\n</main>\n</body>\n</html>\n"
    )
