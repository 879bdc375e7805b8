"""The mixed-pool page asks whether the goal is one large synchronous job and names the best
single-job strategy beside the split recommendation."""

from __future__ import annotations

import re

import pytest

from frontend.dashboards.analysis_selectors import SINGLE_JOB_STRATEGIES, STRATEGY_LABELS

pytestmark = pytest.mark.django_db


def test_the_page_names_the_best_single_job_strategy_beside_the_split(
    client,
    viewer,
    fleet_analysis,
    mixed_pool,
):
    stored = next(p for p in fleet_analysis.results["pools"] if p["pool_id"] == mixed_pool.pk)
    assert stored["recommended_strategy"] == "split_homogeneous"  # h = 1 by definition
    best = max(SINGLE_JOB_STRATEGIES, key=lambda s: stored[f"h_{s}"])
    client.force_login(viewer)
    html = client.get(f"/analyses/{fleet_analysis.pk}/pools/{mixed_pool.pk}/").content.decode()
    goal = re.search(r'<p class="single-job-goal">(.*?)</p>', html, re.S)
    assert goal, "the single-job question is missing"
    text = goal[1]
    assert "Is the goal one large synchronous job across all cards?" in text
    assert f"<strong>{STRATEGY_LABELS[best]}</strong>" in text
    assert f"h = {stored[f'h_{best}']:.3f}" in text
    assert f"{stored[f'delivered_pflops_{best}']:.1f} PFLOP/s delivered" in text
    # The demo's mixed A100 + H100 pool: static shares by speed beat equal shares (the A100
    # would hold every step back) and fine-grained pieces (each runs less efficiently).
    assert best == "static_proportional"
    assert stored["h_static_proportional"] < 1.0


def test_a_single_job_recommendation_asks_nothing_more(
    client,
    viewer,
    fleet_analysis,
    mixed_pool,
):
    results = fleet_analysis.results
    pool = next(p for p in results["pools"] if p["pool_id"] == mixed_pool.pk)
    pool["recommended_strategy"] = "static_proportional"
    fleet_analysis.save(update_fields=["results"])
    client.force_login(viewer)
    html = client.get(f"/analyses/{fleet_analysis.pk}/pools/{mixed_pool.pk}/").content.decode()
    assert 'class="single-job-goal"' not in html


def test_the_chart_and_the_table_show_the_same_rounded_h(
    client,
    viewer,
    fleet_analysis,
    mixed_pool,
):
    """One formatter for h: at an exact half (0.5625, 0.3125) Python's "%.3f" rounds to even
    (0.562) where the table rounds half up (0.563); the chart must say what the table says."""
    from tests.support.charts import plotted_traces

    results = fleet_analysis.results
    pool = next(p for p in results["pools"] if p["pool_id"] == mixed_pool.pk)
    pool["h_static_proportional"], pool["h_dynamic_fine_grained"] = 0.5625, 0.3125
    fleet_analysis.save(update_fields=["results"])
    client.force_login(viewer)
    html = client.get(f"/analyses/{fleet_analysis.pk}/pools/{mixed_pool.pk}/").content.decode()
    table = re.search(r"<caption>The four strategies</caption>(.*?)</table>", html, re.S)[1]
    in_table = re.findall(r'<th scope="row">[^<]*</th>\s*<td class="num">([^<]*)</td>', table)
    throughput, delivered = plotted_traces(html, "chart-analyses-hetero-strategies")
    assert throughput["text"] == [f"h = {h}" for h in in_table]
    assert [c[0] for c in delivered["customdata"]] == in_table
    assert in_table[1:3] == ["0.563", "0.313"]  # half up, not "0.562" and "0.312"
    goal = re.search(r'<p class="single-job-goal">(.*?)</p>', html, re.S)[1]
    assert "h = 0.563," in goal  # the best single job, static shares by speed
