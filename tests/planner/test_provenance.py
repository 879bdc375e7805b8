"""Analyses say where each figure comes from: coverage, reasons and inference-pool caveats."""

from __future__ import annotations

import datetime as dt

import pytest

from inventory.models import AcceleratorModel, NodeGroup, Pool
from planner import services
from tests.support.builders import add_h100_pool
from tests.support.inline import run_analysis_inline

pytestmark = pytest.mark.django_db

START = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
END = dt.datetime(2024, 3, 31, tzinfo=dt.UTC)


@pytest.fixture
def with_inference(alpha):
    add_h100_pool(alpha, "serving", purpose="inference")
    return alpha


def test_inference_pools_carry_the_serving_definitions_note(
    with_inference, client, viewer, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(scope="fleet", period_start=START, period_end=END)
    analysis = run_analysis_inline(analysis)
    rows = {row["pool"]: row for row in analysis.results["pools"]}
    assert rows["serving"]["factor_note"].startswith("inference pool: serving definitions")
    assert rows["h100"]["factor_note"] == ""
    notes = analysis.results["summary"]["notes"]
    assert notes == [
        "serving: inference pool: serving definitions (MBU in place of MFU, no pipeline "
        "scaling, availability in place of effective training time; docs/efficiency-model.md, "
        '"Serving pools"); included in the totals as their share of the cards\' peak '
        "(MBU × availability × utilization × energy)."
    ]
    client.force_login(viewer)
    page = client.get("/").content.decode()
    assert "inference pool: serving definitions" in page
    pool_page = client.get(
        f"/analyses/{analysis.pk}/", {"scope": f"pool-{rows['serving']['pool_id']}"}
    ).content.decode()
    assert "Inference pool: serving definitions" in pool_page


def test_a_usage_import_names_itself_as_the_stale_reason(alpha, django_capture_on_commit_callbacks):
    from tests.support.alpha_usage import sacct_text
    from tests.support.builders import import_usage_text

    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(scope="fleet", period_start=START, period_end=END)
    analysis = run_analysis_inline(analysis)
    assert not analysis.stale and analysis.stale_reason == ""
    with django_capture_on_commit_callbacks(execute=True):
        import_usage_text(alpha, sacct_text())
    analysis.refresh_from_db()
    assert analysis.stale
    assert analysis.stale_reason == "usage imported for cluster alpha, 2024-03-01 to 2024-03-01."
    pool = alpha.pools.get()
    pool.name = "h100-renamed"
    with django_capture_on_commit_callbacks(execute=True):
        pool.save()
    analysis.refresh_from_db()
    assert analysis.stale_reason == "Pool h100-renamed (cluster alpha) was edited after this run."


def test_an_inventory_edit_names_what_changed(alpha, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(scope="fleet", period_start=START, period_end=END)
    analysis = run_analysis_inline(analysis)
    pool = alpha.pools.get()
    with django_capture_on_commit_callbacks(execute=True):
        group = NodeGroup.objects.filter(pool=pool).first()
        group.delete()
    analysis.refresh_from_db()
    assert analysis.stale
    assert analysis.stale_reason == (
        f"Node group {group.name} (pool {pool.name}) was deleted after this run."
    )
    with django_capture_on_commit_callbacks(execute=True):
        Pool.objects.create(cluster=alpha, name="spare")
    analysis.refresh_from_db()
    assert analysis.stale_reason == "Pool spare (cluster alpha) was added after this run."
    with django_capture_on_commit_callbacks(execute=True):
        AcceleratorModel.objects.get(name="H100 SXM5 80GB").save()
    analysis.refresh_from_db()
    assert analysis.stale_reason == "Catalog card H100 SXM5 80GB was edited after this run."


@pytest.mark.parametrize(
    ("metered", "provenance", "basis"),
    [
        ((dt.date(2024, 3, 1), dt.date(2024, 3, 31)), "measured", "metered_kwh"),
        ((dt.date(2024, 2, 1), dt.date(2024, 2, 29)), "modeled", "metered_kwh_other_period"),
        ((dt.date(2024, 3, 10), dt.date(2024, 3, 31)), "modeled", "metered_kwh_other_period"),
        # Open-ended periods, and readings without a period (taken as the analysed period's).
        ((dt.date(2024, 2, 1), None), "measured", "metered_kwh"),
        ((None, dt.date(2024, 3, 15)), "modeled", "metered_kwh_other_period"),
        ((None, None), "measured", "metered_kwh"),
    ],
)
def test_meter_readings_are_measured_only_inside_their_period(
    alpha, django_capture_on_commit_callbacks, metered, provenance, basis
):
    site = alpha.site
    site.metered_facility_energy_kwh, site.metered_it_energy_kwh = 1300.0, 1000.0
    site.metered_period_start, site.metered_period_end = metered
    site.save()
    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(scope="fleet", period_start=START, period_end=END)
    pool = run_analysis_inline(analysis).results["pools"][0]
    assert pool["energy"] == pytest.approx(1 / 1.3)  # the meters' PUE either way
    assert (pool["energy_provenance"], pool["energy_basis"]) == (provenance, basis)


def test_chart_and_table_round_h_alike_and_idle_cost_share_is_money():
    import pandas as pd

    from core.tabular.columns import unit_of
    from frontend.dashboards.analyses import strategies_figure

    frame = pd.DataFrame(
        {
            "strategy_label": ["joint"],
            "recommended": [True],
            "throughput_pflops": [1.0],
            "delivered_pflops": [0.9],
            "heterogeneity_factor": [0.5625],  # Python's "%.3f" says 0.562, the table 0.563
        }
    )
    figure = strategies_figure(frame)
    assert figure.data[0].text == ("h = 0.563",)
    assert figure.data[1].customdata[0][0] == "0.563"
    assert unit_of("idle_cost_share") == "currency of the row"
    assert unit_of("allocation_share") == "fraction 0-1"
