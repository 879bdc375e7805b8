"""Pulling a live Slurm source: queue a pull, run it, record how it went.

A pull asks slurmrestd for the window ``[cursor − overlap, now]`` (accounting.slurmrestd.
cursor), parses the answer into usage chunks (accounting.parsing.slurm_json) and upserts them
on ``(cluster, record_key)`` through the file imports' writer, in one transaction that also
records the run's success and the new cursor: a record read twice is one row, and a job that
was running is replaced when it ends. A failed pull writes no usage, keeps the cursor and
the records already stored, says why, and waits longer before the next try (capped).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from django.db import transaction
from django.utils import timezone

from accounting.imports.rows import (
    MAX_ISSUES,
    ClusterContext,
    ClusterNameCheck,
    cluster_context,
    usage_rows,
)
from accounting.imports.writers import usage_writer
from accounting.live_source_runs import record_failure
from accounting.parsing import UsageValidationError
from accounting.parsing.slurm_json import iter_slurm_json_chunks
from accounting.reader_limits import configure_readers
from accounting.signals import usage_imported
from accounting.slurmrestd.client import JobsAnswer, SlurmrestdClient, SlurmrestdError
from accounting.slurmrestd.cursor import Window, next_cursor, pull_window
from accounting.slurmrestd_source import SlurmrestdSource
from core.jobs import lifecycle
from inventory.models import Cluster

logger = logging.getLogger(__name__)

RUNNING_STATE = "running"


class PullRefused(Exception):
    """The pull cannot start (no token): recorded like a failed pull."""


@dataclass
class PullOutcome:
    """What a parsed answer brings: the rows to write and what moves the cursor."""

    rows: list[pd.DataFrame] = field(default_factory=list)
    running_starts: list[dt.datetime] = field(default_factory=list)
    unknown_gres: set[str] = field(default_factory=set)


# -- one pull ------------------------------------------------------------------------------


def _client(source: SlurmrestdSource) -> SlurmrestdClient:
    token = source.token()
    if not token:
        raise PullRefused(
            "No token stored (or the key changed since): enter the slurmrestd JWT again."
        )
    return SlurmrestdClient(
        source.url, api_version=source.api_version, user_name=source.user_name, token=token,
        timeout_s=source.timeout_s,
    )  # fmt: skip


def fetch(source: SlurmrestdSource, window: Window) -> JobsAnswer:
    client = _client(source)
    try:
        return client.jobs(window, source.slurm_cluster)
    finally:
        client.close()


def _chunks(answer: JobsAnswer, context: ClusterContext, timezone_name: str, window: Window):
    # The answer is already held to the outbound size cap: only line and block limits apply.
    configure_readers(max_bytes=None)
    return iter_slurm_json_chunks(
        answer.body,
        aliases=context.aliases,
        partition_models=context.partition_models,
        default_model=context.default_model,
        timezone=timezone_name,
        as_of=window.end,
        max_errors=MAX_ISSUES,
    )


def parse(
    answer: JobsAnswer, context: ClusterContext, timezone_name: str, window: Window
) -> PullOutcome:
    """The answer as database rows, all in memory (bounded by the answer's size cap);
    UsageValidationError when any job is bad or the answer mixes clusters."""
    outcome = PullOutcome()
    names = ClusterNameCheck()
    for chunk in _chunks(answer, context, timezone_name, window):
        rows, too_long = usage_rows(chunk, context, None)
        issues = names.issues(chunk["cluster"], chunk["source_line"].to_numpy()) + too_long
        if issues:
            raise UsageValidationError(issues)
        running = chunk.loc[chunk["state"].astype("object") == RUNNING_STATE, "start"]
        outcome.running_starts += [t.to_pydatetime() for t in running.dropna()]
        unknown = rows["accelerator_id"].isna().to_numpy()
        outcome.unknown_gres.update(rows.loc[unknown, "gres_type"].replace("", "(untyped)"))
        outcome.rows.append(rows)
    return outcome


def _warnings(outcome: PullOutcome) -> list[str]:
    if not outcome.unknown_gres:
        return []
    shown = ", ".join(sorted(outcome.unknown_gres)[:20])
    return [
        f"Card model unknown for gres types {shown}: add gres aliases or partition mappings; "
        "the next pulls re-read only their window (move the cursor back to redo older ones)."
    ]


def _stale_reason(cluster: Cluster, window: Window) -> str:
    return (
        f"usage pulled from slurmrestd for cluster {cluster.name}, "
        f"{window.start:%Y-%m-%d} to {window.end:%Y-%m-%d}."
    )


def _write(source: SlurmrestdSource, outcome: PullOutcome) -> dict[str, int]:
    """Upsert the rows inside the caller's transaction; the counts."""
    writer = usage_writer(source.cluster_id, None)
    for rows in outcome.rows:
        writer.write(rows)
    writer.close()
    return {
        "records_read": writer.written,
        "records_created": writer.created,
        "records_updated": writer.updated,
        "records_unchanged": writer.unchanged,
    }


def _succeed(
    source: SlurmrestdSource, run_id: Any, window: Window, answer: JobsAnswer, outcome: PullOutcome
) -> dict[str, Any]:
    """Write the rows and the run's success (new cursor, next attempt) in one transaction."""
    cursor = next_cursor(window, source.cursor, answer.end_times, outcome.running_starts)
    with transaction.atomic():
        # Imports into one cluster are serialized by a row lock on the cluster (PostgreSQL).
        list(Cluster.all_objects.select_for_update().filter(pk=source.cluster_id).values("pk"))
        counts = _write(source, outcome)
        done = lifecycle.finish(
            SlurmrestdSource, source.pk, run_id, cursor=cursor, window_start=window.start,
            window_end=window.end, last_success_at=window.end, consecutive_failures=0,
            next_attempt_at=window.end + dt.timedelta(seconds=source.interval_s),
            warnings=_warnings(outcome), **counts,
        )  # fmt: skip
        if not done:
            transaction.set_rollback(True)  # superseded: a newer run pulls this again
            return {"skipped": source.pk}
        if counts["records_created"] or counts["records_updated"]:
            _announce(source.cluster, window)
    return {**counts, "cursor": cursor.isoformat(), "jobs": answer.jobs}


def _announce(cluster: Cluster, window: Window) -> None:
    """Analyses of the cluster are out of date; its rollups are rebuilt after the commit."""
    from accounting.rollups import queue_refresh

    usage_imported.send(
        SlurmrestdSource, cluster_id=cluster.pk, reason=_stale_reason(cluster, window)
    )
    queue_refresh([cluster.pk])


def run_pull(pk: int, run_id: str) -> dict[str, Any]:
    """The worker's body for one run of a source's pull (idempotent: rows are upserted)."""
    source = lifecycle.current_run(SlurmrestdSource, pk, run_id).select_related("cluster").first()
    if source is None or not lifecycle.mark_running(SlurmrestdSource, pk, run_id):
        return {"skipped": pk}
    now = timezone.now()
    window = pull_window(source.cursor, now, source.overlap_s)
    try:
        answer = fetch(source, window)
        lifecycle.progress(SlurmrestdSource, pk, run_id, 50)
        outcome = parse(answer, cluster_context(source.cluster), source.timezone, window)
    except (PullRefused, SlurmrestdError, UsageValidationError) as exc:
        logger.warning("slurmrestd pull of %s failed: %s", source.cluster, exc)
        record_failure(source, run_id, str(exc), now)
        return {"failed": str(exc)}
    return _succeed(source, run_id, window, answer, outcome)
