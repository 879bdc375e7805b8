"""Accounting's job kinds (core.jobs.registry), registered from AccountingConfig.ready."""

from __future__ import annotations

from core.jobs.registry import JobKind, register


def register_jobs() -> None:
    from accounting.models import ImportJob, RollupRefresh, SlurmrestdSource

    # An import's row is created with the upload: its creation is its first sign of life.
    register(
        JobKind(
            model=ImportJob,
            task="accounting.run_import",
            fallback_times=("started_at", "queued_at", "created"),
        )
    )
    register(JobKind(model=RollupRefresh, task="accounting.run_rollup_refresh"))
    # A live Slurm source is its own pull job: each pull is a new run of the source's row.
    register(JobKind(model=SlurmrestdSource, task="accounting.pull_slurmrestd"))
