"""A year of demo usage for the demo fleet, written as `sacct` text and imported through the
real importer (the same path as an upload), so every page has real-shaped data on first start.

Deterministic (seeded) and idempotent: a cluster whose demo import already succeeded is left
alone. ``inference-eu`` is covered only for the last :data:`PARTIAL_DAYS` days, so the default
30-day fleet analysis shows partial coverage; the other clusters are covered all year. The
demo inference pool also gets a year of serving load (an 8B model), so its analysis rows
show a measured serving utilization.
"""

from __future__ import annotations

import datetime as dt
import io
from dataclasses import dataclass

import numpy as np

from accounting import services
from accounting.models import ImportJob, ServingLoad
from core.jobs.status import JobStatus
from inventory.models import Cluster, Pool

SACCT_HEADER = (
    "JobID|JobIDRaw|Cluster|Partition|Account|User|Submit|Start|End|Elapsed|State|NNodes|"
    "AllocTRES|NodeList|TRESUsageInAve"
)
DAYS = 365
PARTIAL_DAYS = 20
TEAMS = ("llm-pretrain", "vision", "speech", "research", "serving")
STATES = ("COMPLETED", "FAILED", "NODE_FAIL", "PREEMPTED", "CANCELLED by 0")
STATE_WEIGHTS = (0.80, 0.07, 0.03, 0.05, 0.05)


@dataclass(frozen=True)
class DemoCluster:
    name: str
    gres: tuple[str, ...]  # the Slurm gres types its jobs ask for
    cards_per_node: int
    job_nodes: tuple[int, ...]  # job sizes, in nodes
    jobs_per_day: float
    mean_hours: float
    teams: tuple[str, ...]
    days: int = DAYS


DEMO_USAGE = (
    DemoCluster("train-hetero", ("a100_80gb", "h100"), 8, (4, 8, 16, 32), 9.0, 20.0, TEAMS[:4]),
    DemoCluster("train-ascend", ("910b",), 8, (2, 4, 8, 16), 5.0, 18.0, TEAMS[:3]),
    DemoCluster("inference-eu", ("l40s",), 4, (1, 2, 4), 12.0, 10.0, TEAMS[3:], PARTIAL_DAYS),
)


def _time(value: np.datetime64) -> str:
    return str(value.astype("datetime64[s]"))


def _elapsed(seconds: int) -> str:
    days, rest = divmod(int(seconds), 86_400)
    hours, rest = divmod(rest, 3_600)
    return f"{days}-{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def sacct_text(spec: DemoCluster, end: dt.date, seed: int) -> str:
    """The cluster's jobs over ``spec.days`` days before ``end`` as `sacct --parsable2` text."""
    rng = np.random.default_rng(seed)
    count = int(spec.jobs_per_day * spec.days)
    first = np.datetime64(end - dt.timedelta(days=spec.days), "s")
    span_s = spec.days * 86_400
    starts = first + np.sort(rng.integers(0, span_s, count)).astype("timedelta64[s]")
    limit = first + np.timedelta64(span_s, "s")
    hours = np.minimum(rng.exponential(spec.mean_hours, count), 72.0) + 0.25
    ends = np.minimum(starts + (hours * 3600).astype("int64").astype("timedelta64[s]"), limit)
    nodes = rng.choice(spec.job_nodes, count)
    gres = rng.choice(spec.gres, count)
    teams = rng.choice(spec.teams, count)
    states = rng.choice(STATES, count, p=STATE_WEIGHTS)
    lines = [SACCT_HEADER]
    for i in range(count):
        cards = int(nodes[i]) * spec.cards_per_node
        job = f"{seed}{i:06d}"
        lines.append(
            "|".join(
                (
                    job,
                    job,
                    spec.name,
                    "main",
                    str(teams[i]),
                    f"u{i % 17}",
                    _time(starts[i] - np.timedelta64(300, "s")),
                    _time(starts[i]),
                    _time(ends[i]),
                    _elapsed((ends[i] - starts[i]).astype("int64")),
                    str(states[i]),
                    str(int(nodes[i])),
                    f"billing={cards},gres/gpu:{gres[i]}={cards},gres/gpu={cards},"
                    f"node={int(nodes[i])}",
                    f"n[001-{int(nodes[i]):03d}]",
                    "",
                )
            )
        )
    return "\n".join(lines) + "\n"


def source_name(spec: DemoCluster) -> str:
    return f"demo-usage-{spec.name}.sacct"


def load_demo_usage(end: dt.date) -> dict[str, int]:
    """Import the demo year of every demo cluster not imported yet; records created per cluster."""
    created: dict[str, int] = {}
    for seed, spec in enumerate(DEMO_USAGE, start=1):
        cluster = Cluster.objects.filter(name=spec.name).first()
        if cluster is None:
            continue
        done = ImportJob.objects.filter(
            cluster=cluster, source_name=source_name(spec), status=JobStatus.SUCCEEDED
        )
        if done.exists():
            created[spec.name] = 0
            continue
        job = services.create_import_job(
            kind="sacct", cluster=cluster, source_name=source_name(spec), queue=False
        )
        run_id = str(job.run_id)
        services.mark_running(job.pk, run_id)
        counts = services.import_file(
            job,
            io.BytesIO(sacct_text(spec, end, seed).encode()),
            before_commit=lambda counts, job=job, run_id=run_id: services.record_success(
                job.pk, run_id, counts
            ),
        )
        created[spec.name] = counts.records_created
    return created


# The demo inference pool serves an 8B model in bf16 at a mean 40,000 output tokens/s.
DEMO_SERVING = {
    "served_tokens_per_s": 40_000.0,
    "model_params": 8e9,
    "weight_precision": "bf16",
    "kv_precision": "bf16",
    "input_tokens": 1000,
    "output_tokens": 300,
    "notes": "demo serving load",
}


def load_demo_serving_load(end: dt.date) -> int:
    """A year of serving load on the demo inference pool unless it has one; loads created."""
    pool = Pool.objects.filter(cluster__name="inference-eu", name="serving-l40s").first()
    if pool is None or pool.serving_loads.exists():
        return 0
    day_end = dt.datetime.combine(end, dt.time(), tzinfo=dt.UTC)
    ServingLoad.objects.create(
        pool=pool,
        period_start=day_end - dt.timedelta(days=DAYS),
        period_end=day_end,
        **DEMO_SERVING,
    )
    return 1
