"""Analyses in a real headless Chromium, computed by a real Celery worker.

A planner runs the fleet analysis from the fleet page and a pool analysis from the form, the
progress bar follows the worker to the result, and the charts render as SVG.
"""

from __future__ import annotations

import datetime as dt
import re

import pytest

from inventory.models import Pool
from planner import services
from planner.models import Analysis
from tests.support.browser import TABLET, assert_accessible_basics, log_in

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

FACTOR_LABELS = ["Energy (1/PUE)", "MFU", "Scaling", "Effective training time", "Utilization"]
WORKER_TIMEOUT_MS = 90_000
# One waterfall bar per step: nameplate, five factor losses, effective.
WATERFALL_BARS = 7


def waterfall_bars(page, chart_id: str = "chart-analyses-waterfall") -> int:
    """Bars plotly drew for the waterfall trace (one path per point)."""
    return page.locator(f"#{chart_id} .waterfalllayer .trace .points .point path").count()


@pytest.fixture
def demo(celery_worker, browser_planner):
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    return Pool.objects.get(name="mixed-a100-h100")


def test_run_the_fleet_analysis_and_read_the_five_factors(browser_page, demo, screenshot, settings):
    # Each part waits a moment in the worker, so the page is seen while the run is going.
    settings.ANALYSIS_PART_DELAY_S = 1.0
    page = browser_page
    page.goto("/")
    assert page.get_by_role("heading", name="No fleet analysis yet").is_visible()
    # The form posts and redirects back to "/": wait for that navigation, not the old URL.
    with page.expect_navigation():
        page.get_by_role("button", name="Run fleet analysis").click()
    page.wait_for_url(re.compile(r"/$"))
    progress = page.locator(".job-progress")
    assert progress.count() == 1 and progress.get_attribute("data-poll-url").startswith(
        "/api/v1/analyses/"
    )
    # The bar follows the worker and reloads the page once the result is stored.
    page.wait_for_selector("#chart-analyses-factors .main-svg", timeout=WORKER_TIMEOUT_MS)
    assert page.locator(".job-progress").count() == 0
    analysis = Analysis.objects.get(scope="fleet")
    assert analysis.status == "succeeded"
    summary = analysis.results["summary"]

    table = page.locator("table.factor-table")
    # The demo fleet also serves: the blended factors name both definitions (MFU / MBU).
    labels = [
        summary.get("mfu_label", label) if label == "MFU" else label for label in FACTOR_LABELS
    ]
    labels[3] = summary.get("effective_time_label", labels[3])
    for label in labels:
        assert table.get_by_role("rowheader", name=label, exact=True).count() == 1, label
    headline = page.locator(".stats").first.inner_text()
    assert f"{summary['aggregate_of_products'] * 100:.1f} %" in headline
    # The factor chart has one bar per factor, the waterfall one per step.
    assert page.locator("#chart-analyses-factors .barlayer .point path").count() == 5
    assert waterfall_bars(page) == WATERFALL_BARS
    assert page.locator(".scope-tile").count() == len(analysis.results["sites"]) + len(
        analysis.results["clusters"]
    )
    assert_accessible_basics(page)
    screenshot(page, "analyses-fleet")


def test_start_a_pool_analysis_and_watch_it_reach_the_waterfall(
    browser_page, demo, screenshot, settings
):
    settings.ANALYSIS_PART_DELAY_S = 1.0  # the progress bar is seen before the result
    page = browser_page
    page.goto("/analyses/")
    page.get_by_label("Scope").select_option("pool")
    page.get_by_label("Site, cluster or pool").select_option(f"pool:{demo.pk}")
    end = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    page.get_by_label("Period start").fill((end - dt.timedelta(days=29)).isoformat())
    page.get_by_label("Period end").fill(end.isoformat())
    page.get_by_role("button", name="Start analysis").click()
    page.wait_for_url(re.compile(r"/analyses/\d+/$"))
    analysis_id = int(re.search(r"/analyses/(\d+)/$", page.url).group(1))
    assert page.locator(f'.job-progress[data-poll-url="/api/v1/analyses/{analysis_id}/"]').count()

    page.wait_for_selector("#chart-analyses-waterfall .main-svg", timeout=WORKER_TIMEOUT_MS)
    analysis = Analysis.objects.get(pk=analysis_id)
    assert analysis.status == "succeeded" and analysis.progress == 100
    assert waterfall_bars(page) == WATERFALL_BARS
    # Every factor's bar label names its provenance.
    ticks = page.locator("#chart-analyses-waterfall .xtick text").all_text_contents()
    pool = analysis.results["pools"][0]
    order = analysis.results["waterfall_order"]
    for factor, tick in zip(order, ticks[1:6], strict=True):
        assert pool[f"{factor}_provenance"] in tick, (factor, tick)
    assert_accessible_basics(page)
    screenshot(page, "analyses-detail")

    # The heterogeneous pool view, from the detail page.
    page.get_by_role("link", name=re.compile(r"^bucket effect")).first.click()
    page.wait_for_url(re.compile(rf"/analyses/{analysis_id}/pools/{demo.pk}/$"))
    page.wait_for_selector("#chart-analyses-hetero-strategies .main-svg")
    assert page.locator("#chart-analyses-hetero-strategies .barlayer .point path").count() == 8
    assert page.locator(".slowest-card").inner_text() == "A100 SXM4 80GB"
    assert page.locator("tr.slowest-row th").inner_text().startswith("A100 SXM4 80GB")
    assert page.get_by_role("heading", name=re.compile(r"^Recommendation: ")).is_visible()
    assert_accessible_basics(page)
    screenshot(page, "analyses-hetero-pool")


def test_recompute_a_stale_analysis_from_the_fleet_page(
    page_factory, browser_planner, demo, screenshot, settings
):
    analysis = services.start_analysis(scope="fleet")
    # A tablet: the page must fit the screen (wide tables scroll inside their own box).
    page = page_factory(TABLET)
    log_in(page, browser_planner.username, "pw-" + browser_planner.username)
    page.goto("/")
    page.wait_for_selector("#chart-analyses-waterfall .main-svg", timeout=WORKER_TIMEOUT_MS)
    Analysis.objects.filter(pk=analysis.pk).update(stale=True)
    page.reload()
    assert page.locator(".subtitle .badge").inner_text() == "stale"
    settings.ANALYSIS_PART_DELAY_S = 1.0  # the recompute is seen running, not only done
    with page.expect_navigation():
        page.get_by_role("button", name="Recompute fleet analysis").click()
    page.wait_for_url(re.compile(r"/$"))
    assert page.locator(".job-progress").count() == 1
    page.wait_for_function(
        "() => !document.querySelector('.job-progress')", timeout=WORKER_TIMEOUT_MS
    )
    page.wait_for_selector("#chart-analyses-waterfall .main-svg")
    analysis.refresh_from_db()
    assert analysis.status == "succeeded" and analysis.stale is False
    assert page.locator(".subtitle .badge").count() == 0
    assert waterfall_bars(page) == WATERFALL_BARS
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    screenshot(page, "analyses-fleet-tablet")
