"""A private redis-server for one test, on a free port, that the test stops and starts again
(a broker outage); nothing is persisted (``--save "" --appendonly no``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from tests.support.net import free_port
from tests.support.polling import wait_until


def redis_server_binary() -> str:
    """redis-server's path; CI has it (.ci/run starts one); elsewhere the test is skipped."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is missing; CI needs it for the broker outage tests")
        pytest.skip("redis-server not installed (apt-get install redis-server)")
    return binary


class RedisServer:
    """One redis-server process at a time on a fixed port; ``stop`` kills it (a crash)."""

    def __init__(self, binary: str, port: int, log_path: Path) -> None:
        self.binary, self.port, self.log_path = binary, port, log_path
        self.proc: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def answers(self) -> bool:
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False
        finally:
            client.close()

    def start(self) -> None:
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        with self.log_path.open("a") as log:
            self.proc = subprocess.Popen([self.binary, *args], stdout=log, stderr=subprocess.STDOUT)
        wait_until(self.answers, timeout_s=10, what=f"redis-server on port {self.port}")

    def stop(self) -> None:
        """SIGKILL: the broker drops every connection at once, as a crashed host would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@contextmanager
def redis_server(log_path: Path) -> Iterator[RedisServer]:
    """A running private redis-server; killed at the end whatever its state."""
    server = RedisServer(redis_server_binary(), free_port(), log_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
