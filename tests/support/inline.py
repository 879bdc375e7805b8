"""Run an analysis or a plan in this process, as the worker does, without a broker.

The same engine bridge and service calls as the tasks (planner.tasks): an analysis is
evaluated cluster by cluster, its parts stored, summarised and finished; a plan runs the body
of `compute_plan`. Start the run inside ``django_capture_on_commit_callbacks(execute=False)``
(or a test transaction) so nothing is queued for a worker, then call these.
"""

from __future__ import annotations


def run_analysis_inline(analysis):
    """Compute a started analysis (its current run) here; returns it refreshed."""
    from planner import analysis as bridge
    from planner import services
    from planner.models import AnalysisPart

    parts = []
    for cluster_id in services.clusters_in_scope(analysis.scope, analysis.object_id):
        rows, inputs = bridge.evaluate_cluster(analysis, cluster_id)
        parts.append(
            AnalysisPart.objects.create(
                analysis=analysis,
                run_id=analysis.run_id,
                cluster_id=cluster_id,
                pool_rows=rows,
                inputs=inputs,
            )
        )
    results, snapshot = bridge.summarise(analysis, parts)
    assert services.finish(
        analysis.pk, str(analysis.run_id), results=results, input_snapshot=snapshot
    )
    analysis.refresh_from_db()
    return analysis


def finished_analysis(scope: str = "fleet", object_id: int | None = None):
    """Start an analysis of the scope and run it here, marked running first as the
    coordinator task does (its parts are not stored); returns it finished."""
    from types import SimpleNamespace

    from django.db import transaction

    from planner import analysis as bridge
    from planner import services
    from planner.models import Analysis

    with transaction.atomic():
        created = services.start_analysis(scope=scope, object_id=object_id)
    run_id = str(created.run_id)
    clusters = services.clusters_in_scope(scope, object_id)
    services.mark_running(created.pk, run_id, len(clusters))
    parts = []
    for cluster_id in clusters:
        rows, inputs = bridge.evaluate_cluster(created, cluster_id)
        parts.append(SimpleNamespace(cluster_id=cluster_id, pool_rows=rows, inputs=inputs))
    results, snapshot = bridge.summarise(created, parts)
    assert services.finish(created.pk, run_id, results=results, input_snapshot=snapshot)
    return Analysis.objects.get(pk=created.pk)


def run_plan_inline(plan_id: int) -> None:
    """Run the plan's current run here (the body of the `compute_plan` task)."""
    from planner.models import Plan
    from planner.tasks import compute_plan

    plan = Plan.objects.get(pk=plan_id)
    compute_plan(plan.pk, str(plan.run_id))


def demo_fleet_analysis(capture):
    """A fleet analysis of what is in the database (the demo fleet, usually), started with
    ``capture`` (``django_capture_on_commit_callbacks``) holding back the worker, computed here."""
    from planner import services

    with capture(execute=False):
        analysis = services.start_analysis(scope="fleet")
    return run_analysis_inline(analysis)
