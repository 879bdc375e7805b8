"""A slurmrestd of the test's own, in front of the real test cluster (platform/slurm/
test-cluster), that the test may stop and start; and small jobs submitted to that cluster,
timed by this process's clock (what the imported figures are checked against).

Skipped where Slurm is absent, except in CI, where they fail instead (tests/support/slurm.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass

from tests.support.slurm import (
    RESTD_CONF,
    job_state,
    require_cluster,
    sbatch,
    slurm,
    slurm_env,
)

require_slurm = require_cluster  # starts the test cluster; skips where Slurm is absent (not in CI)
__all__ = ["job_state", "require_slurm", "sbatch", "slurm"]

SLURMRESTD = shutil.which("slurmrestd") or "/usr/sbin/slurmrestd"
PLUGINS = "openapi/v0.0.38,openapi/dbv0.0.38"
POLL_S = 0.25


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def token(lifespan_s: int = 3600) -> str:
    """A JWT for root from the cluster (``scontrol token``)."""
    line = slurm("scontrol", "token", "username=root", f"lifespan={lifespan_s}").strip()
    return line.split("=", 1)[1]


class OwnSlurmrestd:
    """slurmrestd (JWT auth, the 22.05 plugins) on a port of its own, as user nobody."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [SLURMRESTD, "-a", "rest_auth/jwt", "-s", PLUGINS, f"127.0.0.1:{self.port}"]
        if os.geteuid() == 0:  # slurmrestd refuses to run as root (or as SlurmUser)
            command = ["runuser", "-u", "nobody", "--", *command]
        env = {**slurm_env(), "SLURM_CONF": str(RESTD_CONF), "SLURM_JWT": "daemon"}
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        self._wait(lambda: self.answers(), "answer")

    def stop(self) -> None:
        """Stop this slurmrestd (its own process group only) and wait until the port is shut."""
        if self.process is None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=15)
        self.process = None
        self._wait(lambda: not self.answers(), "stop answering")

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def _wait(self, done, what: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if done():
                return
            time.sleep(POLL_S)
        raise RuntimeError(f"slurmrestd on port {self.port} did not {what} in {timeout_s} s")


# -- jobs --------------------------------------------------------------------------------------


def accounted_state(job_id: str) -> str:
    """The job's state as slurmdbd holds it (``sacct``), or "" before it knows the job."""
    out = slurm("sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State", check=False)
    return out.strip().split("\n")[-1].split(" ")[0]


@dataclass
class TimedJob:
    """A job as this process saw it: when it was first seen running and first seen gone
    (each within one poll of the truth), so how long it ran is a range."""

    job_id: str
    cards: int
    seen_running: float = 0.0
    seen_gone: float = 0.0

    def wait_running(self, timeout_s: float = 120) -> None:
        self.seen_running = _poll(lambda: job_state(self.job_id) == "RUNNING", timeout_s)

    def wait_gone(self, timeout_s: float = 180) -> None:
        self.seen_gone = _poll(lambda: job_state(self.job_id) in ("", "COMPLETED"), timeout_s)

    def wait_accounted(self, state: str, timeout_s: float = 60) -> None:
        """Until slurmdbd holds the job in ``state`` (slurmctld reports to it a bit later)."""
        _poll(lambda: accounted_state(self.job_id) == state, timeout_s)

    def ran_s(self, slack_s: float = 2.0) -> tuple[float, float]:
        """How long it ran by this clock: one poll either side, and Slurm's whole seconds."""
        measured = self.seen_gone - self.seen_running
        return measured - POLL_S - slack_s, measured + POLL_S + slack_s


def _poll(done, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if done():
            return time.time()
        time.sleep(POLL_S)
    raise RuntimeError(f"no change in {timeout_s} s")
