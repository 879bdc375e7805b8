"""Usage records for the Usage and Costs dashboard tests, imported through the real services.

The demo fleet (train-hetero: 250 nodes × 8 = 1,000 A100 + 1,000 H100 cards, one pool;
train-ascend: 512 Ascend 910B, commissioned 2024-03-01; inference-eu: 128 L40S, 2024-06-01).

Hand-checked jobs (CSV, times UTC) in the week of Monday 2024-07-01:

    job  cluster       team    cards  card  start        end          card-h  state
    k-1  train-hetero  team-a  16     H100  07-01 00:00  07-03 00:00  768     completed
    k-2  train-hetero  team-b  8      A100  07-02 12:00  07-02 18:00  48      completed
    k-3  train-ascend  team-c  64     910B  07-04 00:00  07-04 10:00  640     node_fail
    k-4  inference-eu  team-a  4      L40S  07-05 22:00  07-06 02:00  16      completed

plus ~600 seeded random jobs from 2024-06-01 to 2024-09-01 (other weeks only), and an
sreport for train-hetero over 2024-08-01 … 2024-08-31 (Down 2,400, PLND Down 4,800 card-h).
"""

from __future__ import annotations

import datetime as dt
import io

import numpy as np

PERIOD_START = dt.date(2024, 6, 1)
PERIOD_END = dt.date(2024, 9, 1)
HAND_WEEK = dt.date(2024, 7, 1)
CSV_HEADER = "cluster,job_id,cards,start,end,state,accelerator_model,team,user,gpu_utilization,mfu"
HAND_JOBS = [
    "train-hetero,k-1,16,2024-07-01T00:00:00Z,2024-07-03T00:00:00Z,completed,H100 SXM5 80GB,"
    "team-a,ann,80%,40%",
    "train-hetero,k-2,8,2024-07-02T12:00:00Z,2024-07-02T18:00:00Z,completed,A100 SXM4 80GB,"
    "team-b,bob,,",
    "train-ascend,k-3,64,2024-07-04T00:00:00Z,2024-07-04T10:00:00Z,node_fail,Ascend 910B,"
    "team-c,cy,,",
    "inference-eu,k-4,4,2024-07-05T22:00:00Z,2024-07-06T02:00:00Z,completed,L40S,team-a,ann,,",
]
CLUSTER_MODELS = {
    "train-hetero": ["A100 SXM4 80GB", "H100 SXM5 80GB"],
    "train-ascend": ["Ascend 910B"],
    "inference-eu": ["L40S"],
}
CLUSTER_START = {
    "train-hetero": np.datetime64("2024-06-01T00:00"),
    "train-ascend": np.datetime64("2024-06-01T00:00"),
    "inference-eu": np.datetime64("2024-06-01T00:00"),
}
TEAMS = np.array(["team-a", "team-b", "team-c", "team-d", ""])
STATES = np.array(["completed", "failed", "node_fail", "preempted", "cancelled"])
SREPORT = """\
--------------------------------------------------------------------------------
Cluster Utilization 2024-08-01T00:00:00 - 2024-08-31T23:59:59
Usage reported in TRES Hours
--------------------------------------------------------------------------------
Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported
train-hetero|gres/gpu|900000|2400|4800|580800|0|1488000
"""


def random_jobs(cluster: str, count: int, seed: int) -> list[str]:
    """Seeded jobs outside the hand-checked week (vectorised), some crossing midnight/weeks."""
    rng = np.random.default_rng(seed)
    span_min = int((np.datetime64("2024-09-01T00:00") - CLUSTER_START[cluster]).astype(int))
    start = CLUSTER_START[cluster] + rng.integers(0, span_min - 60 * 24 * 3, count).astype(
        "timedelta64[m]"
    )
    hours = np.round(rng.lognormal(2.0, 1.0, count).clip(0.25, 24 * 6), 2)
    end = start + (hours * 60).astype("timedelta64[m]")
    week_start = np.datetime64("2024-07-01T00:00")
    week_end = np.datetime64("2024-07-08T00:00")
    outside = (end <= week_start) | (start >= week_end)
    cards = rng.choice([1, 2, 4, 8, 16, 32], count)
    models = rng.choice(CLUSTER_MODELS[cluster], count)
    teams = rng.choice(TEAMS, count, p=[0.35, 0.25, 0.2, 0.15, 0.05])
    states = rng.choice(STATES, count, p=[0.75, 0.08, 0.05, 0.05, 0.07])
    util = rng.uniform(0.3, 1.0, count)
    has_util = rng.random(count) < 0.5
    lines = []
    for i in np.flatnonzero(outside):
        util_text = f"{util[i]:.3f}" if has_util[i] else ""
        lines.append(
            f"{cluster},r-{seed}-{i},{cards[i]},{start[i]}:00Z,{end[i]}:00Z,{states[i]},"
            f"{models[i]},{teams[i]},u{i % 7},{util_text},"
        )
    return lines


def usage_csv(cluster: str, seed: int, count: int = 200) -> str:
    hand = [line for line in HAND_JOBS if line.startswith(cluster + ",")]
    return "\n".join([CSV_HEADER, *hand, *random_jobs(cluster, count, seed)]) + "\n"


def load_usage(seed: int = 11, count: int = 200) -> dict[str, int]:
    """Import the usage of every demo cluster and the sreport; returns records per cluster.

    No worker refresh is queued: callers rebuild the rollups themselves (a refresh still
    running on the test worker when a test ends would race the database flush)."""
    from accounting import services
    from inventory.models import Cluster

    counts = {}
    for index, name in enumerate(CLUSTER_MODELS):
        cluster = Cluster.objects.get(name=name)
        job = services.create_import_job(
            kind="csv", cluster=cluster, source_name=f"{name}.csv", queue=False
        )
        text = usage_csv(name, seed + index, count)
        imported = services.import_file(job, io.BytesIO(text.encode()), queue_rollup_refresh=False)
        counts[name] = imported.records_created
    cluster = Cluster.objects.get(name="train-hetero")
    job = services.create_import_job(
        kind="sreport", cluster=cluster, source_name="aug.sreport", queue=False
    )
    services.import_file(job, io.BytesIO(SREPORT.encode()), queue_rollup_refresh=False)
    return counts


def aware(day: dt.date) -> dt.datetime:
    """Midnight of the day in the current time zone (as the dashboards' date filters read it)."""
    from django.utils import timezone

    return timezone.make_aware(dt.datetime.combine(day, dt.time()))
