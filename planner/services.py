"""Analysis lifecycle: create, queue, record progress, finish or fail (keeping the last result)."""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.jobs import lifecycle as jobs
from core.jobs.dispatch import send_or_defer
from core.scopes import Scope
from inventory.models import Cluster, Pool, Site
from planner.events import analysis_succeeded
from planner.models import ANALYSIS_SCOPE_VALUES, Analysis, AnalysisPart

DEFAULT_PERIOD = dt.timedelta(days=30)


class AnalysisInputError(ValueError):
    """Bad analysis request; `errors` maps each field to why."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


SCOPE_MODELS = {Scope.POOL: Pool, Scope.CLUSTER: Cluster, Scope.SITE: Site}


class ScopeDeleted(LookupError):
    """The object an analysis covers was deleted: the run fails with this as its reason."""


def scope_label(scope: str, object_id: int | None) -> str:
    if scope == Scope.FLEET:
        return "Whole fleet"
    obj = SCOPE_MODELS[scope].objects.filter(pk=object_id).first()
    return str(obj) if obj else f"{scope} {object_id} (deleted)"


def clusters_in_scope(scope: str, object_id: int | None) -> list[int]:
    """Cluster ids a run of this scope fans out to (one part per cluster).

    Raises ScopeDeleted when the pool, cluster or site analysed no longer exists: an empty
    result would read as "nothing ran there", not "it is gone".
    """
    if scope != Scope.FLEET and not SCOPE_MODELS[scope].objects.filter(pk=object_id).exists():
        raise ScopeDeleted(f"The {scope} analysed (id {object_id}) was deleted; nothing to run.")
    clusters = Cluster.objects.order_by("pk")
    if scope == Scope.POOL:
        clusters = clusters.filter(pools__pk=object_id)
    elif scope == Scope.CLUSTER:
        clusters = clusters.filter(pk=object_id)
    elif scope == Scope.SITE:
        clusters = clusters.filter(site_id=object_id)
    return list(clusters.values_list("pk", flat=True))


def _validate(scope: str, object_id: int | None, start: dt.datetime, end: dt.datetime) -> None:
    errors: dict[str, str] = {}
    if scope not in ANALYSIS_SCOPE_VALUES:
        errors["scope"] = f"Must be one of {', '.join(ANALYSIS_SCOPE_VALUES)}."
    elif scope == Scope.FLEET:
        if object_id is not None:
            errors["object_id"] = "Leave empty (null) for the fleet scope."
    elif object_id is None:
        errors["object_id"] = f"Give the id of the {scope} to analyse."
    elif not SCOPE_MODELS[scope].objects.filter(pk=object_id).exists():
        errors["object_id"] = f"No {scope} with id {object_id}."
    if end <= start:
        errors["period_end"] = "The period must end after it starts."
    if errors:
        raise AnalysisInputError(errors)


@transaction.atomic
def start_analysis(
    *,
    scope: str,
    object_id: int | None = None,
    period_start: dt.datetime | None = None,
    period_end: dt.datetime | None = None,
    user=None,
) -> Analysis:
    """Create an analysis and queue its run once the transaction commits."""
    end = period_end or timezone.now().replace(minute=0, second=0, microsecond=0)
    start = period_start or end - DEFAULT_PERIOD
    _validate(scope, object_id, start, end)
    analysis = Analysis.objects.create(
        scope=scope,
        object_id=object_id,
        scope_label=scope_label(scope, object_id),
        period_start=start,
        period_end=end,
        created_by=user if user is not None and user.is_authenticated else None,
        queued_at=timezone.now(),
    )
    _queue(analysis)
    return analysis


@transaction.atomic
def recompute(analysis: Analysis) -> Analysis:
    """Start a fresh run; a run still in flight is superseded (its writes are ignored)."""
    analysis = Analysis.objects.select_for_update().get(pk=analysis.pk)
    analysis.parts_done = 0
    return jobs.queue(analysis)


def _queue(analysis: Analysis) -> None:
    # After commit; a broker outage leaves it queued and marked, sent when the broker is back.
    send_or_defer(analysis)


def analysis_clusters(analysis_id: int) -> tuple[list[int], int]:
    """The clusters the analysis's scope covers now, and how many its current run fanned out to."""
    analysis = Analysis.objects.get(pk=analysis_id)
    return clusters_in_scope(analysis.scope, analysis.object_id), analysis.parts_total


