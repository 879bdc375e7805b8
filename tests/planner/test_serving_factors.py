"""Inference pools in analyses use serving factors (docs/efficiency-model.md, "Serving pools"):
MBU in the mfu column, scaling 1, availability in effective_time, and the measured serving
load over the cards' modeled capacity as utilization when loads cover half the period."""

from __future__ import annotations

import datetime as dt

import pytest

from accounting.models import ServingLoad
from engine.factors import FACTOR_NAMES
from engine.inference.defaults import INFERENCE_DEFAULTS
from engine.inference.sizing import InferenceWorkload, evaluate_inference
from inventory.models import AcceleratorModel, Pool
from planner import services
from tests.support.builders import add_h100_pool
from tests.support.inline import run_analysis_inline

DEFAULT_BANDWIDTH_EFFICIENCY = INFERENCE_DEFAULTS["bandwidth_efficiency"].value

pytestmark = pytest.mark.django_db

START = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
END = dt.datetime(2024, 3, 31, tzinfo=dt.UTC)
MODEL = {
    "model_params": 8e9,
    "weight_precision": "bf16",
    "kv_precision": "bf16",
    "input_tokens": 1000,
    "output_tokens": 300,
}
REPAIR_H = 2.5 / 60  # engine.defaults restart_h, the documented serving repair time


@pytest.fixture
def serving_pool(alpha):
    return add_h100_pool(alpha, "serving", purpose="inference")


def rows_of(django_capture_on_commit_callbacks) -> dict[str, dict]:
    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(scope="fleet", period_start=START, period_end=END)
    analysis = run_analysis_inline(analysis)
    return {row["pool"]: row for row in analysis.results["pools"]}, analysis


def add_load(pool, start=START, end=END, served=1000.0) -> ServingLoad:
    return ServingLoad.objects.create(
        pool=pool, period_start=start, period_end=end, served_tokens_per_s=served, **MODEL
    )


def capacity_of_eight_h100() -> dict:
    """The engine's capacity of the pool's 8 H100 for MODEL, computed independently."""
    card = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    cards = [{"accelerator": card.name, **{k: getattr(card, k) for k in CARD_FIELDS}}]
    import pandas as pd

    workload = InferenceWorkload(
        params=MODEL["model_params"],
        input_tokens=MODEL["input_tokens"],
        output_tokens=MODEL["output_tokens"],
        cards=8,
    )
    options = evaluate_inference(
        pd.DataFrame(cards).astype(dict.fromkeys(CARD_FIELDS, float)), workload
    )
    best = options[options["feasible"]].sort_values("capacity_tokens_per_s").iloc[-1]
    return {"capacity": float(best["capacity_tokens_per_s"]), "tp": int(best["tp"])}


CARD_FIELDS = ("memory_gb", "memory_bandwidth_tbs", "dense_bf16_tflops", "tdp_w")


def assert_product_and_shares_consistent(row: dict) -> None:
    product = 1.0
    for name in FACTOR_NAMES:
        product *= row[name]
    assert row["product"] == pytest.approx(product)
    shares = sum(row[f"lost_share_{name}"] for name in FACTOR_NAMES)
    assert shares == pytest.approx(1 - product)
    assert row["lost_utilization_card_hours"] == pytest.approx(
        row["lost_share_utilization"] * row["card_hours"]
    )


