"""Server-side Plotly charts that carry their numbers: every chart has a "download data" link.

A chart is registered once with a key, a title, a data function (request → DataFrame with
unit-suffixed column names) and a figure function (DataFrame → plotly Figure). A page calls
`render_chart(key, request)` and puts the result in its template with
`{% include "frontend/includes/chart.html" %}`; `/charts/<key>.csv|.xlsx` returns the same
frame for the same query string, so the file always matches what the chart showed.

Data functions read precomputed results (analyses, accounting selectors), never loop per row.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_safe

from access.pages import role_required
from core.frames import json_rows
from core.tabular.columns import dated_filename
from core.tabular.renderers import CSVRenderer, XLSXRenderer

# A figure as plotly.js reads it ({"data": [...], "layout": {...}}): what the dashboards'
# cold path builds, where graph objects validate every property (~10 ms a figure).
PlainFigure = dict[str, Any]
Figure = go.Figure | PlainFigure
DataFunction = Callable[[HttpRequest], pd.DataFrame]
FigureFunction = Callable[[pd.DataFrame], Figure]

# One palette for every page: the five factors keep their colour across charts.
FACTOR_COLOURS = {
    "energy": "#2a9d8f",
    "mfu": "#e76f51",
    "scaling": "#f4a261",
    "effective_time": "#8d99ae",
    "utilization": "#264653",
}
SERIES_COLOURS = ["#1f5fa8", "#e76f51", "#2a9d8f", "#f4a261", "#6d597a", "#8d99ae", "#264653"]
# plotly_white's layout only: its per-trace defaults cost ~20 ms of validation per figure.
APP_TEMPLATE = go.layout.Template(layout=pio.templates["plotly_white"].layout)
# The default of every figure: set at creation for free, where update_layout(template=...)
# validates the whole template again (~5 ms a figure).
pio.templates["fleetwise"] = APP_TEMPLATE
pio.templates.default = "fleetwise"
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["lasso2d"]}


@dataclass(frozen=True)
class ChartSpec:
    key: str
    title: str
    data: DataFunction
    figure: FigureFunction
    description: str = ""


REGISTRY: dict[str, ChartSpec] = {}


def register(
    key: str, title: str, data: DataFunction, figure: FigureFunction, description: str = ""
) -> ChartSpec:
    """Add a chart; keys are unique across the app (they name the download files too)."""
    if key in REGISTRY and REGISTRY[key].data is not data:
        raise ValueError(f"chart key {key!r} is registered twice")
    spec = ChartSpec(key, title, data, figure, description)
    REGISTRY[key] = spec
    return spec


# (path, value) of the app's look; set leaf by leaf, so what a figure set before is kept.
LOOK: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("title", "x"), 0),
    (("title", "xanchor"), "left"),
    (("title", "font", "size"), 16),
    (("font", "family"), "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"),
    (("font", "size"), 13),
    (("margin", "l"), 60),
    (("margin", "r"), 20),
    (("margin", "t"), 60),
    (("margin", "b"), 50),
    (("hoverlabel", "namelength"), -1),
    (("legend", "orientation"), "h"),
    (("legend", "y"), -0.2),
    (("colorway",), SERIES_COLOURS),
)


def _set_leaf(node: Any, path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        node = getattr(node, name)
    setattr(node, path[-1], value)


@functools.cache
def _template_json() -> dict[str, Any]:
    """The app template as JSON, shared by every plain figure (serialised, never changed)."""
    return APP_TEMPLATE.to_plotly_json()


def plain_figure(*traces: dict[str, Any], **layout: Any) -> PlainFigure:
    """A figure as plotly.js JSON with the app's template, as a graph-objects figure has it.

    Nothing validates it in Python: tests pass each dashboard's plain figures through
    ``go.Figure`` (tests/frontend/test_plain_figures.py).
    """
    return {"data": list(traces), "layout": {"template": _template_json(), **layout}}


def _set_in(node: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        node = node.setdefault(name, {})
    node[path[-1]] = value


def _plain_axes(layout: dict[str, Any], letter: str) -> list[str]:
    """Layout keys of the figure's x or y axes (``xaxis``, ``xaxis2``…), as select_xaxes."""
    keys = [key for key in layout if re.fullmatch(f"{letter}axis[0-9]*", key)]
    return keys or [f"{letter}axis"]


