"""The planner's job kinds (core.jobs.registry), registered from PlannerConfig.ready."""

from __future__ import annotations

from collections.abc import Callable

from core.jobs.registry import JobKind, register


def resend_analysis(row: dict, send: Callable[..., None]) -> str:
    """A stalled run gets the parts it misses, or its finalize when none is missing."""
    from planner.models import AnalysisPart
    from planner.services import analysis_clusters

    pk, run_id = row["pk"], str(row["run_id"])
    clusters, parts_total = analysis_clusters(pk)
    if parts_total != len(clusters):
        # The clusters in scope changed since the run fanned out: start its fan-out again.
        send("planner.run_analysis", pk, run_id)
        return "coordinator"
    done = set(
        AnalysisPart.objects.filter(analysis_id=pk, run_id=run_id).values_list(
            "cluster_id", flat=True
        )
    )
    missing = [cid for cid in clusters if cid not in done]
    for cluster_id in missing:
        send("planner.analysis_part", pk, run_id, cluster_id)
    if not missing:
        send("planner.finalize_analysis", pk, run_id)
    return f"{len(missing)} part(s)" if missing else "finalize"


def register_jobs() -> None:
    from planner.models import Analysis, Plan

    register(
        JobKind(
            model=Analysis,
            task="planner.run_analysis",
            tasks=("planner.analysis_part", "planner.finalize_analysis"),
            resend=resend_analysis,
        )
    )
    register(JobKind(model=Plan, task="planner.compute_plan"))
