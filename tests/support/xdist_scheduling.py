"""How the parallel suite hands tests to its workers (`make test`, pytest-xdist).

The suite's heavy tests (a real Celery worker killed or cut from its broker, a browser walking
the screens: 20-90 s each) are the transactional ones. pytest-django runs them after the
tests in a rolled-back transaction, and xdist's load scheduling hands out chunks of up to a
sixth of what is pending: near the end one worker used to get most of them at once and ran
alone for ten minutes while the others had finished. Two changes share that tail:

- the order puts the tests without a database before the transactional ones (still after the
  rolled-back ones: a flush empties what migrations load), so the heavy tests come last;
- the chunks shrink with what is pending, and a worker on slow tests keeps just the one it
  runs and the one it holds, so the last heavy tests go to whichever worker is free.

Early chunks stay large: consecutive tests of a module stay on one worker, and its module
fixtures (a browser, the demo analysis) are set up once.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScheduling
from xdist.workermanage import WorkerController

from tests.support.database_use import database_use

ROLLED_BACK, NO_DATABASE, TRANSACTIONAL = 0, 1, 2
# A test this slow (s) marks its worker as on the heavy tail: queue no more than it needs.
SLOW_TEST_S = 0.1
# The largest chunk is pending / (workers × this): 1/48 of what is left with 3 workers.
CHUNK_DIVISOR = 16
MIN_QUEUED = 2  # the test a worker runs and the next one it holds (pytest needs the next item)


def run_order(item: pytest.Item) -> int:
    """Where a test runs: rolled back, then no database, then transactional (last)."""
    return {"rolled_back": ROLLED_BACK, "none": NO_DATABASE, "transactional": TRANSACTIONAL}[
        database_use(item)
    ]


def count_to_send(pending: int, workers: int, queued: int, last_duration_s: float) -> int:
    """How many more tests a worker gets now, given what is left and what it already holds."""
    if last_duration_s >= SLOW_TEST_S and queued >= MIN_QUEUED:
        return 0
    refill_below = max(MIN_QUEUED, pending // workers // 4)
    if queued >= refill_below:
        return 0
    fill_to = max(MIN_QUEUED, pending // workers // 2)
    chunk = max(MIN_QUEUED - queued, pending // (workers * CHUNK_DIVISOR))
    return max(0, min(fill_to - queued, chunk, pending))


class TailSharingScheduling(LoadScheduling):
    """xdist's load scheduling with chunks that shrink as the pending list drains."""

    def check_schedule(self, node: WorkerController, duration: float = 0) -> None:
        if node.shutting_down:
            return
        if not self.pending:
            node.shutdown()
            return
        count = count_to_send(
            len(self.pending), len(self.node2pending), len(self.node2pending[node]), duration
        )
        if count:
            self._send_tests(node, count)
