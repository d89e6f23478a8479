"""The report's one self-contained HTML page: figures embedded as base64 PNG data URIs, no external links."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """One figure of the report: file name, title, caption and PNG bytes."""

    name: str
    title: str
    caption: str
    png: bytes


_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}"
    "figure{margin:2rem 0}img{max-width:100%;border:1px solid #ddd}figcaption{font-size:.9rem;color:#444}"
    "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left}"
    ".verdict{font-size:1.1rem;padding:.6rem .8rem;border-left:.4rem solid #888;background:#f6f6f6}"
    ".verdict.inside,.verdict.above{border-color:#2a7d2a}.verdict.below{border-color:#b00020}"
)


def _table(rows: Sequence[tuple[str, str]], table_id: str) -> str:
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f'<table id="{table_id}">{cells}</table>'


def render_page(
    title: str,
    summary: Sequence[tuple[str, str]],
    figures: Sequence[Figure],
    *,
    verdict: tuple[str, str] | None = None,
    host: Sequence[tuple[str, str]] = (),
    tie_notes: Sequence[str] = (),
) -> str:
    """The HTML text: the verdict, the summary and host tables, then every figure as an embedded PNG.

    ``verdict`` is ``(status, text)`` for ``<p id="verdict" class="verdict STATUS">``; ``summary``
    and ``host`` are ``(name, value)`` rows (tables ``id="summary"``/``id="host"``); ``tie_notes``
    lists the levels above their band after the coverage figure (``id="ties"``).

    Examples
    --------
    >>> page = render_page("r", [("alpha", "0.1")], [Figure("a.png", "A", "cap", b"png")],
    ...                    verdict=("inside", "consistent"), host=[("framework", "llamaindex")])
    >>> page.count("<img "), "data:image/png;base64,cG5n" in page, '<p id="verdict" class="verdict inside">' in page
    (1, True, True)
    """
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if verdict is not None:
        status, text = verdict
        parts.append(f'<p id="verdict" class="verdict {html.escape(status)}">{html.escape(text)}.</p>')
    parts.append(_table(summary, "summary"))
    if host:
        parts.append("<h2>Host</h2>" + _table(host, "host"))
    notes = "".join(f"<li>{html.escape(n)}.</li>" for n in tie_notes)
    ties = f'<section id="ties"><h2>Levels above their band</h2><ul>{notes}</ul></section>' if tie_notes else ""
    for fig in figures:
        data = base64.b64encode(fig.png).decode("ascii")
        parts.append(
            f'<figure id="{html.escape(fig.name)}"><h2>{html.escape(fig.title)}</h2>'
            f'<img src="data:image/png;base64,{data}" alt="{html.escape(fig.title)}">'
            f"<figcaption>{html.escape(fig.caption)} (also written as {html.escape(fig.name)})</figcaption></figure>"
        )
        if fig.name == "coverage.png" and ties:
            parts.append(ties)
            ties = ""
    if ties:
        parts.append(ties)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
