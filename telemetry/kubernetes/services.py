"""Fetching a Kubernetes source: queue a fetch, run it, record how it went; the rule that keeps
a cluster's allocation from one source kind (docs/kubernetes-usage.md).

A fetch reads ``(W0, W1]``: W0 the UTC midnight before ``cursor − overlap`` (a first fetch:
the day before), W1 the last whole step before now; one range query per UTC day (bounded
answers). In one transaction it deletes the cluster's Kubernetes records starting in the
window and writes the window's segments through the usage imports' writer, with the run's
success: a fetch read twice is the same rows. A failure writes nothing, keeps the cursor,
says why and waits longer before the next try (capped), as a live Slurm source does.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
from django.db import transaction
from django.utils import timezone

from accounting.imports.writers import usage_writer
from accounting.live_source_runs import record_failure
from accounting.models import ImportJob, UsageRecord
from accounting.rollups import queue_refresh
from accounting.signals import usage_imported
from accounting.slurmrestd_source import SlurmrestdSource
from core.jobs import lifecycle
from core.jobs.status import JobStatus
from inventory.models import Cluster
from telemetry.kubernetes import queries
from telemetry.kubernetes.models import (
    KubernetesSource,
    NodeMatch,
    TeamMatch,
)
from telemetry.kubernetes.segments import (
    ALLOCATION_LABELS,
    RECORD_PREFIX,
    Day,
    NodeResolver,
    Samples,
    Segments,
    TeamResolver,
    day_segments,
)
from telemetry.prometheus import PrometheusClient, PrometheusError

logger = logging.getLogger(__name__)

DAY_S = 86_400
FIRST_FETCH_LOOKBACK_S = DAY_S
MAX_DAYS_PER_FETCH = 31  # a longer gap is read in parts: the next fetch is due at once


class FetchRefused(Exception):
    """The fetch cannot run (no Prometheus, or the cluster takes Slurm usage)."""


# -- the one-source rule -------------------------------------------------------------------


def slurm_usage_refusal(cluster: Cluster) -> str | None:
    """Why ``cluster`` cannot take allocation from Kubernetes: it takes it from Slurm (a live
    slurmrestd source, a usage import that did not fail, or records that are not Kubernetes')."""
    if SlurmrestdSource.objects.filter(cluster=cluster).exists():
        return f"Cluster {cluster.name} takes its allocation from slurmrestd."
    slurm = UsageRecord.objects.filter(cluster=cluster).exclude(
        record_key__startswith=RECORD_PREFIX
    )
    imports = ImportJob.objects.filter(cluster=cluster).exclude(status=JobStatus.FAILED)
    if imports.exists() or slurm.exists():
        return f"Cluster {cluster.name} holds Slurm usage imports."
    return None


ONE_SOURCE_KIND = (
    "takes its GPU allocation from Kubernetes (a cluster takes it from one source kind, so "
    "no pool counts twice): delete its Kubernetes source first"
)
KUBERNETES = "Kubernetes"


def refuse_slurm_into_kubernetes(sender: Any, cluster_id: int, **kwargs: Any) -> None:
    """usage_imported receiver: a Slurm import or pull into a cluster that takes allocation
    from Kubernetes fails, inside its transaction, so nothing of it is stored."""
    from accounting.parsing import LineIssue, UsageValidationError

    if sender is KubernetesSource:
        return
    if KubernetesSource.objects.filter(cluster_id=cluster_id).exists():
        raise UsageValidationError([LineIssue(1, "Cluster", f"this cluster {ONE_SOURCE_KIND}")])


def kubernetes_upload_refusal(cluster: Cluster) -> str | None:
    """accounting.usage_sources upload check: a Slurm upload into a Kubernetes cluster is a
    400 at once, not a failure in the worker."""
    if KubernetesSource.objects.filter(cluster_id=cluster.pk).exists():
        return f"Cluster {cluster.name} {ONE_SOURCE_KIND}."
    return None


def kubernetes_clusters(cluster_ids: Sequence[int]) -> dict[int, str]:
    """accounting.usage_sources source names: the clusters that take usage from Kubernetes."""
    found = KubernetesSource.objects.filter(cluster_id__in=list(cluster_ids))
    return dict.fromkeys(found.values_list("cluster_id", flat=True), KUBERNETES)


# -- the window ----------------------------------------------------------------------------


def fetch_window(
    cursor: dt.datetime | None, now: dt.datetime, overlap_s: int, step_s: int
) -> tuple[int, int]:
    """(W0, W1] in epoch seconds: W0 a UTC midnight, W1 the last whole step before now,
    at most :data:`MAX_DAYS_PER_FETCH` days after W0."""
    now_s = int(now.timestamp())
    from_s = now_s - FIRST_FETCH_LOOKBACK_S if cursor is None else int(cursor.timestamp())
    # A second early: a cursor on a midnight re-reads the day before (its open records).
    start_s = (min(from_s, now_s) - overlap_s - 1) // DAY_S * DAY_S
    end_s = min(now_s // step_s * step_s, start_s + MAX_DAYS_PER_FETCH * DAY_S)
    return start_s, end_s


def day_chunks(start_s: int, end_s: int) -> list[tuple[int, int]]:
    return [(day, min(day + DAY_S, end_s)) for day in range(start_s, end_s, DAY_S)]


# -- reading -------------------------------------------------------------------------------


def client_for(source: KubernetesSource) -> PrometheusClient:
    if source.url:
        url, token = source.url, source.token()
    else:
        telemetry = getattr(source.cluster, "prometheus_source", None)
        if telemetry is None:
            raise FetchRefused(
                "No Prometheus URL: enter one, or add the cluster's telemetry source."
            )
        url, token = telemetry.url, telemetry.token()
    return PrometheusClient(url, token, timeout_s=source.timeout_s)


def _samples(client: PrometheusClient, query: str, day: Day, labels: tuple[str, ...]) -> Samples:
    if day.steps < 1:
        return Samples.empty(labels)
    answer = client.range_samples(query, day.start_s + day.step_s, day.end_s, day.step_s, labels)
    return Samples(*answer)


def _team_labels(client: PrometheusClient, label: str, selector: str, day: Day) -> dict[str, str]:
    """Each GPU pod's team-label value in the day (one instant query at its end)."""
    query = queries.pod_label_query(label, selector, max(1, day.end_s - day.start_s))
    answer = client.instant(query, day.end_s)
    if answer.empty or label not in answer:
        return {}
    answer = answer[answer[label].astype(str) != ""].drop_duplicates("uid")
    return dict(zip(answer["uid"].astype(str), answer[label].astype(str), strict=True))


def collect(
    client: PrometheusClient,
    source: Any,
    window: tuple[int, int],
    resolve_node: NodeResolver,
    resolve_team: TeamResolver,
    progress: Callable[[float], None] | None = None,
) -> Segments:
    """The window's segments, a UTC day at a time (one day's answers in memory at once)."""
    step, scrape, sel = source.step_s, source.scrape_interval_s, source.label_selector
    found = Segments(pd.DataFrame())
    chunks = day_chunks(*window)
    for index, (start_s, end_s) in enumerate(chunks):
        day = Day(start_s, end_s, step)
        allocation = _samples(client, queries.allocation_query(sel, scrape), day, ALLOCATION_LABELS)
        nodes = None
        if source.node_label:
            query = queries.node_label_query(source.node_label, sel, scrape)
            nodes = _samples(client, query, day, ("node", source.node_label))
            nodes.labels.columns = ["node", "node_label"]
        teams = _team_labels(client, source.team_label, sel, day) if source.team_label else {}
        found.add(
            day_segments(allocation, day, window[1], resolve_node, resolve_team, nodes, teams)
        )
        if progress is not None:
            progress((index + 1) / len(chunks))
    return found


def node_resolver(source: KubernetesSource) -> NodeResolver:
    rules = list(source.node_rules.select_related("node_group"))

    def resolve(node: str, label_value: str) -> tuple[int, int | None, int | None] | None:
        for rule in rules:
            value = node if rule.match == NodeMatch.NAME else label_value
            if value and rule.matches(value):
                group = rule.node_group
                return group.pk, group.pool_id, group.accelerator_id
        return None

    return resolve


def team_resolver(source: KubernetesSource) -> TeamResolver:
    rules = list(source.team_rules.all())

    def resolve(namespace: str, label_value: str) -> tuple[str, bool]:
        for rule in rules:
            value = namespace if rule.match == TeamMatch.NAMESPACE else label_value
            if value and rule.matches(value):
                return rule.team, True
        return source.default_team or label_value or namespace, False

    return resolve


# -- writing -------------------------------------------------------------------------------


def summary(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Card-hours per pool, team and card model (names; "unmapped" where none)."""
    if rows.empty:
        return []
    from inventory.models import AcceleratorModel, Pool

    pools = dict(Pool.all_objects.values_list("pk", "name"))
    cards = dict(AcceleratorModel.objects.values_list("pk", "name"))
    named = pd.DataFrame(
        {
            "pool": rows["pool_id"].map(pools).fillna("unmapped").astype(str),
            "team": rows["account"].astype(str),
            "card_model": rows["accelerator_id"].map(cards).fillna("unmapped").astype(str),
            "card_hours": rows["card_hours"].astype(float),
        }
    )
    sums = named.groupby(["pool", "team", "card_model"], as_index=False)["card_hours"].sum()
    sums["card_hours"] = sums["card_hours"].round(6)
    return sums.to_dict("records")[:500]


def _db_rows(cluster_id: int, rows: pd.DataFrame) -> pd.DataFrame:
    from accounting.imports.rows import USAGE_DB_COLUMNS

    frame = rows.assign(
        cluster_id=cluster_id, gpu_utilization=None, tokens_per_s=None, model_params=None,
        mfu=None, import_job_id=pd.array([None] * len(rows), dtype="Int64"),
    )  # fmt: skip
    for name in ("pool_id", "accelerator_id", "nodes"):
        frame[name] = frame[name].astype("Int64")
    for name in ("gpu_utilization", "tokens_per_s", "model_params", "mfu"):
        frame[name] = frame[name].astype("float64")
    for name in ("start", "end", "submit"):
        frame[name] = pd.to_datetime(frame[name], utc=True)
    return frame[list(USAGE_DB_COLUMNS)]


def _warnings(found: Segments) -> list[str]:
    warnings = []
    if found.unmapped_nodes:
        shown = ", ".join(sorted(found.unmapped_nodes)[:20])
        count = len(found.unmapped_nodes)
        warnings.append(
            f"{count} node(s) match no node rule (no pool or card model; their card-hours are "
            f"kept without a pool): {shown}"
        )
    if found.unknown_resources:
        warnings.append("Resources not counted: " + ", ".join(sorted(found.unknown_resources)))
    return warnings


def _succeed(
    source: KubernetesSource, run_id: Any, window: tuple[int, int], found: Segments
) -> dict[str, Any]:
    start = dt.datetime.fromtimestamp(window[0], dt.UTC)
    end = dt.datetime.fromtimestamp(window[1], dt.UTC)
    rows = found.rows
    with transaction.atomic():
        list(Cluster.all_objects.select_for_update().filter(pk=source.cluster_id).values("pk"))
        refusal = slurm_usage_refusal(source.cluster)
        if refusal:
            raise FetchRefused(refusal + " A cluster takes allocation from one source kind.")
        UsageRecord._base_manager.filter(
            cluster_id=source.cluster_id, record_key__startswith=RECORD_PREFIX, start__gte=start
        ).delete()
        writer = usage_writer(source.cluster_id, None)
        if len(rows):
            writer.write(_db_rows(source.cluster_id, rows.drop(columns="node_group_id")))
        writer.close()
        card_hours = float(rows["card_hours"].sum()) if len(rows) else 0.0
        done = lifecycle.finish(
            KubernetesSource, source.pk, run_id, cursor=end, window_start=start,
            window_end=end, last_success_at=timezone.now(), consecutive_failures=0,
            next_attempt_at=_next_attempt(source, end), records_written=len(rows),
            card_hours=card_hours, mapped=summary(rows), warnings=_warnings(found),
            unmapped_nodes=sorted(found.unmapped_nodes)[:200],
            unmapped_namespaces=sorted(found.unmapped_namespaces)[:200],
        )  # fmt: skip
        if not done:
            transaction.set_rollback(True)  # superseded: a newer run reads this again
            return {"skipped": source.pk}
        reason = (
            f"allocation read from Kubernetes for cluster {source.cluster.name}, "
            f"{start:%Y-%m-%d} to {end:%Y-%m-%d}."
        )
        usage_imported.send(KubernetesSource, cluster_id=source.cluster_id, reason=reason)
        queue_refresh([source.cluster_id])
    return {"records": len(rows), "card_hours": card_hours, "cursor": end.isoformat()}


def _next_attempt(source: KubernetesSource, end: dt.datetime) -> dt.datetime:
    behind = timezone.now() - end > dt.timedelta(days=1)  # a long gap read in parts
    return timezone.now() if behind else timezone.now() + dt.timedelta(seconds=source.interval_s)


def run_fetch(pk: int, run_id: str, now: dt.datetime | None = None) -> dict[str, Any]:
    """The worker's body for one run of a source's fetch (idempotent: the window is replaced);
    ``now`` (tests) places the window's end."""
    source = lifecycle.current_run(KubernetesSource, pk, run_id).select_related("cluster").first()
    if source is None or not lifecycle.mark_running(KubernetesSource, pk, run_id):
        return {"skipped": pk}
    now = now or timezone.now()
    window = fetch_window(source.cursor, now, source.overlap_s, source.step_s)
    try:
        refusal = slurm_usage_refusal(source.cluster)
        if refusal:
            raise FetchRefused(refusal + " A cluster takes allocation from one source kind.")
        client = client_for(source)
        try:
            found = collect(
                client, source, window, node_resolver(source), team_resolver(source),
                lambda share: lifecycle.progress(KubernetesSource, pk, run_id, 90 * share),
            )  # fmt: skip
        finally:
            client.close()
        return _succeed(source, run_id, window, found)
    except (FetchRefused, PrometheusError) as exc:
        logger.warning("Kubernetes fetch of %s failed: %s", source.cluster, exc)
        record_failure(source, run_id, str(exc), now)
        return {"failed": str(exc)}
