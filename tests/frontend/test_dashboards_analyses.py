"""Fleet overview, analyses pages, the five-factor waterfall and the heterogeneous pool view.

Analyses are computed here without a worker (the engine bridge called in-process, as the
tasks do: tests/support/inline.py), so the pages are checked against the numbers the analysis
stored. `fleet_analysis` and `mixed_pool` are the shared fixtures of tests/support/fixtures.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
import uuid

import pytest

from planner import services
from planner.models import Analysis
from tests.support.charts import plotted_figure, plotted_traces
from tests.support.inline import run_analysis_inline

pytestmark = pytest.mark.django_db

FACTORS = ["energy", "mfu", "scaling", "effective_time", "utilization"]
LABELS = {
    "energy": "Energy (1/PUE)",
    "mfu": "MFU",
    "scaling": "Scaling",
    "effective_time": "Effective training time",
    "utilization": "Utilization",
}


def csv_rows(client, url: str) -> list[dict]:
    response = client.get(url)
    assert response.status_code == 200, url
    return list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))


def download_url(html: str, key: str, fmt: str = "csv") -> str:
    match = re.search(rf'href="(/charts/{key}\.{fmt}[^"]*)"', html)
    assert match, f"no {fmt} download link for {key}"
    return match.group(1).replace("&amp;", "&")


# --- access -----------------------------------------------------------------------------------


@pytest.fixture
def page_urls(fleet_analysis, mixed_pool):
    pk = fleet_analysis.pk
    return {
        "read": [
            "/",
            "/analyses/",
            f"/analyses/{pk}/",
            f"/analyses/{pk}/?scope=pool-{mixed_pool.pk}",
            f"/analyses/{pk}/pools/{mixed_pool.pk}/",
            f"/charts/analyses-waterfall.csv?analysis={pk}",
        ],
        "write": ["/analyses/", f"/analyses/{pk}/recompute/", "/fleet/run-analysis/"],
    }


def test_anonymous_goes_to_login(client, page_urls):
    for url in page_urls["read"]:
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url
    for url in page_urls["write"]:
        response = client.post(url, {"scope": "fleet"})
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url


def test_viewer_reads_but_cannot_start_or_recompute(client, viewer, page_urls, fleet_analysis):
    client.force_login(viewer)
    for url in page_urls["read"]:
        assert client.get(url).status_code == 200, url
    before = Analysis.objects.count()
    for url in page_urls["write"]:
        assert client.post(url, {"scope": "fleet"}).status_code == 403, url
    assert Analysis.objects.count() == before
    fleet_analysis.refresh_from_db()
    assert fleet_analysis.status == "succeeded"
    for url in ["/", "/analyses/", f"/analyses/{fleet_analysis.pk}/"]:
        html = client.get(url).content.decode()
        for control in ["Start analysis", "Recompute", "Run fleet analysis", "/recompute/"]:
            assert control not in html, (url, control)


def test_no_role_user_reads_nothing(client, no_role_user, page_urls):
    client.force_login(no_role_user)
    for url in page_urls["read"]:
        assert client.get(url).status_code == 403, url


# --- starting analyses ---------------------------------------------------------------------------


def test_planner_starts_a_pool_analysis_from_the_form(client, planner, demo_fleet, mixed_pool):
    client.force_login(planner)
    html = client.get("/analyses/").content.decode()
    assert "Start an analysis" in html and f'value="pool:{mixed_pool.pk}"' in html
    response = client.post(
        "/analyses/",
        {
            "scope": "pool",
            "object_id": f"pool:{mixed_pool.pk}",
            "period_start": "2026-01-01",
            "period_end": "2026-01-31",
        },
    )
    analysis = Analysis.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/analyses/{analysis.pk}/"
    assert (analysis.scope, analysis.object_id) == ("pool", mixed_pool.pk)
    assert analysis.period_start == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    # The end day is included: the period runs to midnight after it.
    assert analysis.period_end == dt.datetime(2026, 2, 1, tzinfo=dt.UTC)
    assert analysis.created_by == planner and analysis.status == "queued"

    detail = client.get(response["Location"]).content.decode()
    assert f'data-poll-url="/api/v1/analyses/{analysis.pk}/"' in detail
    assert 'data-done-url="/analyses/' in detail and "frontend/progress.js" in detail
    # The progress bar's JSON contract: the API answers status, progress and error.
    body = client.get(f"/api/v1/analyses/{analysis.pk}/").json()
    assert {"status", "progress", "error"} <= set(body)


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"scope": "pool", "object_id": ""}, "object_id", "Give the id of the pool to analyse."),
        ({"scope": "site", "object_id": "POOL"}, "object_id", "This is a pool; choose a site"),
        (
            {"scope": "fleet", "period_start": "2026-02-01", "period_end": "2026-01-01"},
            "period_end",
            "The period must end on or after its start day.",
        ),
        ({"scope": "fleet", "period_start": ""}, "period_start", "This field is required."),
        ({"scope": "galaxy"}, "scope", "Select a valid choice."),
    ],
)
def test_bad_input_is_shown_next_to_its_field(client, planner, mixed_pool, data, field, message):
    client.force_login(planner)
    payload = {"period_start": "2026-01-01", "period_end": "2026-01-31", **data}
    if payload.get("object_id") == "POOL":
        payload["object_id"] = f"pool:{mixed_pool.pk}"
    response = client.post("/analyses/", payload)
    assert response.status_code == 200
    html = response.content.decode()
    field_html = re.search(
        rf'<div class="field has-error">\s*<label for="id_{field}">.*?</div>', html, re.S
    )
    assert field_html, f"{field} is not marked as in error"
    assert message in field_html.group(0)
    assert Analysis.objects.count() == 0


def test_fleet_page_without_an_analysis_offers_to_run_one(client, planner, viewer, demo_fleet):
    client.force_login(viewer)
    html = client.get("/").content.decode()
    assert "No fleet analysis yet" in html and "Run fleet analysis" not in html
    client.force_login(planner)
    html = client.get("/").content.decode()
    assert "Run fleet analysis" in html
    response = client.post("/fleet/run-analysis/")
    assert response.status_code == 302 and response["Location"] == "/"
    analysis = Analysis.objects.get()
    assert analysis.scope == "fleet" and analysis.object_id is None
    assert analysis.period_end - analysis.period_start == dt.timedelta(days=30)
    html = client.get("/").content.decode()
    assert f'data-poll-url="/api/v1/analyses/{analysis.pk}/"' in html
    assert "No fleet analysis yet" not in html


# --- the fleet overview ------------------------------------------------------------------------


def test_fleet_page_shows_the_stored_factors_money_and_tiles(client, viewer, fleet_analysis):
    summary = fleet_analysis.results["summary"]
    client.force_login(viewer)
    html = client.get("/").content.decode()
    assert f"{summary['aggregate_of_products'] * 100:.1f} %" in html
    for factor in FACTORS:
        assert LABELS[factor] in html
        assert f"{summary[factor] * 100:.1f} %" in html, factor
        assert summary[f"{factor}_provenance"] in {"measured", "entered", "modeled", "default"}
    # Money is listed per currency (never summed across currencies).
    for entry in summary["money_by_currency"]:
        assert f'{round(entry["lost_money"]):,} <span class="unit">{entry["currency"]}' in html
        label = LABELS[entry["worst_factor"]]
        assert f'{label} <span class="unit">' in html
    assert "mixed currencies" not in html
    assert f"{round(summary['peak_pflop_days']):,}" in html
    assert f"{round(summary['effective_pflop_days']):,}" in html
    for site in fleet_analysis.results["sites"]:
        assert site["site"] in html and f"?scope=site-{site['site_id']}" in html
    for cluster in fleet_analysis.results["clusters"]:
        assert f"?scope=cluster-{cluster['cluster_id']}" in html
    # The pool table of the first home page is still there.
    assert "1000 × A100 SXM4 80GB" in html and "heterogeneous" in html


def test_stale_fleet_analysis_is_flagged_and_recompute_shows_progress(
    client, planner, fleet_analysis
):
    Analysis.objects.filter(pk=fleet_analysis.pk).update(stale=True)
    client.force_login(planner)
    html = client.get("/").content.decode()
    assert ">stale</span>" in html and "Recompute fleet analysis" in html
    assert "1 analysis used an inventory that has changed" in html
    response = client.post(f"/analyses/{fleet_analysis.pk}/recompute/", {"next": "/"})
    assert response.status_code == 302 and response["Location"] == "/"
    fleet_analysis.refresh_from_db()
    assert fleet_analysis.status == "queued" and fleet_analysis.progress == 0
    html = client.get("/").content.decode()
    assert f'data-poll-url="/api/v1/analyses/{fleet_analysis.pk}/"' in html
    # The last result stays on the page while the new run computes.
    assert "Effective utilization" in html and "Recompute fleet analysis" not in html


def test_recompute_refuses_an_outside_next_url(client, planner, fleet_analysis):
    client.force_login(planner)
    response = client.post(
        f"/analyses/{fleet_analysis.pk}/recompute/", {"next": "https://evil.example/"}
    )
    assert response["Location"] == f"/analyses/{fleet_analysis.pk}/"


# --- the waterfall ----------------------------------------------------------------------------


def scope_keys(results: dict) -> list[tuple[str, dict]]:
    keys = [("", results["summary"])]
    keys += [(f"site-{r['site_id']}", r) for r in results["sites"]]
    keys += [(f"cluster-{r['cluster_id']}", r) for r in results["clusters"]]
    keys += [(f"pool-{r['pool_id']}", r) for r in results["pools"]]
    return keys


def test_waterfall_bars_go_from_nameplate_to_effective_for_every_scope(
    client, viewer, fleet_analysis
):
    results = fleet_analysis.results
    order = results["waterfall_order"]
    client.force_login(viewer)
    keys = scope_keys(results)
    assert len(keys) == 1 + 2 + 3 + 3
    for key, stored in keys:
        url = f"/analyses/{fleet_analysis.pk}/" + (f"?scope={key}" if key else "")
        html = client.get(url).content.decode()
        (trace,) = plotted_traces(html, "chart-analyses-waterfall")
        assert trace["type"] == "waterfall"
        assert trace["measure"] == ["absolute", *["relative"] * 5, "total"]
        y = trace["y"]
        assert y[0] == pytest.approx(stored["peak_pflop_days"], rel=1e-12)
        assert y[1:6] == pytest.approx([-stored[f"lost_{f}_pflop_days"] for f in order], rel=1e-12)
        assert y[6] == pytest.approx(stored["effective_pflop_days"], rel=1e-12)
        # The bars add up: nameplate minus the five losses is the stored effective compute.
        assert y[0] + sum(y[1:6]) == pytest.approx(stored["effective_pflop_days"], rel=1e-9)
        # Provenance in each factor's bar label and in the table under the chart.
        # An inference pool's row names its serving definitions (MBU, Availability).
        names = {factor: stored.get(f"{factor}_label") or LABELS[factor] for factor in order}
        for label, factor in zip(trace["x"][1:6], order, strict=True):
            assert label.startswith(names[factor]) and stored[f"{factor}_provenance"] in label
            assert f"{stored[factor] * 100:.1f} %" in label
        table = html[html.index("Waterfall steps with each factor") :]
        for factor in order:
            row = re.search(
                rf"<th scope=\"row\">{re.escape(names[factor])}</th>.*?</tr>", table, re.S
            )
            assert f"provenance-{stored[f'{factor}_provenance']}" in row.group(0), (key, factor)
        # Text labels carry PFLOP-days and money.
        assert all("PFLOP-days" in text for text in trace["text"])
        if stored.get("lost_mfu_money"):  # a scope of one site: its own currency
            currencies = {p["currency"] for p in results["pools"]}
            assert any(c in trace["text"][order.index("mfu") + 1] for c in currencies)


def test_a_waterfall_step_drills_to_the_pools_that_lose_most_to_it(client, viewer, fleet_analysis):
    results = fleet_analysis.results
    order = results["waterfall_order"]
    client.force_login(viewer)
    html = client.get(f"/analyses/{fleet_analysis.pk}/").content.decode()
    (trace,) = plotted_traces(html, "chart-analyses-waterfall")
    targets = [item[-1] for item in trace["customdata"]]
    detail = f"/analyses/{fleet_analysis.pk}/"
    assert targets == ["", *[f"{detail}?sort={f}#pools-heading" for f in order], ""]
    # The factor bars drill to the same lists.
    (bars,) = plotted_traces(html, "chart-analyses-factors")
    by_label = {label: item[-1] for label, item in zip(bars["y"], bars["customdata"], strict=True)}
    # The demo fleet serves too: its MFU bar names both definitions (MFU / MBU).
    mfu_label = results["summary"].get("mfu_label") or LABELS["mfu"]
    assert by_label[mfu_label] == f"{detail}?sort=mfu#pools-heading"
    # The target lists the pools by that factor, lowest first, and says so.
    page = client.get(detail, {"sort": "mfu"}).content.decode()
    section = page[page.index('id="pools-heading"') :]
    assert "Sorted by MFU, lowest first" in section
    listed = re.findall(r'<tr>\s*<th scope="row">([^<]+)</th>', section)
    expected = [p["pool"] for p in sorted(results["pools"], key=lambda p: p["mfu"])]
    assert listed == expected and len(listed) == 3
    assert re.search(r'aria-sort="ascending"><a href="\?sort=mfu#pools-heading">MFU', section)
    # An unknown sort keeps the stored order, no error.
    other = client.get(detail, {"sort": "nonsense"})
    assert other.status_code == 200 and "Sorted by" not in other.content.decode()


def test_waterfall_csv_equals_the_numbers_plotted(client, viewer, fleet_analysis, mixed_pool):
    client.force_login(viewer)
    html = client.get(f"/analyses/{fleet_analysis.pk}/?scope=pool-{mixed_pool.pk}").content.decode()
    (trace,) = plotted_traces(html, "chart-analyses-waterfall")
    url = download_url(html, "analyses-waterfall")
    assert f"analysis={fleet_analysis.pk}" in url and f"scope=pool-{mixed_pool.pk}" in url
    rows = csv_rows(client, url)
    assert [float(r["pflop_days"]) for r in rows] == pytest.approx(trace["y"], rel=1e-9)
    assert [r["measure"] for r in rows] == trace["measure"]
    stored = next(p for p in fleet_analysis.results["pools"] if p["pool_id"] == mixed_pool.pk)
    money = {r["step"]: r["lost_money"] for r in rows}
    assert float(money["MFU"]) == pytest.approx(-stored["lost_mfu_money"], rel=1e-9)
    assert {r["currency"] for r in rows} == {"USD"}
    xlsx = client.get(download_url(html, "analyses-waterfall", "xlsx"))
    assert xlsx.status_code == 200 and xlsx.content[:2] == b"PK"


def test_factor_and_compute_charts_match_their_downloads(client, viewer, fleet_analysis):
    client.force_login(viewer)
    html = client.get("/").content.decode()
    (bars,) = plotted_traces(html, "chart-analyses-factors")
    rows = csv_rows(client, download_url(html, "analyses-factors"))
    assert [float(r["value_share"]) for r in rows] == pytest.approx(bars["x"], rel=1e-12)
    summary = fleet_analysis.results["summary"]
    assert bars["x"] == pytest.approx([summary[f] for f in FACTORS], rel=1e-12)
    nameplate, effective = plotted_traces(html, "chart-analyses-compute-by-scope")
    rows = csv_rows(client, download_url(html, "analyses-compute-by-scope"))
    assert [float(r["nameplate_pflop_days"]) for r in rows] == pytest.approx(nameplate["y"])
    assert [float(r["effective_pflop_days"]) for r in rows] == pytest.approx(effective["y"])
    sites = fleet_analysis.results["sites"]
    assert sum(nameplate["y"][: len(sites)]) == pytest.approx(summary["peak_pflop_days"])


def test_every_chart_is_titled_with_axis_units_and_hover(
    client, viewer, fleet_analysis, mixed_pool
):
    client.force_login(viewer)
    pk = fleet_analysis.pk
    pages = {
        "/": ["analyses-waterfall", "analyses-factors", "analyses-compute-by-scope"],
        f"/analyses/{pk}/": ["analyses-waterfall", "analyses-factors"],
        f"/analyses/{pk}/pools/{mixed_pool.pk}/": ["analyses-hetero-strategies"],
    }
    units = ("(PFLOP-days)", "PFLOP/s", "(% of peak)")
    for url, keys in pages.items():
        html = client.get(url).content.decode()
        for key in keys:
            traces, layout = plotted_figure(html, f"chart-{key}")
            assert layout["title"]["text"], (url, key)
            axes = [layout["xaxis"]["title"]["text"], layout["yaxis"]["title"]["text"]]
            assert all(axes) and any(unit in title for title in axes for unit in units), axes
            assert all(trace.get("hovertemplate") for trace in traces), (url, key)
            assert f'href="/charts/{key}.csv?' in html and f'href="/charts/{key}.xlsx?' in html


def test_fleet_analysis_without_cards_says_so(client, planner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(scope="fleet")
    run_analysis_inline(analysis)
    client.force_login(planner)
    html = client.get("/").content.decode()
    assert "found no cards" in html and "Recompute fleet analysis" in html
    assert "chart-analyses-waterfall" not in html
    detail = client.get(f"/analyses/{analysis.pk}/").content.decode()
    assert "No cards in this scope." in detail


def test_unknown_scope_is_not_found(client, viewer, fleet_analysis):
    client.force_login(viewer)
    for scope in ["pool-99999", "galaxy-1", "site-x"]:
        assert client.get(f"/analyses/{fleet_analysis.pk}/?scope={scope}").status_code == 404
    assert (
        client.get(
            f"/charts/analyses-waterfall.csv?analysis={fleet_analysis.pk}&scope=pool-99999"
        ).status_code
        == 404
    )


def test_failed_run_shows_why_and_keeps_the_last_result(client, viewer, fleet_analysis):
    # A new run (a finished run is never failed afterwards) fails; the earlier result stays.
    run_id = uuid.uuid4()
    type(fleet_analysis).objects.filter(pk=fleet_analysis.pk).update(
        run_id=run_id, status="running"
    )
    services.fail(fleet_analysis.pk, str(run_id), "ValueError: mtbf_card_hours < 1")
    client.force_login(viewer)
    html = client.get(f"/analyses/{fleet_analysis.pk}/").content.decode()
    assert "The last run failed:" in html and "mtbf_card_hours" in html
    assert "last successful run" in html and "chart-analyses-waterfall" in html


def test_list_shows_status_stale_flag_and_last_success(client, viewer, fleet_analysis, mixed_pool):
    queued = services.start_analysis(scope="pool", object_id=mixed_pool.pk)
    Analysis.objects.filter(pk=fleet_analysis.pk).update(stale=True)
    client.force_login(viewer)
    html = client.get("/analyses/").content.decode()
    assert f"/analyses/{fleet_analysis.pk}/" in html and f"/analyses/{queued.pk}/" in html
    assert "Succeeded" in html and "Queued" in html and ">stale</span>" in html
    assert fleet_analysis.succeeded_at.strftime("%Y-%m-%d %H:%M") in html
    assert "/recompute/" not in html  # a viewer gets no recompute buttons
    stale_only = client.get("/analyses/?stale=1").content.decode()
    assert f"/analyses/{fleet_analysis.pk}/" in stale_only
    assert f"/analyses/{queued.pk}/" not in stale_only


# --- the heterogeneous pool view ---------------------------------------------------------------


def test_heterogeneous_pool_shows_the_four_strategies_and_the_slowest_card(
    client, viewer, fleet_analysis, mixed_pool
):
    stored = next(p for p in fleet_analysis.results["pools"] if p["pool_id"] == mixed_pool.pk)
    client.force_login(viewer)
    detail = client.get(f"/analyses/{fleet_analysis.pk}/").content.decode()
    url = f"/analyses/{fleet_analysis.pk}/pools/{mixed_pool.pk}/"
    assert url in detail
    html = client.get(url).content.decode()
    strategies = [
        "synchronous_uniform",
        "static_proportional",
        "dynamic_fine_grained",
        "split_homogeneous",
    ]
    throughput, delivered = plotted_traces(html, "chart-analyses-hetero-strategies")
    # Bucket throughput = W·h, with W = Σ n_i·peak_i·mfu_i = pool peak × pool MFU.
    ideal = stored["peak_pflops"] * stored["mfu"]
    assert throughput["y"] == pytest.approx([ideal * stored[f"h_{s}"] for s in strategies])
    assert delivered["y"] == pytest.approx([stored[f"delivered_pflops_{s}"] for s in strategies])
    rows = csv_rows(client, download_url(html, "analyses-hetero-strategies"))
    assert [float(r["heterogeneity_factor"]) for r in rows] == pytest.approx(
        [stored[f"h_{s}"] for s in strategies]
    )
    assert [float(r["delivered_pflops"]) for r in rows] == pytest.approx(delivered["y"])
    recommended = [r["strategy"] for r in rows if r["recommended"] == "true"]
    assert recommended == [stored["recommended_strategy"]]
    assert "★ recommended" in throughput["x"][strategies.index(stored["recommended_strategy"])]
    for s in strategies:
        assert f"{stored[f'h_{s}']:.3f}" in html
    assert stored["strategy_why"] in html
    # A100: 312 dense TFLOP/s against the H100's 989 at the same default MFU.
    assert re.search(r'class="slowest-card">A100 SXM4 80GB<', html)
    assert re.search(r'<tr class="slowest-row">\s*<th scope="row">A100 SXM4 80GB', html)


def test_planner_recomputes_a_stale_analysis_from_the_list(client, planner, fleet_analysis):
    Analysis.objects.filter(pk=fleet_analysis.pk).update(stale=True)
    client.force_login(planner)
    html = client.get("/analyses/?stale=1").content.decode()
    action = f'action="/analyses/{fleet_analysis.pk}/recompute/"'
    assert action in html
    response = client.post(f"/analyses/{fleet_analysis.pk}/recompute/")
    assert response["Location"] == f"/analyses/{fleet_analysis.pk}/"
    detail = client.get(response["Location"]).content.decode()
    assert 'class="job-progress"' in detail
    assert action not in client.get("/analyses/?stale=1").content.decode()  # in flight


def test_pool_link_goes_to_the_newest_analysis_covering_it(
    client, viewer, fleet_analysis, mixed_pool
):
    client.force_login(viewer)
    response = client.get(f"/analyses/pools/{mixed_pool.pk}/")
    assert response.status_code == 302
    assert response["Location"] == f"/analyses/{fleet_analysis.pk}/pools/{mixed_pool.pk}/"
    assert client.get("/analyses/pools/99999/").status_code == 404
    html = client.get(f"/inventory/pools/{mixed_pool.pk}/").content.decode()
    assert f'href="/analyses/pools/{mixed_pool.pk}/"' in html


def test_pool_link_without_an_analysis_leads_to_the_start_form(client, planner, mixed_pool):
    client.force_login(planner)
    response = client.get(f"/analyses/pools/{mixed_pool.pk}/", follow=True)
    assert response.redirect_chain == [("/analyses/", 302)]
    assert "No finished analysis covers mixed-a100-h100 yet" in response.content.decode()


# --- query counts ------------------------------------------------------------------------------


def test_pages_run_a_bounded_number_of_queries(
    client, viewer, fleet_analysis, mixed_pool, django_assert_max_num_queries
):
    client.force_login(viewer)
    pk = fleet_analysis.pk
    for url, limit in [
        ("/", 14),
        ("/analyses/", 8),
        (f"/analyses/{pk}/", 6),
        (f"/analyses/{pk}/?scope=pool-{mixed_pool.pk}", 6),
        (f"/analyses/{pk}/pools/{mixed_pool.pk}/", 6),
        (f"/charts/analyses-waterfall.csv?analysis={pk}", 6),
    ]:
        with django_assert_max_num_queries(limit):
            assert client.get(url).status_code == 200, url
