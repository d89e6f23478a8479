"""The report's one self-contained HTML page: figures embedded as base64 PNG data URIs, no external links."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Figure", "render_page"]


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
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left}"
)


def render_page(title: str, summary: Sequence[tuple[str, str]], figures: Sequence[Figure]) -> str:
    """The HTML text: a summary table, then every figure as ``<img src="data:image/png;base64,...">``.

    Examples
    --------
    >>> page = render_page("r", [("alpha", "0.1")], [Figure("a.png", "A", "cap", b"png")])
    >>> page.count("<img "), "data:image/png;base64,cG5n" in page
    (1, True)
    """
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in summary)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<table>{rows}</table>",
    ]
    for fig in figures:
        data = base64.b64encode(fig.png).decode("ascii")
        parts.append(
            f'<figure id="{html.escape(fig.name)}"><h2>{html.escape(fig.title)}</h2>'
            f'<img src="data:image/png;base64,{data}" alt="{html.escape(fig.title)}">'
            f"<figcaption>{html.escape(fig.caption)} (also written as {html.escape(fig.name)})</figcaption></figure>"
        )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
