"""The inspector as one self-contained HTML file (the model as JSON in a ``<script
type="application/json">`` tag, nothing fetched), or, served, the same page without the data.

Run files and datasets are untrusted: the JSON is written with ``<``, ``>`` and ``&`` escaped,
and the script puts data into the page only as text nodes, never as markup."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).parent
#: What JSON must not hold verbatim inside a script element.
_SCRIPT_UNSAFE = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def script_json(data: Any) -> str:
    """``data`` as JSON safe inside a script element: JSON.parse reads it back unchanged.

    >>> script_json({"q": "</script><b>"})
    '{"q": "\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e"}'
    """
    text = json.dumps(data, ensure_ascii=False)
    return "".join(_SCRIPT_UNSAFE.get(char, char) for char in text)


def render_page(model: dict[str, Any] | None, title: str | None = None) -> str:
    """The whole page for ``model``; with no model, the page a server sends, whose script asks for
    its data."""
    style = (ASSETS / "inspector.css").read_text(encoding="utf-8")
    script = (ASSETS / "inspector.js").read_text(encoding="utf-8")
    heading = model["title"] if model is not None else title or "memsys-bench inspector"
    data = (
        [f'<script type="application/json" id="data">{script_json(model)}</script>']
        if model is not None
        else []
    )
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html.escape(heading)}</title>",
            f"<style>{style}</style>",
            "</head><body>",
            '<header><h1 id="title"></h1><nav id="nav"></nav></header>',
            '<main id="view"></main>',
            *data,
            f"<script>{script}</script>",
            "</body></html>",
        ]
    )
