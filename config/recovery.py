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
whose heartbeat is older than ``FLEETWISE_STALLED_AFTER_S`` while they still say running:

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
import importlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

from celery import current_app, shared_task
from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    InterfaceError,
    OperationalError,
    connection,
    connections,
    models,
)
from django.utils import timezone

from config.dispatch import UNREACHABLE, WORKERS_UNAVAILABLE

logger = logging.getLogger(__name__)

# Database errors worth a retry (a restart, a dropped connection), not a failed job.
TRANSIENT = (OperationalError, InterfaceError)
# Options of every job task: acknowledged after it ran, so a killed worker's task is
# delivered again; transient database errors retried with back-off.
DURABLE_TASK_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": TRANSIENT,
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "max_retries": 5,
}

# Model label -> (status that means "a worker has it", timestamp column of the heartbeat).
WATCHED = {
    "planner.Analysis": ("running", "heartbeat_at"),
    "accounting.ImportJob": ("running", "heartbeat_at"),
    "reports.Report": ("generating", "claimed_at"),
}
# Earlier timestamps a job falls back on when it never beat (a worker killed before its first).
FALLBACK_TIMES = {
    "planner.Analysis": ("started_at", "queued_at"),
    "accounting.ImportJob": ("started_at", "created"),
    "reports.Report": ("queued_at",),
}


def _model(label: str) -> type[models.Model]:
    from django.apps import apps

    return apps.get_model(label)


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

    def __init__(self, label: str, pk: int, run_id: str | None) -> None:
        super().__init__(name=f"heartbeat-{label}-{pk}", daemon=True)
        self.label, self.pk, self.run_id = label, pk, run_id
        self.stopped = threading.Event()
        # Opened at the first beat from the thread: most tasks end before it (no connection).
        self.side = None
        self.file = _beat_file(label, pk) if _uses_files() else None

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
        model = _model(self.label)
        status, column = WATCHED[self.label]
        table = db.ops.quote_name(model._meta.db_table)
        where, params = "id = %s AND status = %s", [self.pk, status]
        if self.run_id is not None:
            where += " AND run_id = %s"
            params.append(self.run_id)
        with db.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET {column} = %s WHERE {where}",  # noqa: S608  # nosec B608
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
def heartbeat(label: str, pk: int, run_id: str | None = None) -> Iterator[None]:
    """Keep the job's heartbeat fresh while the block runs (the task body of a worker)."""
    beater = _Beater(label, pk, run_id)
    try:
        beater.beat(connection)
    except Exception:
        logger.warning("first heartbeat of %s %s failed", label, pk, exc_info=True)
    beater.start()
    try:
        yield
    finally:
        beater.stop()


def _last_beats(label: str, rows: list[dict]) -> dict[int, dt.datetime | None]:
    """When each job last showed a sign of life: the latest of its heartbeat column, its
    start/queue times (a worker killed before its first beat) and, on SQLite, its file."""
    times = (WATCHED[label][1], *FALLBACK_TIMES[label])
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
    now = now or timezone.now()
    cutoff = now - dt.timedelta(seconds=settings.FLEETWISE_STALLED_AFTER_S)
    status, column = WATCHED[label]
    run_id = [] if label == "reports.Report" else ["run_id"]
    rows = list(
        _model(label)
        .objects.filter(status=status)
        .values("pk", column, *FALLBACK_TIMES[label], *run_id)
    )
    beats = _last_beats(label, rows)
    return [row for row in rows if beats[row["pk"]] is None or beats[row["pk"]] < cutoff]


def _claim(label: str, row: dict, now: dt.datetime) -> bool:
    """Take the job over for re-sending (one UPDATE: two recoverers never both send it) and
    give the new run a fresh heartbeat, so it is not re-sent again before it starts."""
    model = _model(label)
    status, column = WATCHED[label]
    same = {"pk": row["pk"], "status": status, column: row[column]}
    if label == "reports.Report":
        # Back to queued: generation's own claim (queued -> generating) then admits one worker.
        return bool(model.objects.filter(**same).update(status="queued", claimed_at=None))
    return bool(model.objects.filter(**same, run_id=row["run_id"]).update(**{column: now}))


def _send(name: str, *args) -> None:
    importlib.import_module(f"{name.split('.')[0]}.tasks")  # registers the task by name
    current_app.tasks[name].apply_async(args, retry=True, retry_policy={"max_retries": 1})


def _resend_analysis(pk: int, run_id: str) -> str:
    from planner.models import Analysis, AnalysisPart
    from planner.services import clusters_in_scope

    analysis = Analysis.objects.get(pk=pk)
    clusters = clusters_in_scope(analysis.scope, analysis.object_id)
    if analysis.parts_total != len(clusters):
        # The clusters in scope changed since the run fanned out: start its fan-out again.
        _send("planner.run_analysis", pk, run_id)
        return "coordinator"
    done = set(
        AnalysisPart.objects.filter(analysis_id=pk, run_id=run_id).values_list(
            "cluster_id", flat=True
        )
    )
    missing = [cid for cid in clusters if cid not in done]
    for cluster_id in missing:
        _send("planner.analysis_part", pk, run_id, cluster_id)
    if not missing:
        _send("planner.finalize_analysis", pk, run_id)
    return f"{len(missing)} part(s)" if missing else "finalize"


def _resend(label: str, row: dict) -> str:
    if label == "planner.Analysis":
        return _resend_analysis(row["pk"], str(row["run_id"]))
    if label == "accounting.ImportJob":
        _send("accounting.run_import", row["pk"], str(row["run_id"]))
        return "import"
    _send("reports.generate_report", row["pk"])
    return "generation"


def recover_stalled(now: dt.datetime | None = None) -> dict[str, int]:
    """Re-send every job whose worker stopped beating; counts re-sent jobs per model."""
    now = now or timezone.now()
    sent: dict[str, int] = {}
    for label in WATCHED:
        for row in stalled(label, now):
            if not _claim(label, row, now):
                continue  # finished, superseded or taken by another recoverer meanwhile
            try:
                what = _resend(label, row)
            except UNREACHABLE as exc:
                if label == "reports.Report":
                    # Generating again with its old claim: the next recovery tries it again.
                    _model(label).objects.filter(pk=row["pk"], status="queued").update(
                        status="generating", claimed_at=row["claimed_at"]
                    )
                else:
                    # dispatch_pending sends it (run_analysis / run_import) once the broker is back
                    _model(label).objects.filter(pk=row["pk"], run_id=row["run_id"]).update(
                        error=WORKERS_UNAVAILABLE
                    )
                logger.warning("broker unreachable, stalled %s %s waits: %s", label, row, exc)
                continue
            logger.warning("%s %s: worker stopped beating, re-sent %s", label, row["pk"], what)
            sent[label] = sent.get(label, 0) + 1
    if _uses_files():
        _prune_files(now)
    from config.quarantine import prune_ledger

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


@shared_task(name="config.recover_stalled", ignore_result=True)
def recover_stalled_task() -> dict[str, int]:
    """Beat runs this every minute: jobs of dead workers are sent again."""
    return recover_stalled()
