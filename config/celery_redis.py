"""kombu's Redis transport, made to survive a broker outage with a task in flight.

What goes wrong (kombu 5.7.0, celery 5.7.0, redis-py 8.1.0; docs/decisions/0006): when Redis
drops, the worker's consumer calls ``Connection.collect()``, which detaches the transport from
its connection (``transport.client = None``) even though closing the channel failed half-way
on the dead socket (draining the BRPOP of a worker with a free child). The consumer then
closes the connection again; the channel, still open, restores its unacknowledged messages
through a new Redis pool, whose parameters come from ``transport.client.hostname``:
``AttributeError: 'NoneType' object has no attribute 'hostname'``. That error is not a
connection error, so the worker exits ("Unrecoverable error"); an idle worker has nothing to
restore and survives. The acknowledgement of the task that was running takes the same path
once the task ends. The same failure in earlier kombu releases: celery/kombu#970 and
celery/kombu#582 (restore or delete on close with the transport's client gone).

The fix: a channel whose transport is detached answers every new Redis call with a
``redis.exceptions.ConnectionError``, which kombu and celery handle as the broker being gone
(the worker reconnects; an acknowledgement that cannot reach Redis is logged). A message whose
acknowledgement was lost stays in Redis's unacked index and is delivered again after the
visibility timeout; the job's run id makes that second run a no-op (core.jobs.lifecycle).

Selected by ``CELERY_BROKER_TRANSPORT`` for ``redis://`` and ``rediss://`` brokers
(config/settings/base.py).
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

DETACHED = "the broker connection of this channel was closed (transport detached)"


class Channel(kombu_redis.Channel):
    """A Redis channel that treats a detached transport as a lost broker."""

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        # Every new pool starts here; without a client there is no broker to reach.
        if self.connection.client is None:
            raise RedisConnectionError(DETACHED)
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`Channel`."""

    Channel = Channel
