"""An import's as-of time: the parser's answer (accounting.parsing.as_of) stored and worded.

The order is the file's latest time, else the as-of given with the import (``--as-of``, the
form or API field), else the upload time. It is stored on the import job with the import's
rows (one transaction), and `accounting.coverage` lets the usage cover the cluster up to it.
"""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from accounting.imports.rows import ImportCounts
from accounting.models import AsOfSource, ImportJob
from accounting.parsing.as_of import AS_OF_FROM_FILE, AsOf

# A given as-of this far from the file's own latest time gets a warning (it was not used).
DISAGREEMENT = dt.timedelta(minutes=1)


def fallback_as_of(job: ImportJob) -> dt.datetime:
    """What the parser falls back on: the as-of given with the import, else its upload time."""
    return job.exported_at or job.created or timezone.now()


def note_as_of(job: ImportJob, clock: AsOf, counts: ImportCounts) -> None:
    """The resolved as-of time and its source on ``counts``; a warning when a given one lost."""
    if clock.value is None:
        return
    counts.as_of = clock.value.to_pydatetime()
    if clock.source == AS_OF_FROM_FILE:
        counts.as_of_source = AsOfSource.FILE
    else:
        counts.as_of_source = AsOfSource.FIELD if job.exported_at else AsOfSource.UPLOAD
    given = job.exported_at
    if clock.source == AS_OF_FROM_FILE and given and abs(given - counts.as_of) > DISAGREEMENT:
        counts.warnings.append(
            f"The as-of time given ({given:%Y-%m-%d %H:%M %Z}) was not used: the file's own "
            f"latest time is {counts.as_of:%Y-%m-%d %H:%M %Z}, and the file's time comes first."
        )


def store_as_of(job: ImportJob, counts: ImportCounts) -> None:
    """Write the as-of time on the import job, inside the import's transaction."""
    job.as_of, job.as_of_source = counts.as_of, counts.as_of_source
    if job.pk is not None:
        ImportJob.objects.filter(pk=job.pk).update(
            as_of=counts.as_of, as_of_source=counts.as_of_source
        )


def as_of_text(moment: dt.datetime | None, source: str) -> str:
    """E.g. "as of 2025-03-01 09:00 UTC (the latest time in the file)"; "" when unknown."""
    return ImportJob(as_of=moment, as_of_source=source).as_of_text