def test_without_a_load_mbu_is_the_default_and_availability_is_modeled(
    serving_pool, django_capture_on_commit_callbacks
):
    rows, _ = rows_of(django_capture_on_commit_callbacks)
    row = rows["serving"]
    assert row["factor_definitions"] == "serving"
    assert row["mfu_label"] == "MBU" and row["effective_time_label"] == "Availability"
    assert row["mfu"] == pytest.approx(DEFAULT_BANDWIDTH_EFFICIENCY)
    assert (row["mfu_provenance"], row["mfu_basis"]) == ("default", "bandwidth_efficiency_default")
    assert row["scaling"] == 1.0 and row["scaling_provenance"] == "modeled"
    assert row["scaling_basis"] == "serving: no pipeline scaling"
    replica_mtbf = row["mtbf_card_hours"] / 8  # one node of 8 cards is a replica without a model
    assert row["effective_time"] == pytest.approx(replica_mtbf / (replica_mtbf + REPAIR_H))
    assert row["effective_time_provenance"] == "modeled"
    assert row["effective_time_defaults"].split(", ")[-1] == "restart_h"  # the repair time
    assert row["utilization_basis"] != "serving_load"
    assert row["serving_reason"] == "no serving load entered for this period"
    assert row["factor_note"].startswith("inference pool: serving definitions")
    assert_product_and_shares_consistent(row)


def test_a_training_pool_is_unchanged(alpha, django_capture_on_commit_callbacks):
    before, _ = rows_of(django_capture_on_commit_callbacks)
    pool = add_h100_pool(alpha, "serving", purpose="inference")
    add_load(pool)
    after, _ = rows_of(django_capture_on_commit_callbacks)
    old, new = before["h100"], after["h100"]
    assert new["factor_definitions"] == "training" and new["mfu_label"] == "MFU"
    for name in (*FACTOR_NAMES, "product", "total_cost"):
        assert new[name] == pytest.approx(old[name]), name
        assert new.get(f"{name}_basis") == old.get(f"{name}_basis")


def test_a_load_covering_the_period_is_measured_utilization(
    serving_pool, django_capture_on_commit_callbacks
):
    add_load(serving_pool, served=1000.0)
    rows, _ = rows_of(django_capture_on_commit_callbacks)
    row = rows["serving"]
    expected = capacity_of_eight_h100()
    assert row["serving_capacity_tokens_per_s"] == pytest.approx(expected["capacity"])
    assert row["utilization"] == pytest.approx(1000.0 / expected["capacity"])
    assert (row["utilization_provenance"], row["utilization_basis"]) == (
        "measured",
        "serving_load",
    )
    assert row["mfu_provenance"] == "modeled" and row["mfu_basis"] == "serving_load_model"
    # At most the bandwidth efficiency the model assumes.
    assert 0 < row["mfu"] < DEFAULT_BANDWIDTH_EFFICIENCY
    replica_mtbf = row["mtbf_card_hours"] / expected["tp"]
    assert row["effective_time"] == pytest.approx(replica_mtbf / (replica_mtbf + REPAIR_H))
    assert row["serving_reason"].startswith("measured: served tokens/s")
    assert_product_and_shares_consistent(row)
    # Money follows the product: idle cost is the cost of the unused share.
    assert row["total_cost"] > 0


def test_a_load_covering_under_half_the_period_is_not_used(
    serving_pool, django_capture_on_commit_callbacks
):
    add_load(serving_pool, end=START + dt.timedelta(days=10))
    rows, _ = rows_of(django_capture_on_commit_callbacks)
    row = rows["serving"]
    assert row["utilization_basis"] != "serving_load"
    assert row["utilization_provenance"] != "measured"
    assert "33% of the period, under 50%: serving load not used" in row["serving_reason"]
    assert row["mfu_basis"] == "serving_load_model"  # the served model is known all the same


def test_the_pool_page_names_mbu_and_availability(
    serving_pool, client, viewer, django_capture_on_commit_callbacks
):
    rows, analysis = rows_of(django_capture_on_commit_callbacks)
    client.force_login(viewer)
    page = client.get(
        f"/analyses/{analysis.pk}/", {"scope": f"pool-{rows['serving']['pool_id']}"}
    ).content.decode()
    assert "MBU" in page and "Availability" in page  # waterfall steps of the pool
    assert "Inference pool: serving definitions" in page
    assert "Effective training time" not in page
    assert "MFU / MBU</a>" in page and ">MFU<" not in page  # the pools table's header
    whole = client.get(f"/analyses/{analysis.pk}/").content.decode()
    assert 'title="model bandwidth utilization: a serving definition">MBU</abbr>' in whole
    assert "Inference pools (serving) use serving definitions" in whole


