"""Export and share from the pages (issue #18): toolbar URLs carry the page's filters and
answer the API's files; the spreadsheet-links page creates, lists and revokes tokens;
time range presets; export file names carry the period."""

from __future__ import annotations

import datetime as dt
import html
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.http import QueryDict
from django.test import Client
from django.urls import reverse

from core import timerange

pytestmark = pytest.mark.django_db


def body_of(response) -> bytes:
    if response.streaming:
        return b"".join(response.streaming_content)
    return response.content


def toolbar_links(body: str) -> dict[str, str]:
    """The export toolbar's hrefs by button text."""
    found = re.search(r'<div class="export-toolbar".*?</div>', body, re.S)
    assert found, "the page has no export toolbar"
    pairs = re.findall(r'<a [^>]*href="([^"]+)"[^>]*>([^<]+)</a>', found.group(0))
    return {text: html.unescape(href) for href, text in pairs}


def test_pool_list_exports_the_api_list_with_the_page_filters(client_for, planner, demo_fleet):
    from inventory.models import Cluster

    cluster = Cluster.objects.get(name="train-hetero")
    client = client_for(planner)
    page = client.get(f"/inventory/pools/?cluster={cluster.pk}&page=1")
    links = toolbar_links(page.content.decode())
    assert set(links) == {"Export CSV", "Export XLSX", "Spreadsheet link"}
    csv_url = urlsplit(links["Export CSV"])
    assert csv_url.path == "/api/v1/pools/"
    assert parse_qs(csv_url.query) == {"cluster": [str(cluster.pk)], "format": ["csv"]}

    from_button = client.get(links["Export CSV"])
    from_api = client.get(f"/api/v1/pools/?cluster={cluster.pk}", HTTP_ACCEPT="text/csv")
    assert from_button.status_code == 200
    assert body_of(from_button) == body_of(from_api)
    every_pool = client.get("/api/v1/pools/?format=csv")
    assert from_button.get("X-Export-Rows") != every_pool.get("X-Export-Rows")

    share = urlsplit(links["Spreadsheet link"])
    assert share.path == reverse("frontend:spreadsheet-links")
    assert parse_qs(share.query)["url"] == [f"/api/v1/pools/?cluster={cluster.pk}"]


def test_accelerator_list_filter_is_renamed_for_the_api(client_for, viewer, demo_fleet):
    page = client_for(viewer).get("/inventory/accelerators/?name=H100")
    query = parse_qs(urlsplit(toolbar_links(page.content.decode())["Export CSV"]).query)
    assert query["name__icontains"] == ["H100"]


def signed_in(user) -> Client:
    """A form-posting browser client (the API client posts JSON)."""
    browser = Client()
    browser.force_login(user)
    return browser


def test_spreadsheet_link_page_creates_lists_and_revokes(viewer, client):
    from exports.models import ExportToken

    browser = signed_in(viewer)
    form = browser.get("/spreadsheet-links/?url=/api/v1/sites/%3Fname%3DFrank&name=Sites")
    assert form.status_code == 200
    body = form.content.decode()
    assert 'value="/api/v1/sites/?name=Frank"' in body and "IMPORTDATA" not in body

    created = browser.post(
        "/spreadsheet-links/",
        {
            "name": "Sites",
            "url": "/api/v1/sites/?name=Frank",
            "format": "csv",
            "expires_in_days": 7,
        },
    )
    assert created.status_code == 201, created.content.decode()[-3000:]
    link = re.search(
        r'id="created-link" type="text" readonly value="([^"]+)"', created.content.decode()
    )
    assert link, "the new link is shown once"
    assert "IMPORTDATA" in created.content.decode() and "From Web" in created.content.decode()
    token = ExportToken.objects.get(owner=viewer)
    assert (token.path, token.query, token.state) == ("/api/v1/sites/", "name=Frank", "active")

    path = urlsplit(link.group(1)).path
    fetched = client.get(path)  # no login
    assert fetched.status_code == 200
    assert body_of(fetched).decode().splitlines()[0].startswith("id,")

    listed = browser.get("/spreadsheet-links/").content.decode()
    assert "Sites" in listed and "name=Frank" in listed and link.group(1) not in listed

    revoked = browser.post(f"/spreadsheet-links/{token.pk}/revoke/")
    assert revoked.status_code == 302
    assert client.get(path).status_code == 410


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("url", "/inventory/sites/", "Must be an API list"),
        ("expires_in_days", "100000", "At most"),
        ("expires_in_days", "0", "greater than or equal to 1"),
        ("name", "", "may not be blank"),
        ("format", "pdf", "not a valid choice"),
    ],
)
def test_spreadsheet_link_page_refuses_bad_input_naming_the_field(viewer, field, value, message):
    from exports.models import ExportToken

    data = {"name": "x", "url": "/api/v1/sites/", "format": "csv", "expires_in_days": "30"}
    data[field] = value
    answer = signed_in(viewer).post("/spreadsheet-links/", data)
    assert answer.status_code == 400
    body = html.unescape(answer.content.decode())
    assert f"{field}: " in body and message in body
    assert not ExportToken.objects.exists()


