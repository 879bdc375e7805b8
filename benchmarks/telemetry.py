"""Time a telemetry fetch: 2,000 GPUs (250 hosts × 8), 30 days at 60 s, queried and rolled up.

The app's side of a fetch, as the worker runs it (``telemetry.fetch.fetch_prometheus``):
per day, the ten per-GPU queries (2,000 series each) and the four per-host range queries
(250 hosts × 288 five-minute means of the 60 s samples: 8.6 million points
over the month), then the job join with
3,000 Slurm jobs and the GPU-day rollups. Targets: < 60 s and < 500 MiB peak RSS.

The answers come from a stand-in for the Prometheus HTTP API in a separate process (its
time and memory are not the app's): building a real TSDB of 2,000 GPUs × 43,200 samples × 8
fields (700 million samples) with promtool would take hours, and what Prometheus spends
evaluating the queries is Prometheus' cost, not Fleetwise's. The tests run the same code
against a real Prometheus (tests/telemetry). Command (from the repository root)::

    .venv/bin/python benchmarks/telemetry.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs

import numpy as np
import pandas as pd

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from benchmarks.common import peak_rss_mib  # noqa: E402

HOSTS, GPUS_PER_HOST, DAYS, STEP_S = 250, 8, 30, 300  # STEP_S: the source's default
FIRST_DAY = dt.date(2026, 3, 1)
TARGET_S, TARGET_PEAK_RSS_MIB = 60.0, 500
JOBS = 3_000


def host_name(index: int) -> str:
    return f"gpu{index:04d}"


class Handler(BaseHTTPRequestHandler):
    """Answers query and query_range with synthetic values in Prometheus' JSON shape."""

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        body = _range(form) if self.path.endswith("query_range") else _instant(form)
        data = json.dumps({"status": "success", "data": body}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _instant(form: dict) -> dict:
    at = float(form["time"])
    rng = np.random.default_rng(int(at) + len(form["query"]))
    values = rng.uniform(0, 1, HOSTS * GPUS_PER_HOST)
    if form["query"].startswith("count_over_time"):
        values = np.round(values * 1440)
    result = [
        {
            "metric": {
                "Hostname": host_name(n // GPUS_PER_HOST),
                "gpu": str(n % GPUS_PER_HOST),
                "UUID": f"GPU-{n:08d}",
                "modelName": "NVIDIA H100 80GB HBM3",
            },
            "value": [at, repr(float(v))],
        }
        for n, v in enumerate(values)
    ]
    return {"resultType": "vector", "result": result}


def _range(form: dict) -> dict:
    start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
    times = np.arange(start, end + 1, step).astype(int).astype(str)
    rng = np.random.default_rng(int(start) + len(form["query"]))
    values = np.round(rng.uniform(0, 1, (HOSTS, len(times))), 3).astype(str)
    result = [
        {"metric": {"Hostname": host_name(h)}, "values": np.stack([times, values[h]], 1).tolist()}
        for h in range(HOSTS)
    ]
    return {"resultType": "matrix", "result": result}


def serve(port: int) -> None:
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def synthetic_jobs(tz: str) -> pd.DataFrame:
    """3,000 jobs of 1 to 8 whole hosts, a few hours to two days each, over the month."""
    rng = np.random.default_rng(7)
    start0 = int(pd.Timestamp(FIRST_DAY, tz=tz).timestamp())
    starts = start0 + rng.integers(0, DAYS * 86_400, JOBS)
    hosts = rng.integers(1, 9, JOBS)
    first = rng.integers(0, HOSTS - 8, JOBS)
    return pd.DataFrame(
        {
            "job_id": [str(n) for n in range(JOBS)],
            "account": [f"team-{n % 12}" for n in range(JOBS)],
            "pool_id": 1,
            "cards": hosts * GPUS_PER_HOST * 1.0,
            "start_s": starts,
            "end_s": starts + rng.integers(3_600, 2 * 86_400, JOBS),
            "hosts": [
                [host_name(f + k) for k in range(h)] for f, h in zip(first, hosts, strict=True)
            ],
        }
    )


def run(url: str, n_days: int = DAYS) -> dict:
    from core.outbound import OutboundPolicy
    from telemetry.fetch import fetch_prometheus
    from telemetry.prometheus import PrometheusClient

    tz = "UTC"
    days = [FIRST_DAY + dt.timedelta(days=n) for n in range(n_days)]
    source = SimpleNamespace(scrape_interval_s=60, step_s=STEP_S, label_selector="")
    # Each point of the 300 s host series averages five 60 s samples (promql.host_queries).
    jobs = synthetic_jobs(tz)
    # The stand-in listens on loopback, which the outbound policy allows only when told.
    client = PrometheusClient(
        url, timeout_s=120, policy=OutboundPolicy(allow_loopback=True),
        max_response_bytes=128 * 2**20,
    )  # fmt: skip
    started = time.perf_counter()
    telemetry = fetch_prometheus(client, days, tz, source, jobs)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "gpu_days": len(telemetry.gpu_days),
        "job_days": len(telemetry.job_days),
        "peak_rss_mib": peak_rss_mib(),
    }


def ceiling(url: str, n_days: int) -> float:
    """The same HTTP requests answered and decoded (json.loads) only: no parsing, no rollup."""
    import requests

    from telemetry import promql
    from telemetry.rollups import day_bounds_s

    days = [FIRST_DAY + dt.timedelta(days=n) for n in range(n_days)]
    session = requests.Session()
    started = time.perf_counter()
    for start_s, end_s in day_bounds_s(days, "UTC"):
        for query in promql.daily_queries(end_s - start_s, 60).values():
            session.post(f"{url}/api/v1/query", data={"query": query, "time": end_s}).json()
        for query in promql.host_queries(STEP_S, 60).values():
            form = {"query": query, "start": start_s + STEP_S, "end": end_s, "step": STEP_S}
            session.post(f"{url}/api/v1/query_range", data=form).json()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=19_991)
    parser.add_argument("--days", type=int, default=DAYS, help="fewer for a quick look")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port)
        return
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--port", str(args.port)])
    try:
        time.sleep(1.5)
        result = run(f"http://127.0.0.1:{args.port}", args.days)
        bare = ceiling(f"http://127.0.0.1:{args.port}", args.days)
    finally:
        server.terminate()
        server.wait()
    points = HOSTS * (86_400 // STEP_S) * args.days * 4
    print(
        f"{HOSTS * GPUS_PER_HOST} GPUs × {args.days} days at {STEP_S} s: {result['seconds']:.1f} s "
        f"(target < {TARGET_S:.0f} s), peak RSS {result['peak_rss_mib']:.0f} MiB "
        f"(target < {TARGET_PEAK_RSS_MIB}); {result['gpu_days']:,} GPU-days, "
        f"{result['job_days']:,} job-days, {points:,} host points parsed; ceiling (the same "
        f"requests, json.loads only) {bare:.1f} s, ratio {result['seconds'] / bare:.2f}"
    )


if __name__ == "__main__":
    main()
