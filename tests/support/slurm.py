"""A real Slurm for the tests: the one-host cluster of ``platform/slurm/test-cluster`` and a
workload of GPU jobs submitted to it, whose own figures (cards asked for, seconds run by
this process's clock) are what the imports of Slurm's outputs are checked against.

The workload runs once per cluster and is shared (a lock file and ``var/slurm/workload.json``):
both CI suites and every xdist worker read the same jobs. It is submitted again when the
recorded one is gone (its running job ended or the cluster was rebuilt).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = REPO / "platform" / "slurm" / "test-cluster"
SLURM_DIR = Path(os.environ.get("FLEETWISE_SLURM_DIR", REPO / "var" / "slurm"))
WORKLOAD_FILE = SLURM_DIR / "workload.json"
# slurmrestd runs as nobody: test-cluster leaves a readable copy of the configuration here.
RESTD_CONF = Path(tempfile.gettempdir()) / "fleetwise-slurmrestd" / "slurm.conf"
CLUSTER_NAME = "fleetwise-test"
WORKLOAD_VERSION = 7  # a recorded workload of another version is submitted again
# The running job holds its card this long: every test session within it reuses the workload.
RUNNING_JOB_S = 3 * 3600
TERMINAL_TIMEOUT_S = 240
# A job's script sleeps a known time; starting and ending it adds up to this on a loaded
# two-core machine (both CI suites and their workers running).
STARTUP_S = 8
NODE_DOWN_S = 3
REQUEUE_SETTLE_S = 5
POLL_S = 0.5


@dataclass
class SubmittedJob:
    """One job (array task, het component) as submitted: its label as sacct prints it."""

    label: str
    account: str
    gpus: dict[str, int]  # gres type -> cards
    state: str  # the state the import must give: completed, failed, ... running
    min_s: float  # how long it ran, by this process's clock: a range
    max_s: float

    @property
    def cards(self) -> int:
        return sum(self.gpus.values())


@dataclass
class Workload:
    started_at: str  # ISO time just before the first submission
    finished_at: str  # ISO time once every job but the running one ended
    running_job_id: str
    requeued_job_id: str
    jobs: list[SubmittedJob] = field(default_factory=list)
    version: int = 0
    # By this process's clock: the requeued job's first run (seconds), and when the running
    # job started (epoch seconds), each a [low, high] range.
    requeued_first_run_s: tuple[float, float] = (0.0, 0.0)
    running_started: tuple[float, float] = (0.0, 0.0)

    @property
    def accounts(self) -> list[str]:
        return sorted({job.account for job in self.jobs})

    @property
    def job_ids(self) -> list[str]:
        """Ids to pass to ``sacct -j``: parents (an array's or het job's id covers its parts)."""
        return sorted({job.label.split("_")[0].split("+")[0] for job in self.jobs}, key=int)

    def by_label(self) -> dict[str, SubmittedJob]:
        return {job.label: job for job in self.jobs}

    @classmethod
    def from_json(cls, text: str) -> Workload:
        data = json.loads(text)
        data["jobs"] = [SubmittedJob(**job) for job in data["jobs"]]
        for name in ("requeued_first_run_s", "running_started"):
            data[name] = tuple(data.get(name, (0.0, 0.0)))
        return cls(**data)


def slurm_env() -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(SLURM_DIR / "etc" / "slurm.conf"), "TZ": "UTC"}


def slurm(*args: str, check: bool = True, timeout_s: float = 60) -> str:
    """Run a Slurm client command against the test cluster; its stdout."""
    done = subprocess.run(
        list(args), env=slurm_env(), capture_output=True, text=True, timeout=timeout_s
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def absent_reason() -> str | None:
    """Why this machine cannot run the real-Slurm tests; None when it can."""
    missing = [
        name for name in ("slurmctld", "slurmd", "slurmdbd", "sacct") if not shutil.which(name)
    ]
    if missing:
        return (
            f"Slurm is not installed ({', '.join(missing)} missing): apt-get install "
            "slurm-wlm slurmdbd slurmrestd munge faketime"
        )
    if os.geteuid() != 0:
        return "the test cluster's slurmd starts jobs as root: run the tests as root"
    return None


def require_cluster() -> None:
    """Start the test cluster (idempotent); skip where Slurm is absent, but never in CI."""
    import pytest  # here: CI runs this module's workload before the virtualenv exists

    reason = absent_reason()
    if reason is not None:
        if os.environ.get("CI") or os.environ.get("FLEETWISE_REQUIRE_SLURM"):
            pytest.fail(f"CI must run the real-Slurm tests: {reason}")
        pytest.skip(reason)
    with _locked("cluster"):
        done = subprocess.run(
            [str(CLUSTER_SCRIPT), "up"], capture_output=True, text=True, timeout=300
        )
    if done.returncode != 0:
        pytest.fail(f"the Slurm test cluster did not start: {done.stderr.strip()[-2000:]}")


@contextmanager
def _locked(name: str) -> Iterator[None]:
    SLURM_DIR.mkdir(parents=True, exist_ok=True)
    with open(SLURM_DIR / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def shared_workload() -> Workload:
    """The workload on the test cluster, submitting it first when none is current."""
    require_cluster()
    with _locked("workload"):
        current = _recorded_workload()
        if current is not None:
            return current
        workload = _WorkloadRun().run()
        roll_usage(workload.started_at)
        WORKLOAD_FILE.write_text(json.dumps(asdict(workload), indent=1))
        return workload


def roll_usage(since: str) -> None:
    """Hourly rollups (what sreport reads) from the hour ``since`` falls in to the current one."""
    hour = datetime.fromisoformat(since).replace(minute=0, second=0, tzinfo=None)
    done = subprocess.run(
        [str(CLUSTER_SCRIPT), "roll-usage", hour.isoformat(timespec="seconds")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"roll-usage failed: {done.stderr.strip()[-2000:]}")


def _recorded_workload() -> Workload | None:
    if not WORKLOAD_FILE.exists():
        return None
    workload = Workload.from_json(WORKLOAD_FILE.read_text())
    if job_state(workload.running_job_id) != "RUNNING":
        return None
    if workload.version != WORKLOAD_VERSION:
        slurm("scancel", workload.running_job_id, check=False)  # its card, for the new one
        return None
    return workload


def job_state(job_id: str) -> str:
    """squeue's state of a job, or "" once it left the queue."""
    return slurm("squeue", "-h", "-j", job_id, "-o", "%T", check=False).strip().split("\n")[0]


