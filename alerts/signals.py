"""Evaluate the rules after each usage import and each finished analysis."""

from __future__ import annotations

from django.db import transaction
from django.dispatch import receiver

from accounting.signals import usage_imported
from planner.events import analysis_succeeded


def queue_evaluation() -> None:
    from core.jobs.dispatch import send_task

    transaction.on_commit(lambda: send_task("alerts.evaluate_alerts"), robust=True)


@receiver(usage_imported, dispatch_uid="alerts.usage_imported")
def after_usage_import(sender, **kwargs) -> None:
    queue_evaluation()


@receiver(analysis_succeeded, dispatch_uid="alerts.analysis_succeeded")
def after_analysis(sender, **kwargs) -> None:
    queue_evaluation()
