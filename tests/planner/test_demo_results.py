"""`make run` on a fresh install: the demo fleet, its year of usage, then `load_demo_results`
computes the fleet analysis and the demo plan in this process (no worker), so the first page
shows the five factors, the waterfall and money lost. Run again, nothing goes stale and nothing
is computed twice.

The demo plan is the seed case (docs/sources.md): GPT-3 175B on 300B tokens at 8 FLOP per
parameter and token and 140 TFLOP/s per A100 on 1,024 dedicated cards: 4.2e23 FLOP ÷
(1,024 × 140e12 FLOP/s) = 2,929,688 s = 33.9 days.
"""

import io

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db

SEED_DAYS = 8 * 175e9 * 300e9 / (1024 * 140e12) / 86400  # 33.908


def _make_run_commands(capture) -> str:
    """The commands of `make run`, each committing as it does in its own process (what an
    edit marks stale after its commit is marked before the next command)."""
    out = io.StringIO()
    for command in ("load_demo_fleet", "load_demo_usage", "load_demo_results"):
        with capture(execute=True):
            call_command(command, stdout=out)
    return out.getvalue()


def test_the_first_run_computes_the_fleet_analysis_and_the_demo_plan(
    client, viewer, django_capture_on_commit_callbacks
):
    from planner.demo import DEMO_PLAN_NAME
    from planner.models import Analysis, Plan

    out = _make_run_commands(django_capture_on_commit_callbacks)
    assert "fleet analysis computed, demo plan computed" in out
    analysis = Analysis.objects.get()
    assert analysis.scope == "fleet" and analysis.status == "succeeded" and not analysis.stale
    assert (analysis.period_end - analysis.period_start).days == 30
    summary = analysis.results["summary"]
    assert summary["pools"] == 3 and summary["coverage"]["clusters_covered"] == 3
    assert {row["currency"] for row in summary["money_by_currency"]} == {"EUR", "USD"}

    plan = Plan.objects.get()
    assert plan.name == DEMO_PLAN_NAME and plan.status == "succeeded" and not plan.stale
    rows = {row["site"]: row for row in plan.results["options"]}
    assert set(rows) == {"Frankfurt DC1 (air)", "Ulanqab DC2 (liquid)"}
    for row in rows.values():
        assert row["feasible"] and row["cards"] == 1024
        assert row["days"] == pytest.approx(SEED_DAYS, rel=1e-6)
    assert rows["Frankfurt DC1 (air)"]["currency"] == "EUR"  # the shipped ECB rate priced it
    assert plan.results["exchange_rates"][0]["provenance"] == "reference"

    client.force_login(viewer)
    html = client.get("/").content.decode()
    assert "No fleet analysis yet" not in html
    assert "The five factors" in html and 'id="chart-analyses-waterfall' in html
    assert "Money lost" in html


def test_running_it_again_leaves_everything_fresh_and_computes_nothing(
    django_capture_on_commit_callbacks,
):
    from planner.models import Analysis, Plan

    _make_run_commands(django_capture_on_commit_callbacks)
    before = {
        "analyses": list(Analysis.objects.values_list("pk", "succeeded_at")),
        "plans": list(Plan.objects.values_list("pk", "succeeded_at")),
    }
    out = _make_run_commands(django_capture_on_commit_callbacks)
    assert "fleet analysis fresh already, kept, demo plan exists already, kept" in out
    assert list(Analysis.objects.values_list("pk", "succeeded_at")) == before["analyses"]
    assert list(Plan.objects.values_list("pk", "succeeded_at")) == before["plans"]
    assert not Analysis.objects.filter(stale=True).exists()
    assert not Plan.objects.filter(stale=True).exists()


def test_a_stale_fleet_analysis_is_replaced_by_a_fresh_one(django_capture_on_commit_callbacks):
    from inventory.models import Site
    from planner.models import Analysis

    _make_run_commands(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        site = Site.objects.get(name="Frankfurt DC1 (air)")
        site.pue = 1.6
        site.save()
    first = Analysis.objects.get()
    assert first.stale and first.stale_reason.startswith("Site Frankfurt DC1 (air) was edited")
    call_command("load_demo_results", stdout=io.StringIO())
    latest = Analysis.objects.exclude(pk=first.pk).get()
    assert latest.status == "succeeded" and not latest.stale
