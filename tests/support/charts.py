"""Reading a page's Plotly charts: the traces and layout plotly.js is given for one chart."""

from __future__ import annotations

import json


def plotted_figure(html: str, dom_id: str) -> tuple[list[dict], dict]:
    """The traces and layout plotly.js is given for one chart, read from the page's script."""
    start = html.index(f'Plotly.newPlot(                        "{dom_id}",')
    decoder = json.JSONDecoder()
    body = html[html.index("[", start) :]
    traces, end = decoder.raw_decode(body)
    rest = body[end:]
    layout, _ = decoder.raw_decode(rest[rest.index("{") :])
    return traces, layout


def plotted_traces(html: str, dom_id: str) -> list[dict]:
    return plotted_figure(html, dom_id)[0]