def current_run(analysis_id: int, run_id: str):
    """The analysis rows of this run only: empty once a newer run superseded it."""
    return jobs.current_run(Analysis, analysis_id, run_id)


def mark_running(analysis_id: int, run_id: str, parts_total: int) -> bool:
    return jobs.mark_running(Analysis, analysis_id, run_id, parts_total=parts_total)


def record_progress(analysis_id: int, run_id: str, parts_done: int, parts_total: int) -> None:
    # Parts take 5..90%, the final aggregation the rest.
    progress = 5 + int(85 * parts_done / max(parts_total, 1))
    jobs.progress(Analysis, analysis_id, run_id, progress, parts_done=parts_done)


def _accept_result(analysis: Analysis) -> None:
    # Edits made while this run was computing are not in it.
    analysis.stale = False
    analysis.stale_reason = ""


def finish(analysis_id: int, run_id: str, *, results: dict, input_snapshot: dict) -> bool:
    with transaction.atomic():
        done = jobs.finish(
            Analysis,
            analysis_id,
            run_id,
            apply=_accept_result,
            results=results,
            input_snapshot=input_snapshot,
        )
        if done:
            AnalysisPart.objects.filter(analysis_id=analysis_id).exclude(run_id=run_id).delete()
    if done:
        analysis_succeeded.send(sender=Analysis, analysis_id=analysis_id)
    return done


def fail(analysis_id: int, run_id: str, reason: str) -> None:
    """Record why a run failed; `results` keeps the last successful run's numbers."""
    jobs.fail(Analysis, analysis_id, run_id, reason)


STALE_INVENTORY = "The inventory changed after this run."


def mark_stale(level: str, ids: list[int] | None = None, reason: str = STALE_INVENTORY) -> int:
    """Flag analyses whose inputs an inventory edit (or a usage import) touched.

    An edit at `level` (site, cluster, pool, or "catalog" for the card catalog) touches that
    object, everything inside it and everything containing it, never its siblings. ``reason``
    names what changed; the latest one is kept.
    """
    if level == "catalog":
        affected = Q()
    else:
        ids = [i for i in (ids or []) if i is not None]
        if level == Scope.POOL:
            pools = Pool.objects.filter(pk__in=ids)
        elif level == Scope.CLUSTER:
            pools = Pool.objects.filter(cluster_id__in=ids)
        elif level == Scope.SITE:
            pools = Pool.objects.filter(cluster__site_id__in=ids)
        else:
            raise ValueError(f"unknown inventory level {level!r}")
        pool_ids = set(pools.values_list("pk", flat=True)) | (
            set(ids) if level == Scope.POOL else set()
        )
        cluster_filter = {Scope.POOL: "pools__pk__in", Scope.CLUSTER: "pk__in"}.get(
            level, "site_id__in"
        )
        cluster_ids = set(
            Cluster.objects.filter(**{cluster_filter: ids}).values_list("pk", flat=True)
        ) | (set(ids) if level == Scope.CLUSTER else set())
        site_ids = set(
            Site.objects.filter(clusters__pk__in=cluster_ids).values_list("pk", flat=True)
        ) | (set(ids) if level == Scope.SITE else set())
        affected = (
            Q(scope=Scope.FLEET)
            | Q(scope=Scope.POOL, object_id__in=pool_ids)
            | Q(scope=Scope.CLUSTER, object_id__in=cluster_ids)
            | Q(scope=Scope.SITE, object_id__in=site_ids)
        )
    matching = Analysis.objects.filter(affected)
    newly_stale = matching.filter(stale=False).update(stale=True, stale_reason=reason[:300])
    matching.filter(stale=True).update(stale_reason=reason[:300])  # the latest change
    return newly_stale
