"""Finishing the jobs of a worker that died (SIGKILL, OOM, a lost machine) exactly once.

Tasks ack late, so a message is only acknowledged once its task returned. What brings a
killed worker's job back depends on the broker:

* Redis keeps the unacknowledged message and hands it out again once it is older than the
  broker's ``visibility_timeout`` (``FLEETWISE_BROKER_VISIBILITY_TIMEOUT_S``, default 65 min,
  longer than the hard task time limit so a healthy long task is never delivered twice).
* The filesystem broker (the embedded default) removes a message when a worker takes it:
  nothing is ever redelivered.

So every job also carries a heartbeat while a worker runs it: ``heartbeat()`` wraps the task
body and refreshes a timestamp every ``FLEETWISE_HEARTBEAT_INTERVAL_S``. The beat task
``config.recover_stalled`` (every minute, like ``config.dispatch_pending``) re-sends the jobs
whose heartbeat is older than ``FLEETWISE_STALLED_AFTER_S`` while they still say running.
What a re-send is belongs to each job kind (core.jobs.registry, filled by the apps), e.g.:

* an analysis: the parts of its run that are missing, or its finalize when none is;
* a usage import: the whole file again (the dead run's transaction was rolled back, so
  nothing of it is visible; the upserts of the new run are the only ones that land);
* a report generation: its claim goes back to "queued" and generation is sent again (a
  report stuck in "sending" is left alone: at most one e-mail, an admin retries it).

Re-sending is always safe because every write is guarded: tasks write only under their
``run_id``, analysis parts are unique per run and cluster, an import records success only
once, a report is generated under a claim. A redelivered message and a recovery both arriving
(Redis) therefore still finish the job once.

Where the heartbeat lives: on PostgreSQL a column of the job's row (``heartbeat_at``, the
report's ``claimed_at``), written from a thread over its own autocommit connection, so it is
seen while the task's transaction is still open and from any machine. SQLite allows one
writer, and a usage import holds that write lock for the whole file; there the thread touches
a file next to the database instead (SQLite means one machine anyway).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

from celery import shared_task
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.utils import timezone

from core.jobs.dispatch import UNREACHABLE, WORKERS_UNAVAILABLE, send_task
from core.jobs.registry import JobKind, kinds, label_of
from core.jobs.transient import TRANSIENT

logger = logging.getLogger(__name__)

# Options of every job task: acknowledged after it ran, so a killed worker's task is
# delivered again; transient database errors (core.jobs.transient: any layer's, a task
# re-raises a wrapped one with ``raise_if_transient``) retried by Celery with jittered back-off.
DURABLE_TASK_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": TRANSIENT,
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 5,
}


def _kind(label: str) -> JobKind:
    return next(kind for kind in kinds() if kind.label == label)


def _uses_files() -> bool:
    return connection.vendor == "sqlite"


def _beat_dir() -> Path:
    """Heartbeat files of this SQLite database (one folder per database file)."""
    name = str(connection.settings_dict["NAME"])
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return Path(settings.FLEETWISE_HEARTBEAT_DIR) / digest


def _beat_file(label: str, pk: int) -> Path:
    return _beat_dir() / f"{label}-{pk}"


class _Beater(threading.Thread):
    """Refreshes one job's heartbeat every interval until stopped."""

    def __init__(self, kind: JobKind, pk: int, run_id: str | None) -> None:
        super().__init__(name=f"heartbeat-{kind.label}-{pk}", daemon=True)
        self.kind, self.label, self.pk, self.run_id = kind, kind.label, pk, run_id
        self.stopped = threading.Event()
        # Opened at the first beat from the thread: most tasks end before it (no connection).
        self.side = None
        self.file = _beat_file(kind.label, pk) if _uses_files() else None

    def beat(self, db=None) -> None:
        """One beat, over ``db`` (the task's connection, before its work starts) or else the
        thread's own autocommit connection (seen while the task's transaction is open)."""
        if self.file is not None:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            self.file.touch()
            return
        if db is None:
            if self.side is None:
                self.side = connections.create_connection(DEFAULT_DB_ALIAS)
            db = self.side
        model, column = self.kind.model, self.kind.model._meta.get_field(self.kind.heartbeat_field)
        table = db.ops.quote_name(model._meta.db_table)
        where, params = "id = %s AND status = %s", [self.pk, self.kind.running_status]
        if self.run_id is not None:
            where += " AND run_id = %s"
            params.append(self.run_id)
        with db.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET {column.column} = %s WHERE {where}",  # noqa: S608  # nosec B608
                [timezone.now(), *params],
            )

    def run(self) -> None:
        try:
            while not self.stopped.wait(settings.FLEETWISE_HEARTBEAT_INTERVAL_S):
                try:
                    self.beat()
                except Exception:  # a missed beat must never break the task it watches
                    logger.warning("heartbeat of %s %s failed", self.label, self.pk, exc_info=True)
        finally:
            if self.side is not None:
                self.side.close()  # in the thread that opened it (Django requires so)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.touch()  # its time stays the job's last sign of life (pruned later)