def test_the_factor_rows_export_carries_the_definitions(
    serving_pool, client, viewer, django_capture_on_commit_callbacks
):
    import csv
    import io

    _, analysis = rows_of(django_capture_on_commit_callbacks)
    client.force_login(viewer)
    answer = client.get(f"/api/v1/analyses/{analysis.pk}/rows/", {"scope": "pool", "format": "csv"})
    assert answer.status_code == 200
    body = b"".join(answer.streaming_content) if answer.streaming else answer.content
    rows = {row["pool"]: row for row in csv.DictReader(io.StringIO(body.decode()))}
    assert rows["serving"]["factor_definitions"] == "serving"
    assert rows["serving"]["mfu_label"] == "MBU"
    assert rows["h100"]["factor_definitions"] == "training"


def test_entering_a_serving_load_makes_the_analysis_stale(
    serving_pool, django_capture_on_commit_callbacks
):
    _, analysis = rows_of(django_capture_on_commit_callbacks)
    assert not analysis.stale
    with django_capture_on_commit_callbacks(execute=True):
        add_load(serving_pool)
    analysis.refresh_from_db()
    assert analysis.stale
    assert analysis.stale_reason == "A serving load of pool serving was added after this run."


def test_a_model_too_big_for_the_cards_leaves_capacity_unknown(
    serving_pool, django_capture_on_commit_callbacks
):
    load = add_load(serving_pool)
    load.model_params = 2e12  # 4 TB of bf16 weights on 640 GB of cards
    load.save()
    rows, _ = rows_of(django_capture_on_commit_callbacks)
    row = rows["serving"]
    assert row["serving_reason"].startswith("the served model does not fit these cards")
    assert row["serving_capacity_tokens_per_s"] is None  # unknown, not zero
    assert row["utilization_basis"] != "serving_load"
    assert row["mfu_basis"] == "bandwidth_efficiency_default"


def test_overlapping_loads_cover_their_union_once(serving_pool, django_capture_on_commit_callbacks):
    # Two loads over the same 10 days: 10 of 30 days covered, not 20.
    add_load(serving_pool, end=START + dt.timedelta(days=10), served=1000.0)
    add_load(serving_pool, end=START + dt.timedelta(days=10), served=3000.0)
    rows, _ = rows_of(django_capture_on_commit_callbacks)
    row = rows["serving"]
    assert row["serving_covered_share"] == pytest.approx(10 / 30)
    assert row["utilization_basis"] != "serving_load"
    assert row["serving_tokens_per_s"] == pytest.approx(2000.0)  # time-weighted mean


def test_coverage_counts_only_the_pools_time_in_service(
    serving_pool, django_capture_on_commit_callbacks
):
    """A cluster commissioned on day 11 of the 30: loads over all its 20 days in service cover
    it fully (as usage coverage counts in-service card-hours), not 20 of 30 days."""
    cluster = serving_pool.cluster
    cluster.commissioned_on = (START + dt.timedelta(days=10)).date()
    cluster.save()
    add_load(serving_pool, start=START + dt.timedelta(days=10), served=1000.0)
    row = rows_of(django_capture_on_commit_callbacks)[0]["serving"]
    assert row["serving_covered_share"] == pytest.approx(1.0)
    assert row["utilization_basis"] == "serving_load"
    assert row["serving_reason"] == (
        "measured: served tokens/s ÷ modeled capacity (serving loads cover 100% of its time "
        "in service (from 2024-03-11))"
    )
    # Under half of the time in service: not used, and the reason says of what.
    ServingLoad.objects.all().delete()
    add_load(serving_pool, start=START + dt.timedelta(days=10), end=START + dt.timedelta(days=18))
    row = rows_of(django_capture_on_commit_callbacks)[0]["serving"]
    assert row["serving_covered_share"] == pytest.approx(8 / 20)
    assert row["utilization_basis"] != "serving_load"
    assert "40% of its time in service (from 2024-03-11), under 50%" in row["serving_reason"]


