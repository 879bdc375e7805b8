"""How many background jobs of one kind a user may have queued or running at once.

A user at the limit is refused (HTTP 429 with ``Retry-After``, on the API and the pages), so
one person cannot fill every worker slot. When to try again is an estimate: the kind's
typical run time (the median of its recent runs) less how long the user's oldest open job
has been going, at least :data:`MIN_RETRY_AFTER_S`.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import models
from django.utils import timezone
from rest_framework.response import Response

from core.jobs.status import OPEN, JobStatus

MIN_RETRY_AFTER_S = 10
MAX_RETRY_AFTER_S = 3600
# A kind with no finished run yet: assume this long.
DEFAULT_RUN_S = 60.0
RECENT_RUNS = 20


@dataclass
class JobLimitReached(Exception):
    """The user already has ``limit`` open jobs of this kind; try again in ``retry_after_s``."""

    what: str  # one job, e.g. "background export"
    limit: int
    open_jobs: int
    retry_after_s: int

    @property
    def retry_at(self) -> dt.datetime:
        return timezone.now() + dt.timedelta(seconds=self.retry_after_s)

    @property
    def message(self) -> str:
        minutes = math.ceil(self.retry_after_s / 60)
        when = f"{minutes} minute{'s' if minutes != 1 else ''}"
        jobs = f"{self.open_jobs} {self.what}{'s' if self.open_jobs != 1 else ''}"
        return (
            f"You already have {jobs} queued or running; the limit is "
            f"{self.limit} per user. Try again in about {when} "
            f"(after {timezone.localtime(self.retry_at):%H:%M %Z}), once one of them has finished."
        )

    def __str__(self) -> str:
        return self.message


def _typical_run_s(model: type[models.Model]) -> float:
    recent = (
        model._default_manager.filter(status=JobStatus.SUCCEEDED, duration_s__isnull=False)
        .order_by("-finished_at")
        .values_list("duration_s", flat=True)[:RECENT_RUNS]
    )
    durations = [float(d) for d in recent]
    return statistics.median(durations) if durations else DEFAULT_RUN_S


def _retry_after_s(model: type[models.Model], open_jobs: models.QuerySet) -> int:
    """The typical run time less the elapsed time of the oldest open job (bounded)."""
    now = timezone.now()
    times = open_jobs.values_list("started_at", "queued_at")
    began = [started or queued for started, queued in times if started or queued]
    elapsed_s = max(((now - when).total_seconds() for when in began), default=0.0)
    remaining = _typical_run_s(model) - elapsed_s
    return int(min(MAX_RETRY_AFTER_S, max(MIN_RETRY_AFTER_S, math.ceil(remaining))))


def check_open_jobs(
    model: type[models.Model], owner_field: str, user, *, limit: int, what: str
) -> None:
    """Raise :class:`JobLimitReached` when ``user`` holds ``limit`` open jobs of ``model``
    (0: no limit). Call it inside the transaction that creates the job: the user's row is
    locked, so two requests at once cannot both pass."""
    if not limit or user is None or not getattr(user, "is_authenticated", False):
        return
    User = get_user_model()
    list(User._default_manager.select_for_update().filter(pk=user.pk).values_list("pk"))
    open_jobs = model._default_manager.filter(**{owner_field: user}, status__in=OPEN)
    count = open_jobs.count()
    if count >= limit:
        raise JobLimitReached(what, limit, count, _retry_after_s(model, open_jobs))


def too_many_jobs(exc: JobLimitReached) -> Response:
    """The API's answer to a user at the limit: 429, ``Retry-After`` and the message."""
    body = {
        "detail": exc.message,
        "limit": exc.limit,
        "open_jobs": exc.open_jobs,
        "retry_after_s": exc.retry_after_s,
    }
    return Response(body, status=429, headers={"Retry-After": str(exc.retry_after_s)})
