"""Live Slurm source tasks: one pull by id and run id, and the beat step that queues the due
ones (config.settings: CELERY_BEAT_SCHEDULE "slurmrestd-pulls", every minute)."""

from __future__ import annotations

from accounting.live_source_runs import live_source_tasks

PULL_TASK = "accounting.pull_slurmrestd"
DUE_TASK = "accounting.pull_due_slurmrestd"

pull_slurmrestd, pull_due_slurmrestd = live_source_tasks(
    read_task=PULL_TASK,
    due_task=DUE_TASK,
    model="accounting.SlurmrestdSource",
    run="accounting.slurmrestd.services.run_pull",
    what="slurmrestd pull",
)
