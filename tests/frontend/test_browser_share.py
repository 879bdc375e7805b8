"""Export, share, time range and drill-down in a real headless Chromium (issue #18): export
buttons download the API's files, a spreadsheet link made on its page is fetched without a
login and refused once revoked, a preset sets every chart's range, a chart zoom sets the
page's period, and a click on a chart mark opens that scope's page."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import openpyxl
import pytest

from tests.support import usage_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NARROW = "start=2024-07-01&end=2024-08-01"
# A first (uncached) dashboard under a loaded CI machine; not a performance check.
SLOW_PAGE_MS = 30_000


@pytest.fixture
def usage_records(browser_planner):
    from accounting.rollups import refresh_usage_rollups
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    usage_data.load_usage(count=60)
    refresh_usage_rollups()


def download(page, name: str) -> tuple[str, bytes]:
    """Click an export button; the saved file's suggested name and bytes."""
    with page.expect_download() as info:
        page.get_by_role("link", name=name).click()
    saved = info.value
    return saved.suggested_filename, Path(saved.path()).read_bytes()


def sheet_values(data: bytes) -> list[tuple]:
    return list(openpyxl.load_workbook(io.BytesIO(data), read_only=True).worksheets[0].values)


def test_export_buttons_download_the_api_files(browser_page, usage_records):
    from inventory.models import Cluster

    page = browser_page
    page.set_default_timeout(SLOW_PAGE_MS)
    cluster = Cluster.objects.get(name="train-hetero")
    page.goto(f"/inventory/pools/?cluster={cluster.pk}")
    name, body = download(page, "Export CSV")
    api = page.request.get(f"/api/v1/pools/?cluster={cluster.pk}&format=csv")
    assert api.ok and body == api.body()
    assert name == "pools.csv" and b"train-hetero" in body

    page.goto(f"/usage/?{NARROW}&group_by=team")
    name, body = download(page, "Export CSV")
    query = f"{NARROW}&granularity=week&group_by=team"
    api = page.request.get(f"/api/v1/accounting/utilization/rows/?{query}&format=csv")
    assert api.ok and body == api.body()
    assert name == "utilization_2024-07-01_2024-07-31.csv"
    name, body = download(page, "Export XLSX")
    api = page.request.get(f"/api/v1/accounting/utilization/rows/?{query}&format=xlsx")
    # An XLSX embeds its creation time: the cells are compared, not the bytes.
    assert sheet_values(body) == sheet_values(api.body())
    assert len(sheet_values(body)) > 2


def test_a_spreadsheet_link_made_on_its_page_is_fetched_without_login_and_revoked(
    browser_page, chromium, live_server, usage_records
):
    page = browser_page
    page.set_default_timeout(SLOW_PAGE_MS)
    page.goto("/inventory/sites/?name=Frankfurt")
    page.get_by_role("link", name="Spreadsheet link").click()
    page.wait_for_url(lambda url: "/spreadsheet-links/" in url)
    assert page.get_by_label("API list").input_value() == "/api/v1/sites/?name=Frankfurt"
    page.get_by_label("Name").fill("Frankfurt sites")
    page.get_by_role("button", name="Create link").click()
    link = page.get_by_label("The new link").input_value()
    assert "/api/v1/export/" in link
    assert "IMPORTDATA" in page.inner_text(".created-link")

    anonymous = chromium.new_context(base_url=live_server.url)
    try:
        fetched = anonymous.request.get(link)
        assert fetched.status == 200
        assert fetched.body() == page.request.get("/api/v1/sites/?name=Frankfurt&format=csv").body()
        assert b"Frankfurt DC1" in fetched.body() and b"Ulanqab" not in fetched.body()

        page.goto("/spreadsheet-links/")
        row = page.locator("tr", has_text="Frankfurt sites")
        assert "active" in row.inner_text()
        page.get_by_role("link", name="Revoke Frankfurt sites").click()
        page.get_by_role("button", name="Revoke the link").click()  # the confirmation page
        page.wait_for_selector(".message-success")
        assert "revoked" in page.locator("tr", has_text="Frankfurt sites").inner_text()
        assert anonymous.request.get(link).status == 410
    finally:
        anonymous.close()


def date_axis_ranges(page) -> dict[str, list[str]]:
    """Every chart's date x-axis range, by chart id (charts without a time axis left out)."""
    return page.evaluate(
        """() => Object.fromEntries(Array.from(document.querySelectorAll('.plotly-graph-div'))
            .filter(gd => gd._fullLayout.xaxis && gd._fullLayout.xaxis.type === 'date')
            .map(gd => [gd.id, gd._fullLayout.xaxis.range.map(v => String(v).slice(0, 10))]))"""
    )


def wait_for_charts(page, keys) -> None:
    for key in keys:
        page.wait_for_selector(f"#chart-{key} .main-svg")
    page.wait_for_load_state("load")


