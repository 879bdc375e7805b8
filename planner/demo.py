"""The demo's first results, computed in this process (no worker needed): a fleet analysis of
the last 30 days and one capacity plan, so a fresh install's first page shows the five
factors, the waterfall and money lost, and the planner an answer. Running it again computes
nothing that is still fresh."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.jobs.status import OPEN
from core.scopes import Scope
from inventory.models import Site
from inventory.services import DEMO_SITES
from planner import analysis as bridge
from planner import plans, services
from planner.models import Analysis, AnalysisPart, Plan

DEMO_PLAN_NAME = "GPT-3 175B on 1,024 A100 (Megatron-LM, about 34 days)"

# The published run (docs/sources.md, Baidu 2023; Narayanan et al., SC 2021): 175B parameters
# on 300B tokens with activation recomputation (8 FLOP per parameter and token) at 140 TFLOP/s
# per A100, dedicated cards: about 34 days on 1,024 cards. Priced at the demo sites.
DEMO_WORKLOAD = {"model_params": 175e9, "tokens": 300e9, "flops_per_param_token": 8}
DEMO_OVERRIDES = {
    "achieved_tflops_per_card": 140,
    "scaling": 1,
    "effective_time": 1,
    "utilization": 1,
}


@dataclass(frozen=True)
class DemoResults:
    analysis: Analysis | None
    analysis_computed: bool
    plan: Plan | None
    plan_computed: bool


def _fresh_fleet_analysis() -> Analysis | None:
    """A fleet analysis that needs no new run: in flight, or succeeded and not stale."""
    fleet = Analysis.objects.filter(scope=Scope.FLEET).defer("results", "input_snapshot")
    in_flight = fleet.filter(status__in=OPEN).order_by("-created").first()
    if in_flight is not None:
        return in_flight
    latest = fleet.filter(succeeded_at__isnull=False).order_by("-succeeded_at", "-pk").first()
    return latest if latest is not None and not latest.stale else None


def compute_fleet_analysis() -> Analysis:
    """A fleet analysis of the last 30 days, created and computed here (never queued)."""
    end = timezone.now().replace(minute=0, second=0, microsecond=0)
    analysis = Analysis.objects.create(
        scope=Scope.FLEET,
        scope_label=services.scope_label(Scope.FLEET, None),
        period_start=end - services.DEFAULT_PERIOD,
        period_end=end,
        queued_at=timezone.now(),
    )
    run_id = str(analysis.run_id)
    clusters = services.clusters_in_scope(Scope.FLEET, None)
    services.mark_running(analysis.pk, run_id, len(clusters))
    parts = []
    for cluster_id in clusters:
        rows, inputs = bridge.evaluate_cluster(analysis, cluster_id)
        parts.append(
            AnalysisPart.objects.create(
                analysis=analysis,
                run_id=run_id,
                cluster_id=cluster_id,
                pool_rows=rows,
                inputs=inputs,
            )
        )
    results, snapshot = bridge.summarise(analysis, parts)
    services.finish(analysis.pk, run_id, results=results, input_snapshot=snapshot)
    analysis.refresh_from_db()
    return analysis


def demo_plan_spec() -> dict[str, Any]:
    """The demo plan's options: 1,024 A100 at each demo site present (EUR and USD)."""
    names = [site["name"] for site in DEMO_SITES]
    site_ids = list(
        Site.objects.filter(name__in=names).order_by("name").values_list("pk", flat=True)
    )
    spec: dict[str, Any] = {"accelerators": ["A100 SXM4 80GB"], "cards": [1024]}
    if site_ids:
        spec["sites"] = site_ids
    return spec


def compute_demo_plan() -> Plan:
    """The demo plan, created and computed here (never queued)."""
    spec = demo_plan_spec()
    _, options = plans.validate_inputs(DEMO_WORKLOAD, spec, DEMO_OVERRIDES)
    plan = Plan.objects.create(
        name=DEMO_PLAN_NAME,
        workload=DEMO_WORKLOAD,
        options_spec=spec,
        overrides=DEMO_OVERRIDES,
        inventory_refs=plans.inventory_refs(options),
        queued_at=timezone.now(),
    )
    run_id = str(plan.run_id)
    plans.mark_running(plan.pk, run_id)
    results, summary, snapshot = plans.compute(plan)
    plans.finish(plan.pk, run_id, results=results, summary=summary, snapshot=snapshot)
    plan.refresh_from_db()
    return plan


def load_demo_results() -> DemoResults:
    """The fleet analysis and the demo plan, each computed only when none is fresh."""
    analysis = _fresh_fleet_analysis()
    analysis_computed = analysis is None
    if analysis is None:
        with transaction.atomic():
            analysis = compute_fleet_analysis()
    # A demo plan that exists stays as it is (stale or not: that is for its page to say).
    plan = Plan.objects.filter(name=DEMO_PLAN_NAME).defer("results", "input_snapshot").first()
    plan_computed = plan is None
    if plan is None:
        with transaction.atomic():
            plan = compute_demo_plan()
    return DemoResults(analysis, analysis_computed, plan, plan_computed)
