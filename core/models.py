"""Models of the core app (the job framework's delivery ledger and worker pulses); Django looks
for them here."""

from core.jobs.models import DurableJob, TaskDelivery, WorkerPulse
from core.retention.models import ExpiredFile

__all__ = ["DurableJob", "ExpiredFile", "TaskDelivery", "WorkerPulse"]