def test_a_preset_sets_every_charts_range_and_a_zoom_sets_the_period(browser_page, usage_records):
    page = browser_page
    page.set_default_timeout(SLOW_PAGE_MS)
    page.goto(f"/usage/?{NARROW}&group_by=cluster")
    wait_for_charts(page, ("usage-utilization", "usage-team-heatmap"))
    assert date_axis_ranges(page) == {"chart-usage-utilization": ["2024-07-01", "2024-08-01"]}

    page.get_by_role("link", name="Fit to data").click()
    page.wait_for_url(lambda url: "start=2024-06-01" in url)
    wait_for_charts(page, ("usage-utilization", "usage-team-heatmap"))
    query = parse_qs(urlsplit(page.url).query)
    assert query["group_by"] == ["cluster"]  # the other filters stay
    period = [query["start"][0], query["end"][0]]
    assert period[0] == "2024-06-01" and period[1] > "2024-08-20"
    assert date_axis_ranges(page) == {"chart-usage-utilization": period}
    weeks = page.evaluate("() => document.getElementById('chart-usage-team-heatmap').data[0].x")
    assert min(weeks) < "2024-06-08" and max(weeks) > "2024-08-20"
    assert page.get_by_role("link", name="Fit to data").get_attribute("aria-current") == "true"

    page.evaluate(
        """() => Plotly.relayout('chart-usage-utilization',
            {'xaxis.range[0]': '2024-07-03 06:00', 'xaxis.range[1]': '2024-07-20 12:00'})"""
    )
    page.wait_for_url(lambda url: "start=2024-07-03" in url)
    query = parse_qs(urlsplit(page.url).query)
    assert (query["start"], query["end"], query["group_by"]) == (
        ["2024-07-03"],
        ["2024-07-21"],
        ["cluster"],
    )
    wait_for_charts(page, ("usage-utilization",))
    assert date_axis_ranges(page) == {"chart-usage-utilization": ["2024-07-03", "2024-07-21"]}


def test_a_click_on_a_chart_mark_opens_that_scope(browser_page, usage_records):
    from inventory.models import Cluster

    page = browser_page
    page.set_default_timeout(SLOW_PAGE_MS)
    cluster = Cluster.objects.get(name="train-ascend")
    page.goto(f"/usage/?{NARROW}")
    wait_for_charts(page, ("usage-breakdown",))
    # The tallest part of train-ascend's stacked bar: (trace, point) indices.
    trace, index = page.evaluate(
        """() => {
            const chart = document.getElementById('chart-usage-breakdown');
            const index = Array.from(chart.data[0].x).indexOf('train-ascend');
            const heights = chart.calcdata.map(points => points[index].s);
            return [heights.indexOf(Math.max(...heights)), index];
        }"""
    )
    bars = page.locator("#chart-usage-breakdown .trace.bars")
    bar = bars.nth(trace).locator(".point").nth(index)
    bar.scroll_into_view_if_needed()
    box = bar.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)  # Plotly clicks the point it hovers: wait for its label first
    page.wait_for_selector("#chart-usage-breakdown .hoverlayer .hovertext")
    page.mouse.click(x, y)
    page.wait_for_url(lambda url: f"cluster={cluster.pk}" in url)
    query = parse_qs(urlsplit(page.url).query)
    assert urlsplit(page.url).path == "/usage/"
    assert query["start"] == ["2024-07-01"] and query["end"] == ["2024-08-01"]
    assert query["group_by"] == ["pool"]
    wait_for_charts(page, ("usage-utilization",))
    names = page.evaluate(
        "() => document.getElementById('chart-usage-utilization').data.map(t => t.name)"
    )
    assert names and all(name.startswith("train-ascend/") for name in names)
    # The breadcrumb goes back up with the same period.
    up = page.get_by_role("navigation", name="Breadcrumb").get_by_role("link")
    assert up.inner_text() == "Usage (all clusters)"
    up.click()
    page.wait_for_url(lambda url: "cluster=" not in url)
    assert "start=2024-07-01" in page.url


def test_a_click_on_a_heatmap_cell_opens_that_weeks_chargeback(browser_page, usage_records):
    page = browser_page
    page.set_default_timeout(SLOW_PAGE_MS)
    page.goto(f"/usage/?{NARROW}")
    wait_for_charts(page, ("usage-team-heatmap",))
    page.locator("#chart-usage-team-heatmap").scroll_into_view_if_needed()
    # The centre of the first cell (first team, first week), from the chart's own axes.
    x, y, week = page.evaluate(
        """() => {
            const chart = document.getElementById('chart-usage-team-heatmap');
            const layout = chart._fullLayout, trace = chart.data[0];
            const box = chart.getBoundingClientRect();
            const week = trace.x[0];
            return [box.left + layout.xaxis._offset + layout.xaxis.d2p(week),
                    box.top + layout.yaxis._offset + layout.yaxis.d2p(trace.y[0]), week];
        }"""
    )
    page.mouse.move(x, y)
    page.wait_for_selector("#chart-usage-team-heatmap .hoverlayer .hovertext")
    page.mouse.click(x, y)
    page.wait_for_url(lambda url: "/costs/" in url)
    query = parse_qs(urlsplit(page.url).query)
    start = dt.date.fromisoformat(week)
    assert query["start"] == [week]
    assert query["end"] == [(start + dt.timedelta(days=7)).isoformat()]
    assert query["granularity"] == ["week"]
    assert page.locator("table.sortable tbody th").count() > 0  # the teams' chargeback rows
