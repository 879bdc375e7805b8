"""Kubernetes source tasks: one fetch by id and run id, and the beat step that queues the due
ones (config.settings: CELERY_BEAT_SCHEDULE "kubernetes-fetches", every minute)."""

from __future__ import annotations

from accounting.live_source_runs import live_source_tasks

FETCH_TASK = "telemetry.fetch_kubernetes"
DUE_TASK = "telemetry.fetch_due_kubernetes"

fetch_kubernetes, fetch_due_kubernetes = live_source_tasks(
    read_task=FETCH_TASK,
    due_task=DUE_TASK,
    model="telemetry.KubernetesSource",
    run="telemetry.kubernetes.services.run_fetch",
    what="Kubernetes fetch",
)