@contextlib.contextmanager
def heartbeat(model, pk: int, run_id: str | None = None) -> Iterator[None]:
    """Keep the job's heartbeat fresh while the block runs (the task body of a worker)."""
    beater = _Beater(_kind(label_of(model)), pk, run_id)
    label = beater.label
    try:
        beater.beat(connection)
    except Exception:
        logger.warning("first heartbeat of %s %s failed", label, pk, exc_info=True)
    beater.start()
    try:
        yield
    finally:
        beater.stop()


def _last_beats(kind: JobKind, rows: list[dict]) -> dict[int, dt.datetime | None]:
    """When each job last showed a sign of life: the latest of its heartbeat column, its
    start/queue times (a worker killed before its first beat) and, on SQLite, its file."""
    label, times = kind.label, (kind.heartbeat_field, *kind.fallback_times)
    beats = {row["pk"]: max((row[t] for t in times if row[t]), default=None) for row in rows}
    if _uses_files():
        for pk in beats:
            with contextlib.suppress(FileNotFoundError):
                mtime = _beat_file(label, pk).stat().st_mtime
                touched = dt.datetime.fromtimestamp(mtime, tz=dt.UTC)
                beats[pk] = max(beats[pk], touched) if beats[pk] else touched
    return beats


def stalled(label: str, now: dt.datetime | None = None) -> list[dict]:
    """The jobs of ``label`` a worker holds whose heartbeat is older than the threshold."""
    kind = _kind(label)
    now = now or timezone.now()
    cutoff = now - dt.timedelta(seconds=settings.FLEETWISE_STALLED_AFTER_S)
    run_id = ["run_id"] if kind.guarded else []
    rows = list(
        kind.model.objects.filter(status=kind.running_status).values(
            "pk", kind.heartbeat_field, *kind.fallback_times, *run_id
        )
    )
    beats = _last_beats(kind, rows)
    return [row for row in rows if beats[row["pk"]] is None or beats[row["pk"]] < cutoff]


def _claim(kind: JobKind, row: dict, now: dt.datetime) -> bool:
    """Take the job over for re-sending (one UPDATE: two recoverers never both send it) and
    give the new run a fresh heartbeat, so it is not re-sent again before it starts."""
    if kind.claim is not None:
        return kind.claim(kind.model, row, now)
    column = kind.heartbeat_field
    same = {"pk": row["pk"], "status": kind.running_status, column: row[column]}
    if kind.guarded:
        same["run_id"] = row["run_id"]
    return bool(kind.model.objects.filter(**same).update(**{column: now}))


def _send(name: str, *args) -> None:
    send_task(name, *args)


def _resend(kind: JobKind, row: dict) -> str:
    """Send the stalled job again: the kind's own way, or its task from the start."""
    if kind.resend is not None:
        return kind.resend(row, lambda name, *args: _send(name, *args))
    _send(kind.task, *kind.args(row["pk"], row.get("run_id")))
    return kind.task


def _wait_for_broker(kind: JobKind, row: dict) -> None:
    """The re-send found no broker: dispatch_pending sends the job once it is back."""
    if kind.on_unreachable is not None:
        kind.on_unreachable(kind.model, row)
        return
    rows = kind.model.objects.filter(pk=row["pk"])
    if kind.guarded:
        rows = rows.filter(run_id=row["run_id"])
    rows.update(error=WORKERS_UNAVAILABLE)


def recover_stalled(now: dt.datetime | None = None) -> dict[str, int]:
    """Re-send every job whose worker stopped beating; counts re-sent jobs per model."""
    now = now or timezone.now()
    sent: dict[str, int] = {}
    for kind in kinds():
        if kind.running_status is None:
            continue
        for row in stalled(kind.label, now):
            if not _claim(kind, row, now):
                continue  # finished, superseded or taken by another recoverer meanwhile
            try:
                what = _resend(kind, row)
            except UNREACHABLE as exc:
                _wait_for_broker(kind, row)
                logger.warning("broker unreachable, stalled %s %s waits: %s", kind.label, row, exc)
                continue
            logger.warning("%s %s: worker stopped beating, re-sent %s", kind.label, row["pk"], what)
            sent[kind.label] = sent.get(kind.label, 0) + 1
    if _uses_files():
        _prune_files(now)
    from core.jobs.quarantine import prune_ledger

    prune_ledger(now)
    return sent


def _prune_files(now: dt.datetime) -> None:
    """Drop SQLite heartbeat files a day old (their jobs finished long ago)."""
    folder = _beat_dir()
    if not folder.is_dir():
        return
    oldest = now.timestamp() - 24 * 3600
    for path in folder.iterdir():
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_mtime < oldest:
                path.unlink()


# The task keeps its historical name: beat schedules stored in the database refer to it.
@shared_task(name="config.recover_stalled", ignore_result=True)
def recover_stalled_task() -> dict[str, int]:
    """Beat runs this every minute: jobs of dead workers are sent again."""
    return recover_stalled()
