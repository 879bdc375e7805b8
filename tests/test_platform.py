"""platform/: gunicorn recycles its workers; `make run` (honcho) restarts a dead worker and beat
through platform/keep-running, which stops when it is told to."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.support.polling import wait_until
from tests.support.processes import run_python

ROOT = Path(__file__).resolve().parent.parent
KEEP_RUNNING = ROOT / "platform" / "keep-running"

READ_GUNICORN = """
from gunicorn.app.base import Application

class Probe(Application):
    def load_config(self):
        self.load_config_from_file("platform/gunicorn.conf.py")

    def load(self):
        return None

cfg = Probe().cfg
print(cfg.max_requests, cfg.max_requests_jitter)
"""


def gunicorn_recycling(**env: str) -> tuple[int, int]:
    """max_requests and its jitter, as gunicorn itself reads platform/gunicorn.conf.py."""
    result = run_python(READ_GUNICORN, **env)
    assert result.returncode == 0, result.stderr
    requests, jitter = result.stdout.split()
    return int(requests), int(jitter)


def test_gunicorn_recycles_its_workers_with_jitter():
    assert gunicorn_recycling() == (1000, 100)


def test_gunicorn_recycling_is_set_from_the_environment():
    assert gunicorn_recycling(GUNICORN_MAX_REQUESTS="50", GUNICORN_MAX_REQUESTS_JITTER="5") == (
        50,
        5,
    )


def procfile(name: str) -> dict[str, str]:
    lines = (ROOT / "platform" / name).read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip())


def test_make_run_keeps_the_worker_and_beat_running():
    processes = procfile("Procfile.dev")
    assert processes["worker"].startswith("platform/keep-running .venv/bin/celery -A config worker")
    assert processes["beat"].startswith("platform/keep-running .venv/bin/celery -A config beat")
    assert os.access(KEEP_RUNNING, os.X_OK)


def keep_running(tmp_path: Path, script: str) -> subprocess.Popen:
    env = {**os.environ, "FLEETWISE_RESTART_DELAY_S": "1"}
    with (tmp_path / "keep-running.log").open("w") as log:
        return subprocess.Popen(
            [str(KEEP_RUNNING), "sh", "-c", script], env=env, stderr=log, start_new_session=True
        )


def test_keep_running_starts_an_exited_command_again(tmp_path):
    starts = tmp_path / "starts"
    supervisor = keep_running(tmp_path, f"echo started >> {starts}; exit 3")
    try:
        wait_until(
            lambda: starts.exists() and len(starts.read_text().splitlines()) >= 3,
            timeout_s=30,
            what="three starts (pauses of 1 s and 2 s between them)",
        )
        assert supervisor.poll() is None
        log = (tmp_path / "keep-running.log").read_text()
        assert "exited with status 3; starting it again in 1 s" in log
        assert "starting it again in 2 s" in log  # the pause doubles after each quick exit
    finally:
        supervisor.terminate()
        supervisor.wait(timeout=10)


def test_keep_running_passes_a_stop_on_and_ends(tmp_path):
    marker = tmp_path / "child-pid"
    supervisor = keep_running(tmp_path, f"echo $$ > {marker}; exec sleep 300")
    wait_until(lambda: marker.exists() and marker.read_text().strip(), what="the child")
    child_pid = int(marker.read_text())
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=10) == 128 + signal.SIGTERM  # the child's status, passed on
    assert not Path(f"/proc/{child_pid}").exists()  # the child was stopped and reaped
