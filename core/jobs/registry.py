"""Job kinds: what each app tells the framework about its jobs, in its ``AppConfig.ready``.

core.jobs never names an app model: dispatch, recovery and the quarantine iterate over the
kinds registered here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import models

from core.jobs.status import OPEN, JobStatus

# (row of the stalled job, send(task_name, *args)) -> what was re-sent, for the log.
Resend = Callable[[dict, Callable[..., None]], str]
# (model, row, now) -> True when this recoverer took the job over.
Claim = Callable[[type[models.Model], dict, Any], bool]


@dataclass(frozen=True)
class JobKind:
    """One kind of job: its model, the task that runs it and how a dead run comes back.

    ``task`` takes ``(pk, run_id)`` (``(pk,)`` when not ``guarded``). ``tasks`` lists every
    task working on the job (its first argument the pk), for the quarantine.
    ``running_status`` None means the job is not watched by recovery.
    """

    model: type[models.Model]
    task: str
    tasks: tuple[str, ...] = ()
    guarded: bool = True
    running_status: str | None = JobStatus.RUNNING
    heartbeat_field: str = "heartbeat_at"
    fallback_times: tuple[str, ...] = ("started_at", "queued_at")
    open_statuses: tuple[str, ...] = tuple(OPEN)
    resend: Resend | None = None
    claim: Claim | None = None
    on_unreachable: Callable[[type[models.Model], dict], None] | None = None

    @property
    def label(self) -> str:
        return label_of(self.model)

    def args(self, pk: int, run_id: Any = None) -> tuple:
        return (pk, str(run_id)) if self.guarded else (pk,)


_KINDS: dict[str, JobKind] = {}


def label_of(model: type[models.Model]) -> str:
    return f"{model._meta.app_label}.{model.__name__}"


def register(kind: JobKind) -> JobKind:
    """Add (or replace: ``ready`` may run twice in tests) the kind of ``kind.model``."""
    _KINDS[kind.label] = kind
    return kind


def kinds() -> list[JobKind]:
    return list(_KINDS.values())


def kind_of(model: type[models.Model]) -> JobKind | None:
    return _KINDS.get(label_of(model))


def kind_of_task(task_name: str) -> JobKind | None:
    """The kind a task works on: its main task or one listed in ``tasks``."""
    for kind in _KINDS.values():
        if task_name == kind.task or task_name in kind.tasks:
            return kind
    return None
