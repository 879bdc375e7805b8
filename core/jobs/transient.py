"""Which errors a job task retries: transient database errors, whatever layer raised them.

A dropped connection reaches a task as Django's ``OperationalError``/``InterfaceError`` when
it happened inside Django's cursor wrapper, but as psycopg's own error when it happened in a
raw psycopg call (the usage import's ``COPY``), and sometimes wrapped by another exception
(``raise ... from``, or raised while handling it). ``is_transient`` looks at the whole chain;
``raise_if_transient`` raises such an error as one that Celery's ``autoretry_for`` (a tuple
of classes, see ``DURABLE_TASK_OPTIONS``) catches, so every job task retries it the same way.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
from django.db import InterfaceError, OperationalError

# Database errors worth a retry (a restart, a dropped connection, a failover), not a failed
# job: Django's wrappers and psycopg's own classes, with their subclasses (AdminShutdown, …).
TRANSIENT: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)
# How far down a chain of causes to look (a cycle or a very long chain stops here).
MAX_CHAIN_DEPTH = 16


class TransientDatabaseError(OperationalError):
    """A transient database error found inside another exception, raised for Celery to retry."""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, its ``__cause__`` and ``__context__``, theirs, … (each once, bounded)."""
    seen: set[int] = set()
    pending = [exc]
    while pending and len(seen) < MAX_CHAIN_DEPTH:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(e for e in (current.__context__, current.__cause__) if e is not None)


def is_transient(exc: BaseException) -> bool:
    """True when ``exc`` is, or was caused by, a transient database error."""
    return any(isinstance(link, TRANSIENT) for link in _chain(exc))


def raise_if_transient(exc: BaseException) -> None:
    """Raise ``exc`` as an error Celery's ``autoretry_for`` catches when it is transient (any
    layer, wrapped or not); return otherwise. Call it from the task's ``except`` block."""
    if isinstance(exc, TRANSIENT):
        raise exc
    cause = next((link for link in _chain(exc) if isinstance(link, TRANSIENT)), None)
    if cause is not None:
        raise TransientDatabaseError(f"{type(cause).__name__}: {cause}") from exc