def test_someone_elses_link_cannot_be_revoked(viewer, planner):
    from exports import services

    token, _ = services.create_token(owner=planner, name="mine", url="/api/v1/sites/")
    assert signed_in(viewer).post(f"/spreadsheet-links/{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.state == "active"


def test_spreadsheet_links_need_login(client):
    answer = client.get("/spreadsheet-links/")
    assert answer.status_code == 302 and "/accounts/login/" in answer["Location"]
    assert client.post("/spreadsheet-links/", {"name": "x"}).status_code == 302


def test_presets_are_calendar_ranges_with_end_exclusive():
    today = dt.date(2026, 11, 23)
    ranges = {r.key: r for r in timerange.presets(today, dt.date(2024, 6, 1), dt.date(2024, 8, 31))}
    tomorrow = dt.date(2026, 11, 24)
    assert (ranges["last-7"].start, ranges["last-7"].end) == (dt.date(2026, 11, 17), tomorrow)
    assert (ranges["last-90"].end - ranges["last-90"].start).days == 90
    assert (ranges["this-month"].start, ranges["this-month"].end) == (
        dt.date(2026, 11, 1),
        tomorrow,
    )
    assert (ranges["last-quarter"].start, ranges["last-quarter"].end) == (
        dt.date(2026, 7, 1),
        dt.date(2026, 10, 1),
    )
    assert ranges["year-to-date"].start == dt.date(2026, 1, 1)
    assert (ranges["data"].start, ranges["data"].end) == (dt.date(2024, 6, 1), dt.date(2024, 9, 1))
    january = {r.key: r for r in timerange.presets(dt.date(2027, 1, 15))}
    assert (january["last-quarter"].start, january["last-quarter"].end) == (
        dt.date(2026, 10, 1),
        dt.date(2027, 1, 1),
    )
    assert "data" not in january  # no data, no "fit to data"


def test_fit_to_data_is_capped_to_the_longest_period():
    fit = timerange.data_range(dt.date(2015, 1, 1), dt.date(2026, 1, 1))
    assert fit.end == dt.date(2026, 1, 2)
    assert (fit.end - fit.start).days == timerange.MAX_RANGE_DAYS


def test_preset_links_keep_the_other_filters():
    params = QueryDict("group_by=team&start=2024-01-01&end=2024-02-01&page=3")
    ranges = timerange.presets(dt.date(2026, 11, 23))
    links = timerange.preset_links(params, ranges, (ranges[0].start, ranges[0].end))
    first = parse_qs(links[0]["url"].lstrip("?"))
    assert first == {"group_by": ["team"], "start": ["2026-11-17"], "end": ["2026-11-24"]}
    assert [link["current"] for link in links] == [True] + [False] * (len(links) - 1)


@pytest.mark.parametrize(
    ("query", "filename"),
    [
        ("start=2026-11-01&end=2026-12-01", "usage-records_2026-11-01_2026-11-30.csv"),
        (
            "start=2026-11-01T00:00:00Z&end=2026-11-30T12:00:00Z",
            "usage-records_2026-11-01_2026-11-30.csv",
        ),
        ("start=2026-11-01", "usage-records_from_2026-11-01.csv"),
        ("team=a", "usage-records.csv"),
    ],
)
def test_api_downloads_are_named_by_list_and_period(client_for, viewer, query, filename):
    answer = client_for(viewer).get(f"/api/v1/usage-records/?{query}&format=csv")
    assert answer.status_code == 200
    assert answer["Content-Disposition"] == f'attachment; filename="{filename}"'


def test_chart_downloads_carry_the_period(client_for, viewer):
    import frontend.dashboards.usage  # noqa: F401 - registers the usage charts

    answer = client_for(viewer).get("/charts/usage-breakdown.xlsx?start=2024-06-01&end=2024-09-01")
    assert answer.status_code == 200
    assert 'filename="usage-breakdown_2024-06-01_2024-08-31.xlsx"' in answer["Content-Disposition"]


def test_analysis_scope_breadcrumb_goes_back_up(client, viewer, fleet_analysis):
    cluster_id = fleet_analysis.results["clusters"][0]["cluster_id"]
    client.force_login(viewer)
    body = client.get(f"/analyses/{fleet_analysis.pk}/?scope=cluster-{cluster_id}")
    crumbs = re.search(r'<nav class="breadcrumbs".*?</nav>', body.content.decode(), re.S)
    assert f'href="/analyses/{fleet_analysis.pk}/"' in crumbs.group(0)  # one level up
    names = re.findall(r">([^<>]+)</(?:a|li)>", crumbs.group(0))
    assert len(names) == len(set(names)) == 3
