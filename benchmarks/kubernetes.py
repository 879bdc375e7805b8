"""Time a Kubernetes allocation fetch: 2,000 GPUs (250 nodes × 8), 30 days at a 5-minute step.

The app's side of a fetch, as the worker runs it (``telemetry.kubernetes.services``): per UTC
day the allocation range query (every running GPU pod's series at 288 steps), the node-label
range query (250 nodes × 288 steps) and the pod team-label instant query; then the running
segments per pod, node group and team (``telemetry.kubernetes.segments``) and the frame of
usage-record columns the writer COPYs. Targets (the telemetry benchmark's): < 60 s, < 500 MiB.

The fleet: 125 inference nodes whose 1,000 GPUs hold one-GPU pods of 2 h to 3 days, 110
training nodes holding 8-GPU pods of 6 h to 4 days, 15 MIG nodes whose 120 GPUs hold pods of
2 × 3g.40gb; pods follow each other with gaps of up to an hour, and every 10th training node
moves pool (its label) every 5 days. About 1,230 series run at once: ~10 million pod points
and 2.2 million node-label points over the month.

The answers come from a stand-in for the Prometheus HTTP API in a separate process, which
builds them before the timing starts (its time and memory are not the app's); the tests run
the same code against a real Prometheus (tests/telemetry/kubernetes). The writer's database
COPY is not timed. Command (from the repository root)::

    .venv/bin/python benchmarks/kubernetes.py            # --days N for a shorter look
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from benchmarks.common import peak_rss_mib  # noqa: E402

NODES, GPUS_PER_NODE, DAYS, STEP_S, SCRAPE_S = 250, 8, 30, 300, 30
INFERENCE_NODES, TRAINING_NODES = 125, 110  # the rest are MIG nodes
START_S = 1_772_323_200  # 2026-03-01 00:00 UTC
DAY_S = 86_400
STEPS_PER_DAY = DAY_S // STEP_S
TARGET_S, TARGET_PEAK_RSS_MIB = 60.0, 500


def node_name(index: int) -> str:
    return f"gpu{index:04d}"


def _slots() -> list[tuple[int, str, float, int, int]]:
    """(node, resource, units, min steps, max steps) per slot a pod sequence runs in."""
    slots = []
    for node in range(NODES):
        if node < INFERENCE_NODES:
            slots += [(node, "nvidia_com_gpu", 1.0, 24, 864)] * GPUS_PER_NODE
        elif node < INFERENCE_NODES + TRAINING_NODES:
            slots.append((node, "nvidia_com_gpu", 8.0, 72, 1152))
        else:
            slots += [(node, "nvidia_com_mig_3g_40gb", 2.0, 24, 576)] * GPUS_PER_NODE
    return slots


def pods(days: int) -> list[dict]:
    """Every pod: its labels, first and last running step (1-based from START_S)."""
    rng = np.random.default_rng(11)
    total = days * STEPS_PER_DAY
    out = []
    for slot, (node, resource, units, low, high) in enumerate(_slots()):
        step = int(rng.integers(0, 12))
        while step < total:
            length = int(rng.integers(low, high))
            name = f"p{slot}-{step}"
            out.append(
                {
                    "metric": {
                        "namespace": f"team-{slot % 17}", "pod": name,
                        "uid": f"{slot:06d}-{step:08d}", "node": node_name(node),
                        "resource": resource,
                    },
                    "value": units, "first": step + 1, "last": min(step + length, total),
                }
            )  # fmt: skip
            step += length + int(rng.integers(0, 12))
    return out


def _series(metric: dict, first: int, last: int, value: str) -> dict:
    times = START_S + STEP_S * np.arange(first, last + 1)
    return {"metric": metric, "values": [[int(t), value] for t in times]}


def build_answers(days: int) -> dict[str, list[bytes]]:
    """The allocation, node-label and pod-label answers of each day, as JSON bytes."""
    everything = pods(days)
    answers: dict[str, list[bytes]] = {"allocation": [], "nodes": [], "pods": []}
    for day in range(days):
        low, high = day * STEPS_PER_DAY + 1, (day + 1) * STEPS_PER_DAY
        alive = [p for p in everything if p["first"] <= high and p["last"] >= low]
        result = [
            _series(p["metric"], max(p["first"], low), min(p["last"], high), f"{p['value']:g}")
            for p in alive
        ]
        answers["allocation"].append(_body("matrix", result))
        labels = []
        for node in range(NODES):
            moving = INFERENCE_NODES <= node < INFERENCE_NODES + TRAINING_NODES and node % 10 == 0
            pool = (
                ("train", "serve")[(day // 5) % 2] if moving else "serve" if node < 125 else "train"
            )
            metric = {"node": node_name(node), "label_nodepool": pool}
            labels.append(_series(metric, low, high, "1"))
        answers["nodes"].append(_body("matrix", labels))
        at = START_S + high * STEP_S
        team = [
            {"metric": {**p["metric"], "label_team": p["metric"]["namespace"]}, "value": [at, "1"]}
            for p in alive
        ]
        answers["pods"].append(_body("vector", team))
    return answers


def _body(kind: str, result: list) -> bytes:
    return json.dumps(
        {"status": "success", "data": {"resultType": kind, "result": result}}
    ).encode()


class Handler(BaseHTTPRequestHandler):
    answers: dict[str, list[bytes]] = {}

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        at = float(form.get("start", form.get("time", START_S)))
        day = int((at - START_S - 1) // DAY_S)
        query = form["query"]
        kind = (
            "nodes"
            if "kube_node_labels" in query
            else "pods"
            if "kube_pod_labels" in query
            else "allocation"
        )
        data = self.answers[kind][day]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(port: int, days: int, ready: Path) -> None:
    Handler.answers = build_answers(days)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    ready.write_text(str(sum(len(b) for v in Handler.answers.values() for b in v)))
    server.serve_forever()


def _resolvers():
    groups = {"serve": (1, 1, 1), "train": (2, 2, 1)}

    def node(name: str, label: str):
        return groups.get(label)

    def team(namespace: str, label: str):
        return (f"team {label[5:]}", True) if label else (namespace, False)

    return node, team


def run(url: str, days: int) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    os.environ["DJANGO_LOG_LEVEL"] = "WARNING"
    import django

    django.setup()
    from core.outbound import OutboundPolicy
    from telemetry.kubernetes.services import _db_rows, collect
    from telemetry.prometheus import PrometheusClient

    source = SimpleNamespace(
        step_s=STEP_S, scrape_interval_s=SCRAPE_S, label_selector="",
        node_label="label_nodepool", team_label="label_team",
    )  # fmt: skip
    client = PrometheusClient(
        url, timeout_s=120, policy=OutboundPolicy(allow_loopback=True),
        max_response_bytes=256 * 2**20,
    )  # fmt: skip
    end_s = START_S + days * DAY_S
    node, team = _resolvers()
    started = time.perf_counter()
    found = collect(client, source, (START_S, end_s), node, team)
    rows = _db_rows(1, found.rows.drop(columns="node_group_id"))
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds, "records": len(rows),
        "card_hours": float(rows["card_hours"].sum()), "peak_rss_mib": peak_rss_mib(),
    }  # fmt: skip


def expected_card_hours(days: int) -> float:
    """The same pods' units × card share × running steps, from the schedule itself."""
    share = {"nvidia_com_gpu": 1.0, "nvidia_com_mig_3g_40gb": 3 / 7}
    return sum(
        p["value"] * share[p["metric"]["resource"]] * (p["last"] - p["first"] + 1) * STEP_S / 3600
        for p in pods(days)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=19_993)
    parser.add_argument("--days", type=int, default=DAYS, help="fewer for a quick look")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ready", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port, args.days, args.ready)
        return
    ready = REPO_ROOT / "var" / f"bench-kubernetes-{os.getpid()}.ready"
    ready.parent.mkdir(exist_ok=True)
    command = [sys.executable, __file__, "--serve", "--port", str(args.port)]
    server = subprocess.Popen([*command, "--days", str(args.days), "--ready", str(ready)])
    try:
        while not ready.exists():
            time.sleep(0.5)
        answer_mib = int(ready.read_text()) / 2**20
        result = run(f"http://127.0.0.1:{args.port}", args.days)
    finally:
        server.terminate()
        server.wait()
        ready.unlink(missing_ok=True)
    expected = expected_card_hours(args.days)
    print(
        f"{NODES * GPUS_PER_NODE} GPUs × {args.days} days at {STEP_S} s: {result['seconds']:.1f} s "
        f"(target < {TARGET_S:.0f} s), peak RSS "
        f"{result['peak_rss_mib']:.0f} MiB (target < {TARGET_PEAK_RSS_MIB}); "
        f"{answer_mib:.0f} MiB of JSON answers, {result['records']:,} records, "
        f"{result['card_hours']:,.1f} card-hours (the schedule's own: {expected:,.1f})"
    )


if __name__ == "__main__":
    main()
