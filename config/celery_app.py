"""The Celery application; tasks are discovered in every installed Django app.

Every task's base is :class:`core.jobs.quarantine.QuarantineTask` (the poison-task ledger), and
each prefork child caps its own address space (``FLEETWISE_WORKER_MEMORY_LIMIT_MB``): a task
that runs away gets a MemoryError it can report instead of the host's OOM killer.
"""

import os
import resource

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("fleetwise", task_cls="core.jobs.quarantine:QuarantineTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# The process that loaded the app; prefork children are forked from it and so differ.
_LOADING_PID = os.getpid()


@signals.worker_process_init.connect
def limit_child_memory(**_) -> None:
    """Cap a prefork child's address space; 0 leaves it unlimited.

    The solo pool sends the same signal in the worker's own process (in tests, the pytest
    process that also starts Chromium), which is left alone: only forked children are capped.
    """
    from django.conf import settings

    if os.getpid() == _LOADING_PID:
        return

    limit_mb = settings.FLEETWISE_WORKER_MEMORY_LIMIT_MB
    if not limit_mb:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = limit_mb * 2**20
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
