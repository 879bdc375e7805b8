"""The retry rule of job tasks (core.jobs.transient): transient database errors of any layer,
also wrapped by another exception, are raised as errors Celery's ``autoretry_for`` catches;
everything else is left to the task to record as a failure."""

from __future__ import annotations

import psycopg
import pytest
from django.db import IntegrityError, InterfaceError, OperationalError

from core.jobs.recovery import DURABLE_TASK_OPTIONS
from core.jobs.transient import TransientDatabaseError, is_transient, raise_if_transient


def _wrapped(inner: BaseException, *, explicit: bool) -> RuntimeError:
    """A RuntimeError raised ``from`` inner (explicit) or while handling it (implicit)."""
    try:
        try:
            raise inner
        except BaseException as exc:
            if explicit:
                raise RuntimeError("import failed") from exc
            raise RuntimeError("import failed")  # noqa: B904 (the implicit chain is the case)
    except RuntimeError as outer:
        return outer


def _caught_by_celery(exc: BaseException) -> bool:
    return isinstance(exc, DURABLE_TASK_OPTIONS["autoretry_for"])


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("server closed the connection unexpectedly"),
        InterfaceError("connection already closed"),
        psycopg.OperationalError("consuming input failed"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.InterfaceError("the connection is closed"),
    ],
)
def test_a_transient_error_of_any_layer_is_raised_as_is(error):
    assert is_transient(error)
    with pytest.raises(type(error)) as raised:
        raise_if_transient(error)
    assert raised.value is error and _caught_by_celery(raised.value)


@pytest.mark.parametrize("explicit", [True, False])
def test_a_wrapped_transient_error_is_raised_as_one_celery_retries(explicit):
    drop = psycopg.errors.AdminShutdown("terminating connection due to administrator command")
    outer = _wrapped(drop, explicit=explicit)
    assert not _caught_by_celery(outer)
    with pytest.raises(TransientDatabaseError) as raised:
        raise_if_transient(outer)
    assert _caught_by_celery(raised.value)
    assert raised.value.__cause__ is outer
    assert "AdminShutdown: terminating connection" in str(raised.value)


@pytest.mark.parametrize(
    "error",
    [
        ValueError("line 3, column State: unknown state"),
        IntegrityError("duplicate key"),
        psycopg.errors.UniqueViolation("duplicate key"),
        _wrapped(KeyError("samples"), explicit=True),
    ],
)
def test_other_errors_are_left_to_the_task(error):
    assert not is_transient(error)
    raise_if_transient(error)  # returns: the task records the failure


def test_a_cycle_in_the_chain_ends():
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__context__, second.__context__ = second, first
    assert not is_transient(first)