def _styled_plain(figure: PlainFigure, title: str, x_title: str, y_title: str) -> PlainFigure:
    layout = figure["layout"]
    _set_in(layout, ("title", "text"), title)
    for path, value in LOOK:
        _set_in(layout, path, value)
    for letter, text in (("x", x_title), ("y", y_title)):
        for key in _plain_axes(layout, letter) if text else ():
            _set_in(layout, (key, "title", "text"), text)
    return figure


def styled(figure: Figure, title: str, x_title: str = "", y_title: str = "") -> Figure:
    """The app's look: a title, axis titles with units, readable hover, no outside fonts."""
    if isinstance(figure, dict):
        return _styled_plain(figure, title, x_title, y_title)
    # Attribute by attribute: update_layout parses every key as a path (~5 ms a figure).
    layout = figure.layout
    layout.title.text = title
    for path, value in LOOK:
        _set_leaf(layout, path, value)
    for axis in figure.select_xaxes() if x_title else ():
        axis.title.text = x_title
    for axis in figure.select_yaxes() if y_title else ():
        axis.title.text = y_title
    return figure


def chart_request(request: HttpRequest, **params: Any) -> HttpRequest:
    """The request as a chart sees it: only the parameters that select the chart's data.

    Download links repeat this query string, so the file always matches the chart shown.
    """
    clone = copy.copy(request)
    query = QueryDict(mutable=True)
    for key, value in params.items():
        if value not in (None, ""):
            query[key] = str(value)
    clone.GET = query
    return clone


def download_urls(key: str, request: HttpRequest | None) -> dict[str, str]:
    query = request.GET.urlencode() if request is not None else ""
    suffix = f"?{query}" if query else ""
    return {
        fmt: reverse("frontend:chart-data", kwargs={"key": key, "fmt": fmt}) + suffix
        for fmt in ("csv", "xlsx")
    }


def figure_html(figure: Figure, dom_id: str) -> SafeString:
    """The figure as a div plus its script; plotly.js itself comes from our static files."""
    # validate=False: a graph-objects figure is valid already, a plain one is written as is.
    html = pio.to_html(
        figure,
        validate=False,
        full_html=False,
        include_plotlyjs=False,
        div_id=dom_id,
        config=PLOTLY_CONFIG,
    )
    # Plotly writes the data as JSON with <, > and / escaped (tests/config/test_bandit.py).
    return mark_safe(html)  # noqa: S308  # nosec B308 B703


def render_chart(
    key: str, request: HttpRequest, frame: pd.DataFrame | None = None
) -> dict[str, Any]:
    """Template context for one chart: title, figure HTML (or an empty note) and download links."""
    spec = REGISTRY[key]
    frame = spec.data(request) if frame is None else frame
    empty = frame is None or frame.empty
    return {
        "key": key,
        "title": spec.title,
        "description": spec.description,
        "dom_id": f"chart-{key}",
        "empty": empty,
        "html": "" if empty else figure_html(spec.figure(frame), f"chart-{key}"),
        "downloads": download_urls(key, request),
        "rows": 0 if empty else len(frame),
    }


def _table_body(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return json_rows(frame) if not frame.empty else []


@role_required()
@require_safe
def chart_data(request: HttpRequest, key: str, fmt: str) -> HttpResponse:
    """The numbers behind a chart, for the same query string, as CSV or XLSX."""
    spec = REGISTRY.get(key)
    if spec is None or fmt not in ("csv", "xlsx"):
        raise Http404("no such chart or format")
    try:
        frame = spec.data(request)
    except BadRequest as exc:  # a bad query string: say which field, as the page does
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    frame = pd.DataFrame() if frame is None else frame
    renderer = CSVRenderer() if fmt == "csv" else XLSXRenderer()
    view = SimpleNamespace(export_columns=[str(c) for c in frame.columns], export_filename=key)
    response = HttpResponse(content_type=renderer.media_type)
    body = renderer.render(
        _table_body(frame), renderer_context={"view": view, "response": response}
    )
    response.content = body
    name = dated_filename(key, request.GET)
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response
