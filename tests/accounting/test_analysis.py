"""Stored analyses use measured usage when the records cover enough of the analysed period."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from planner import analysis as engine_bridge
from planner.models import Analysis
from tests.support.alpha_usage import DAY_END, DAY_START, SREPORT_TEXT, sacct_text

pytestmark = pytest.mark.django_db


def analyse(cluster) -> dict:
    analysis = Analysis.objects.create(
        scope="cluster",
        object_id=cluster.pk,
        period_start=DAY_START,
        period_end=DAY_END,
    )
    rows, inputs = engine_bridge.evaluate_cluster(analysis, cluster.pk)
    part = SimpleNamespace(cluster_id=cluster.pk, pool_rows=rows, inputs=inputs)
    results, _ = engine_bridge.summarise(analysis, [part])
    return results


def test_records_of_part_of_a_day_cover_it_up_to_the_as_of_time(alpha, import_text):
    # The export's latest time is a Submit at 21:00 (its as-of time): the day is covered up to
    # then, its quiet hours before it are measured idle time, the 3 h after it no data:
    # A / C = 112 / (16 × 21) (no sreport, so D = 0), covering 21 of 24 h.
    import_text(alpha, sacct_text())
    pool = analyse(alpha)["pools"][0]
    assert pool["utilization"] == pytest.approx(112 / 336)
    assert pool["utilization_provenance"] == "measured"
    assert pool["coverage_share"] == pytest.approx(21 / 24)


def test_an_sreport_alone_does_not_make_measured_utilization(alpha, import_text):
    import_text(alpha, SREPORT_TEXT, kind="sreport")
    pool = analyse(alpha)["pools"][0]
    assert pool["utilization_provenance"] == "modeled"
    assert pool["utilization_reason"].startswith("no usage records in the period")


def test_analysis_of_a_cluster_with_usage_records_is_measured(alpha, import_text):
    import_text(alpha, sacct_text())
    import_text(alpha, SREPORT_TEXT, kind="sreport")  # the report spans the whole day
    results = analyse(alpha)
    pool = results["pools"][0]
    # (A + D) / C = (112 + 24) / (384 − 48) and (A − L) / (A + D) = 96 / 136, as measured.
    assert pool["utilization"] == pytest.approx(136 / 336)
    assert pool["utilization_provenance"] == "measured"
    assert pool["effective_time"] == pytest.approx(96 / 136)
    assert pool["effective_time_provenance"] == "measured"
    assert results["summary"]["utilization_provenance"] == "measured"


def test_measured_mfu_from_job_throughput_fills_the_node_group(alpha, import_text):
    # A job on 8 H100 training a 7e9-parameter model at 40,000 tokens/s:
    # MFU = 6 × 7e9 × 4e4 / (8 × 989e12) = 0.2123.
    csv = (
        "cluster,job_id,cards,start,end,state,accelerator_model,model_params,tokens_per_s\n"
        "alpha,t-1,8,2024-03-01T00:00:00Z,2024-03-02T00:00:00Z,completed,h100,7e9,40000\n"
    )
    import_text(alpha, csv, kind="csv")
    pool = analyse(alpha)["pools"][0]
    assert pool["mfu"] == pytest.approx(6 * 7e9 * 4e4 / (8 * 989e12))
    assert pool["mfu_provenance"] == "measured"
    assert pool["utilization"] == pytest.approx(8 * 24 / 384)
