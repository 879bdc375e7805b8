"""The one polling helper of the test suite: wait for a worker, a job row or an API body."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any

FINISHED: tuple[str, ...] = ("succeeded", "failed")


def wait_until(
    fetch: Callable[[], Any],
    done: Callable[[Any], bool] = bool,
    *,
    timeout_s: float = 60,
    what: str = "the condition",
    interval_s: float = 0.1,
    on_retry: Callable[[], object] | None = None,
) -> Any:
    """Call ``fetch`` until ``done(value)``; return that value, else fail naming ``what``.

    ``on_retry`` runs between attempts (e.g. a recovery pass acting as beat would).
    """
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        value = fetch()
        if done(value):
            return value
        if on_retry is not None:
            on_retry()
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; last: {value!r:.400}")


def status_of(row: Any) -> str:
    """``status`` of an API body (dict) or a model row."""
    return row["status"] if isinstance(row, dict) else row.status


def wait_for_status(
    fetch: Callable[[], Any],
    what: str,
    statuses: Collection[str] = FINISHED,
    timeout_s: float = 60,
    interval_s: float = 0.1,
) -> Any:
    """Poll ``fetch`` (an API body or a model row) until its status is one of ``statuses``."""
    return wait_until(
        fetch,
        lambda row: status_of(row) in statuses,
        timeout_s=timeout_s,
        what=f"{what} to reach {'/'.join(statuses)}",
        interval_s=interval_s,
    )


def progress_recorder(fetch: Callable[[], dict]) -> tuple[Callable[[], dict], list]:
    """Wrap an API fetch so each poll's ``progress`` is kept (for monotonic-progress checks)."""
    seen: list = []

    def recording() -> dict:
        body = fetch()
        seen.append(body["progress"])
        return body

    return recording, seen


def wait_for_plan(client, plan_id: int, statuses=FINISHED, timeout_s=60) -> dict:
    """Poll a plan through the API until the worker finishes it; `seen_progress` lists the
    progress seen."""
    fetch, seen = progress_recorder(lambda: client.get(f"/api/v1/plans/{plan_id}/").json())
    body = wait_for_status(fetch, f"plan {plan_id}", statuses, timeout_s)
    body["seen_progress"] = seen
    return body
