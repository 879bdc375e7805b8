"""Models of the core app (the job framework's delivery ledger); Django looks for them here."""

from core.jobs.models import DurableJob, TaskDelivery

__all__ = ["DurableJob", "TaskDelivery"]