def test_a_pool_not_yet_in_service_has_no_serving_load(
    serving_pool, django_capture_on_commit_callbacks
):
    cluster = serving_pool.cluster
    cluster.commissioned_on = END.date()
    cluster.save()
    add_load(serving_pool)
    row = rows_of(django_capture_on_commit_callbacks)[0]["serving"]
    assert row["serving_reason"] == "not in service in this period"
    assert row["serving_mbu_basis"] == "bandwidth_efficiency_default"


def test_union_hours_merges_spans_inside_the_period():
    from planner.serving_factors import union_hours

    day = dt.timedelta(days=1)
    spans = [(START - day, START + 2 * day), (START + day, START + 3 * day), (END - day, END + day)]
    assert union_hours(spans, START, END) == pytest.approx((3 + 1) * 24)


def test_aggregates_name_the_definitions_they_blend(
    serving_pool, django_capture_on_commit_callbacks
):
    # alpha holds a training pool and the serving pool: its cluster and the fleet blend the
    # two definitions and say so; a scope of serving pools only would read MBU.
    _, analysis = rows_of(django_capture_on_commit_callbacks)
    results = analysis.results
    for row in (results["summary"], *results["clusters"], *results["sites"]):
        assert row["mfu_label"] == "MFU / MBU"
        assert row["effective_time_label"] == "Effective training time / availability"
    Pool.objects.filter(purpose="training").delete()
    _, analysis = rows_of(django_capture_on_commit_callbacks)
    assert analysis.results["summary"]["mfu_label"] == "MBU"
    assert analysis.results["clusters"][0]["effective_time_label"] == "Availability"


def test_costs_say_their_factors_for_serving_pools_are_training_ones(serving_pool):
    from accounting import selectors

    report = selectors.cost_report(selectors.AccountingScope(START, END, "total"))
    [note] = [w for w in report["warnings"] if w.startswith("Inference pool serving:")]
    assert "training definitions" in note and "MBU and availability" in note
    serving_pool.purpose = "training"
    serving_pool.save()
    report = selectors.cost_report(selectors.AccountingScope(START, END, "total"))
    assert not [w for w in report["warnings"] if w.startswith("Inference pool")]


def test_daily_loads_cost_no_more_queries_than_one(serving_pool):
    # A load a day for a month: one query for the loads, one for the cards, one for the
    # clusters' commissioning, and the engine evaluates the (model, cards) capacity once,
    # not once per load.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from inventory.frames import node_group_frame, pool_frame
    from planner import serving_factors

    pools = pool_frame(serving_pool.cluster_id, None, (END - START).total_seconds() / 3600)
    groups = node_group_frame(pools["pool_id"].tolist())

    def queries_with(days: int) -> int:
        ServingLoad.objects.all().delete()
        for day in range(days):
            start = START + dt.timedelta(days=day)
            add_load(serving_pool, start, start + dt.timedelta(days=1))
        with CaptureQueriesContext(connection) as captured:
            frame = serving_factors.with_serving_columns(pools, groups, START, END)
        reason = frame.set_index("pool")["serving_reason"]["serving"]
        assert reason.startswith("measured" if days >= 15 else "serving loads cover")
        return len(captured)

    assert queries_with(30) == queries_with(1) == 3
    evaluated = []
    real = serving_factors.best_option
    serving_factors.best_option = lambda *args: evaluated.append(1) or real(*args)
    try:
        queries_with(30)
    finally:
        serving_factors.best_option = real
    assert len(evaluated) == 1
