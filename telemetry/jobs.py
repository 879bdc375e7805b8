"""Telemetry fetches as durable jobs (core.jobs): their kind, and the lifecycle calls the
fetch makes, bound to TelemetryFetch (every write guarded by the run id)."""

from __future__ import annotations

from typing import Any

from core.jobs import lifecycle
from core.jobs.registry import JobKind, register

TASK = "telemetry.run_fetch"


def register_jobs() -> None:
    from telemetry.models import TelemetryFetch

    # A fetch row is created with the request: its creation is its first sign of life.
    register(
        JobKind(
            model=TelemetryFetch, task=TASK, fallback_times=("started_at", "queued_at", "created")
        )
    )
    from telemetry.kubernetes.models import KubernetesSource
    from telemetry.kubernetes.tasks import FETCH_TASK

    # A Kubernetes source is its own fetch job: each fetch is a new run of the source's row.
    register(JobKind(model=KubernetesSource, task=FETCH_TASK))


def _model():
    from telemetry.models import TelemetryFetch

    return TelemetryFetch


def current_run(pk: int, run_id: Any):
    return lifecycle.current_run(_model(), pk, run_id)


def queue(fetch):
    """Save the fetch queued and send its task after commit (deferred on a broker outage)."""
    return lifecycle.queue(fetch, new_run=fetch.pk is not None)


def mark_running(pk: int, run_id: Any) -> bool:
    return lifecycle.mark_running(_model(), pk, run_id)


def progress(pk: int, run_id: Any, fraction: float) -> None:
    lifecycle.progress(_model(), pk, run_id, max(5.0, 100 * fraction))


def finish(pk: int, run_id: Any, **results: Any) -> bool:
    return lifecycle.finish(_model(), pk, run_id, **results)


def fail(pk: int, run_id: Any, reason: str) -> bool:
    """Record why; the rollups of earlier fetches stay as they were."""
    return lifecycle.fail(_model(), pk, run_id, reason)