def add_accounts(*accounts: str) -> None:
    """New accounts on the test cluster, root a user of each."""
    names = ",".join(accounts)
    slurm("sacctmgr", "-i", "add", "account", names, f"Cluster={CLUSTER_NAME}")
    slurm("sacctmgr", "-i", "add", "user", "root", f"Account={names}")


def now() -> float:
    return time.time()


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def sbatch(*args: str) -> str:
    """Submit; the job id (``--parsable`` prints ``id`` or ``id;cluster``)."""
    return (
        slurm("sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", *args)
        .strip()
        .split(";")[0]
    )


class _WorkloadRun:
    """Submits the jobs, drives the ones that need a hand (cancel, requeue, node failure)."""

    def __init__(self) -> None:
        # Accounts (teams) of this workload alone: sreport's per-account rows hold only its
        # jobs, even beside an earlier workload or other tests' jobs in the same hour.
        tag = f"fw{int(now()):x}"[-8:]
        self.training, self.serving = f"{tag}-research", f"{tag}-inference"
        add_accounts(self.training, self.serving)
        self.jobs: list[SubmittedJob] = []
        self.requeued_first_run_s = (0.0, 0.0)
        self.running_started = (0.0, 0.0)
        self.submitted_at = 0.0

    def run(self) -> Workload:
        started = now()
        self._node_failure()
        self.submitted_at = now()
        ids = self._submit_main()
        seen = self._wait_state(ids["running"], ["RUNNING"])
        self.running_started = (self.submitted_at - 1, seen + 1)
        self._drive(ids)
        return Workload(
            started_at=iso(started - 1),
            finished_at=iso(now()),
            running_job_id=ids["running"],
            requeued_job_id=ids["requeued"],
            jobs=self.jobs,
            version=WORKLOAD_VERSION,
            requeued_first_run_s=self.requeued_first_run_s,
            running_started=self.running_started,
        )

    def _wait_state(self, job_id: str, states: Sequence[str], timeout_s: float = 60) -> float:
        """Poll until the job is in one of ``states``; the time it was first seen there."""
        deadline = now() + timeout_s
        while now() < deadline:
            if job_state(job_id) in states:
                return now()
            time.sleep(POLL_S)
        raise RuntimeError(f"job {job_id} not {states} after {timeout_s} s: {job_state(job_id)!r}")

    def _node_failure(self) -> None:
        """A job on gpu02 when gpu02 is set down: NODE_FAIL. Alone, so nothing else dies."""
        job_id = sbatch(
            "-J",
            "fw-node-fail",
            "-A",
            self.training,
            "-w",
            "gpu02",
            "--no-requeue",
            "--gres=gpu:a100:2",
            "--wrap",
            "sleep 300",
        )
        seen_running = self._wait_state(job_id, ["RUNNING"])
        time.sleep(3)
        slurm("scontrol", "update", "NodeName=gpu02", "State=DOWN", "Reason=fleetwise-test")
        gone = self._wait_gone(job_id)
        self.jobs.append(
            SubmittedJob(
                job_id,
                self.training,
                {"a100": 2},
                "node_fail",
                gone - seen_running - 2 * POLL_S - 2,
                gone - seen_running + 2 * POLL_S + 2,
            )
        )
        time.sleep(NODE_DOWN_S)  # whole seconds of downtime for sreport's Down column
        self._resume("gpu02")

    def _wait_gone(self, job_id: str, timeout_s: float = 60) -> float:
        deadline = now() + timeout_s
        while now() < deadline:
            if job_state(job_id) in (
                "",
                "NODE_FAIL",
                "COMPLETED",
                "FAILED",
                "CANCELLED",
                "TIMEOUT",
            ):
                return now()
            time.sleep(POLL_S)
        raise RuntimeError(f"job {job_id} still {job_state(job_id)!r} after {timeout_s} s")

    def _resume(self, node: str) -> None:
        deadline = now() + 60
        while now() < deadline:
            slurm("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
            if slurm("sinfo", "-h", "-n", node, "-o", "%t").strip() in ("idle", "mix", "alloc"):
                return
            time.sleep(1)
        raise RuntimeError(f"node {node} did not come back")

    def _submit_main(self) -> dict[str, str]:
        def job(*args: str) -> str:
            return sbatch(*args)

        return {
            "completed": job(
                "-J",
                "fw-completed",
                "-A",
                self.training,
                "--gres=gpu:h100:2",
                "--wrap",
                "srun --gres=gpu:h100:2 sleep 4",
            ),
            "failed": job(
                "-J",
                "fw-failed",
                "-A",
                self.serving,
                "--gres=gpu:a100:1",
                "--wrap",
                "sleep 2; exit 3",
            ),
            "cancelled": job(
                "-J",
                "fw-cancelled",
                "-A",
                self.training,
                "--gres=gpu:h100:1",
                "--wrap",
                "sleep 300",
            ),
            "timeout": job(
                "-J",
                "fw-timeout",
                "-A",
                self.serving,
                "--time=1",
                "--gres=gpu:1g.10gb:1",
                "--wrap",
                "sleep 300",
            ),
            "array": job(
                "-J",
                "fw-array",
                "-A",
                self.serving,
                "--array=0-2",
                "--gres=gpu:a100:1",
                "--wrap",
                "sleep 3",
            ),
            "het": job(
                "-J",
                "fw-het",
                "-A",
                self.training,
                "--gres=gpu:h100:1",
                ":",
                "--gres=gpu:a100:2",
                "--wrap",
                "sleep 3",
            ),
            "requeued": job(
                "-J",
                "fw-requeued",
                "-A",
                self.training,
                "--requeue",
                "--gres=gpu:h100:1",
                "--wrap",
                # The first run outlasts the requeue on a loaded machine (a 5 s first run
                # could end first: the requeue then restarts a finished job, which FAILs).
                'if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then sleep 5; else sleep 120; fi',
            ),
            "running": job(
                "-J",
                "fw-running",
                "-A",
                self.serving,
                "--time=240",
                "--gres=gpu:h100:1",
                "--wrap",
                f"sleep {RUNNING_JOB_S}",
            ),
        }

    def _drive(self, ids: dict[str, str]) -> None:
        self._cancel_after(ids["cancelled"], 4)
        self._requeue_once(ids["requeued"])
        self._wait_terminal([i for name, i in ids.items() if name != "running"])
        self._record_plain(ids)

    def _cancel_after(self, job_id: str, run_s: float) -> None:
        seen = self._wait_state(job_id, ["RUNNING"])
        time.sleep(run_s)
        slurm("scancel", job_id)
        gone = now()
        self.jobs.append(
            SubmittedJob(
                job_id,
                self.training,
                {"h100": 1},
                "cancelled",
                gone - seen - 2,
                gone - self.submitted_at + 2,  # it may have started before it was seen
            )
        )

    def _requeue_once(self, job_id: str) -> None:
        """Requeue while running; Slurm holds a requeued job 121 s, so release it at once."""
        seen = self._wait_state(job_id, ["RUNNING"])
        time.sleep(1)
        slurm("scontrol", "requeue", job_id)
        requeued = now()  # it may have started before it was seen, as early as submitted
        self.requeued_first_run_s = (requeued - seen - 1, requeued - self.submitted_at + 1)
        # Released too soon, the new run reaches slurmd while it still holds the killed run
        # ("Job already killed, do not launch batch job") and FAILs: let the kill finish.
        self._wait_state(job_id, ["PENDING"])
        time.sleep(REQUEUE_SETTLE_S)
        deadline = now() + 60
        while job_state(job_id) != "RUNNING" and now() < deadline:
            slurm("scontrol", "update", f"JobId={job_id}", "StartTime=now", check=False)
            time.sleep(1)

    def _wait_terminal(self, job_ids: Sequence[str]) -> None:
        deadline = now() + TERMINAL_TIMEOUT_S
        while now() < deadline:
            if not slurm("squeue", "-h", "-j", ",".join(job_ids), "-o", "%i", check=False).strip():
                return
            time.sleep(1)
        raise RuntimeError(f"jobs still queued after {TERMINAL_TIMEOUT_S} s: {job_ids}")

    def _record_plain(self, ids: dict[str, str]) -> None:
        """The jobs whose run time is their script's own (sleeps) or their time limit."""
        add = self.jobs.append
        ran = STARTUP_S  # the script's sleep, plus up to this
        training, serving = self.training, self.serving
        add(SubmittedJob(ids["completed"], training, {"h100": 2}, "completed", 4, 4 + ran))
        add(SubmittedJob(ids["failed"], serving, {"a100": 1}, "failed", 2, 2 + ran))
        # --time=1: killed once a minute has passed, at slurmctld's next 30 s check.
        add(SubmittedJob(ids["timeout"], serving, {"1g.10gb": 1}, "timeout", 60, 90 + ran))
        for task in range(3):
            label = f"{ids['array']}_{task}"
            add(SubmittedJob(label, serving, {"a100": 1}, "completed", 3, 3 + ran))
        add(SubmittedJob(f"{ids['het']}+0", training, {"h100": 1}, "completed", 3, 3 + ran))
        add(SubmittedJob(f"{ids['het']}+1", training, {"a100": 2}, "completed", 3, 3 + ran))
        add(SubmittedJob(ids["requeued"], training, {"h100": 1}, "completed", 5, 5 + ran))
        add(SubmittedJob(ids["running"], self.serving, {"h100": 1}, "running", 0, RUNNING_JOB_S))


# A100 MIG profiles: a 1g slice is one of the card's seven compute slices (NVIDIA's MIG user
# guide), so a job holding one is charged 1/7 of a card.
MIG_CARD_SHARE = {"1g.10gb": 1 / 7}


def card_seconds_range(job: SubmittedJob) -> tuple[float, float]:
    """The card-seconds a job held, from what was submitted and how long it ran."""
    cards = sum(count * MIG_CARD_SHARE.get(kind, 1.0) for kind, count in job.gpus.items())
    return cards * job.min_s, cards * job.max_s


def sacct_export(workload: Workload, *args: str, duplicates: bool = False) -> str:
    """``sacct`` over the workload's jobs (allocations only), with ``args`` for the layout."""
    window = ["-a", "-X", "-S", workload.started_at[:19], "-E", "now"]
    if duplicates:
        window.append("-D")
    return slurm("sacct", *window, "-j", ",".join(workload.job_ids), *args)


def inventory_of_the_test_cluster():
    """The test cluster as a manager enters it: site "Slurm lab", cluster "fleetwise-test"
    (commissioned the day before the workload's), pool "gpu" of node gpu01 (8 H100 SXM5 80GB)
    and node gpu02 (8 A100 SXM4 40GB); gpu02's MIG slices named ``1g.10gb`` are A100s."""
    from datetime import date, timedelta

    from accounting.models import GresAlias
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    site = Site.objects.create(
        name="Slurm lab", cooling_type="air", pue=1.3, tariff_per_kwh=0.2, currency="USD"
    )
    cluster = Cluster.objects.create(
        site=site,
        name=CLUSTER_NAME,
        commissioned_on=date.today() - timedelta(days=1),
        capital_cost_per_card=25_000.0,
    )
    pool = Pool.objects.create(cluster=cluster, name="gpu", planned_utilization=0.7)
    for node, model in (("gpu01", "H100 SXM5 80GB"), ("gpu02", "A100 SXM4 40GB")):
        NodeGroup.objects.create(
            pool=pool,
            name=node,
            accelerator=AcceleratorModel.objects.get(name=model),
            node_count=1,
            cards_per_node=8,
        )
    a100 = AcceleratorModel.objects.get(name="A100 SXM4 40GB")
    GresAlias.objects.create(gres_type="1g.10gb", accelerator=a100, cluster=cluster)
    return cluster


if __name__ == "__main__":  # .ci/run: run the workload before the suites start
    workload = shared_workload()
    print(f"Slurm workload: jobs {', '.join(workload.job_ids)} from {workload.started_at}")
