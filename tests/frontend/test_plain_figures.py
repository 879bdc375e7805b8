"""The Usage, Costs and planner charts are written as plain plotly.js JSON, which nothing
validates in Python on the page's path (`frontend.charts.plain_figure`): every figure they
embed must still be a valid Plotly figure, each trace on an axis its layout has, one panel
per currency (data: tests/support/usage_data.py; two currencies, EUR and USD)."""

from __future__ import annotations

import json
import re

import plotly.graph_objects as go
import pytest
from django.urls import reverse

from tests.support import usage_data
from tests.support.usage_data import PERIOD_END, PERIOD_START

pytestmark = pytest.mark.django_db

PERIOD = {"start": PERIOD_START.isoformat(), "end": PERIOD_END.isoformat()}
PAGES = [
    ("frontend:usage", {}),
    ("frontend:usage", {"group_by": "pool", "granularity": "day"}),
    ("frontend:usage", {"group_by": "team", "granularity": "month"}),
    ("frontend:costs", {}),
    ("frontend:costs", {"group_by": "site", "granularity": "week", "idle_rule": "even"}),
    ("frontend:costs", {"group_by": "pool", "granularity": "month", "idle_rule": "none"}),
]


@pytest.fixture
def usage(demo_fleet):
    from accounting.rollups import refresh_usage_rollups

    usage_data.load_usage()
    refresh_usage_rollups()


def page_figures(html: str) -> dict[str, dict]:
    """Every figure the page hands to Plotly.newPlot, by chart id: {"data", "layout"}."""
    decoder = json.JSONDecoder()
    figures = {}
    for call in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', html):
        data, end = decoder.raw_decode(html, call.end())
        layout, _ = decoder.raw_decode(html, html.index("{", end))
        figures[call.group(1)] = {"data": data, "layout": layout}
    return figures


def axis_key(reference: str) -> str:
    """A trace's axis reference (``x``, ``y2``) as the layout names it (``xaxis``, ``yaxis2``)."""
    return f"{reference[0]}axis{reference[1:]}"


@pytest.mark.parametrize(("url", "params"), PAGES)
def test_every_dashboard_figure_is_a_valid_plotly_figure(client, viewer, usage, url, params):
    client.force_login(viewer)
    response = client.get(reverse(url), {**PERIOD, **params})
    assert response.status_code == 200
    figures = page_figures(response.content.decode())
    assert len(figures) == 3
    for dom_id, figure in figures.items():
        # Plotly's validators raise on any property plotly.js does not know.
        validated = go.Figure(data=figure["data"], layout=figure["layout"])
        assert validated.layout.template.layout.font.color, dom_id  # the app's template
        assert figure["layout"]["title"]["text"], dom_id
        for trace in figure["data"]:
            for reference in (trace.get("xaxis", "x"), trace.get("yaxis", "y")):
                assert axis_key(reference) in figure["layout"] or reference in ("x", "y"), dom_id


def test_money_charts_draw_one_titled_panel_per_currency(client, viewer, usage):
    client.force_login(viewer)
    params = {**PERIOD, "granularity": "week", "group_by": "site"}
    figures = page_figures(client.get(reverse("frontend:costs"), params).content.decode())
    breakdown = figures["chart-costs-breakdown"]
    panels = sorted({(t["xaxis"], t["yaxis"]) for t in breakdown["data"]})
    assert panels == [("x", "y"), ("x2", "y2")]
    layout = breakdown["layout"]
    assert [a["text"] for a in layout["annotations"]] == ["EUR", "USD"]
    assert [layout[key]["title"]["text"] for key in ("yaxis", "yaxis2")] == [
        "Cost (EUR)",
        "Cost (USD)",
    ]
    # The x title goes on every panel, the legend shows each part once.
    assert {layout[key]["title"]["text"] for key in ("xaxis", "xaxis2")} == {"Site"}
    assert sum(t["showlegend"] for t in breakdown["data"]) == 3
    chargeback = figures["chart-costs-chargeback"]["layout"]
    # Stacked panels (one team axis per currency), tall enough for every team.
    assert chargeback["yaxis"]["domain"][0] > chargeback["yaxis2"]["domain"][1]
    assert chargeback["height"] >= 320
