"""The exports' job kind (core.jobs.registry), registered from ExportsConfig.ready."""

from __future__ import annotations

from core.jobs.registry import JobKind, register


def register_jobs() -> None:
    from exports.models import ExportJob

    register(JobKind(model=ExportJob, task="exports.build_export"))
