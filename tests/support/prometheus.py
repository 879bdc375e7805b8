"""A real Prometheus (Debian's prometheus package: promtool and the server) for the telemetry
tests, and the skip mark for when it is not installed."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.support.net import free_port

PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
needs_prometheus = pytest.mark.skipif(
    PROMTOOL is None or PROMETHEUS is None,
    reason="Debian's prometheus package (promtool, prometheus) is not installed",
)


class PrometheusServer:
    """One prometheus process on its own TSDB folder and port."""

    def __init__(self, tsdb: Path, workdir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "prometheus.yml"
        config.write_text("global: {}\n")
        self.log = (workdir / f"prometheus-{self.port}.log").open("w")
        self.process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tsdb}",
                "--storage.tsdb.retention.time=100y",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("prometheus did not become ready")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.log.close()
