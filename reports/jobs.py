"""The reports' job kind (core.jobs.registry), registered from ReportsConfig.ready.

A report is not a durable job with run ids: its generation is claimed (queued -> generating)
and the claim's time is its heartbeat. A stalled generation goes back to "queued" and is sent
again; a report stuck in "sending" is never re-sent (at most one e-mail).
"""

from __future__ import annotations

from core.jobs.registry import JobKind, register


def _claim_stalled(model, row: dict, now) -> bool:
    """Back to queued: generation's own claim (queued -> generating) then admits one worker."""
    same = {"pk": row["pk"], "status": "generating", "claimed_at": row["claimed_at"]}
    return bool(model.objects.filter(**same).update(status="queued", claimed_at=None))


def register_jobs() -> None:
    from reports.models import Report, ReportStatus

    register(
        JobKind(
            model=Report,
            task="reports.generate_report",
            guarded=False,
            running_status=ReportStatus.GENERATING,
            heartbeat_field="claimed_at",
            fallback_times=("queued_at",),
            open_statuses=(ReportStatus.QUEUED, ReportStatus.GENERATING),
            claim=_claim_stalled,
        )
    )
