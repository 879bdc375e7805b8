"""The Celery application; tasks are discovered in every installed Django app.

Every task's base is :class:`config.quarantine.QuarantineTask` (the poison-task ledger), and
each prefork child caps its own address space (``FLEETWISE_WORKER_MEMORY_LIMIT_MB``): a task
that runs away gets a MemoryError it can report instead of the host's OOM killer.
"""

import os
import resource

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("fleetwise", task_cls="config.quarantine:QuarantineTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.worker_process_init.connect
def limit_child_memory(**_) -> None:
    """Cap a prefork child's address space; 0 leaves it unlimited."""
    from django.conf import settings

    limit_mb = settings.FLEETWISE_WORKER_MEMORY_LIMIT_MB
    if not limit_mb:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = limit_mb * 2**20
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
