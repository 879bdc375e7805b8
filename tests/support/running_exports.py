"""sacct exports that hold a RUNNING job, for the 16-card "alpha" cluster
(`tests.support.builders.alpha_cluster`: 2 nodes × 8 H100).

``ordinary_export()`` is what a manager exports on 2024-03-04 with
``sacct --allusers --allocations --duplicates --parsable2 --format ...``; ``later_export()`` the
same a week later, when the running job has ended. ``random_export()`` builds a physically
possible export (each node runs one job at a time) from plain numbers, with its own count of
what every day holds, for the property test.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

HEADER = (
    "JobID|JobIDRaw|Cluster|Partition|Account|User|Submit|Start|End|Elapsed|State|NNodes|"
    "AllocTRES|NodeList"
)
UTC = dt.UTC
EPOCH = dt.datetime(2024, 3, 1, tzinfo=UTC)


def tres(cards: int) -> str:
    return f"billing={14 * cards},cpu={14 * cards},gres/gpu:h100={cards},gres/gpu={cards},node=1"


# The file's latest time is the pending job's Submit, 2024-03-02T22:00: the as-of time.
#   job   team    cards  start          end              hours up to as-of  card-hours
#   2001  team-a  8      03-01 00:00    03-01 12:00      12                  96
#   2002  team-b  8      03-01 12:00    running (3 days) 34 (not 72)        272
#   2003  team-a  4      03-02 06:00    03-02 18:00      12                  48
ORDINARY_LINES = [
    f"2001|2001|alpha|h100|team-a|ann|2024-02-29T23:50:00|2024-03-01T00:00:00|"
    f"2024-03-01T12:00:00|12:00:00|COMPLETED|1|{tres(8)}|gpu001",
    # Elapsed is the time sacct saw it running: 3 days, up to its own clock.
    f"2002|2002|alpha|h100|team-b|bob|2024-03-01T11:00:00|2024-03-01T12:00:00|Unknown|"
    f"3-00:00:00|RUNNING|1|{tres(8)}|gpu002",
    f"2003|2003|alpha|h100|team-a|ann|2024-03-02T05:00:00|2024-03-02T06:00:00|"
    f"2024-03-02T18:00:00|12:00:00|COMPLETED|1|{tres(4)}|gpu001",
    "2004|2004|alpha|h100|team-c|cy|2024-03-02T22:00:00|Unknown|Unknown|00:00:00|PENDING|1||"
    "None assigned",
]
ORDINARY_AS_OF = dt.datetime(2024, 3, 2, 22, tzinfo=UTC)
# Per day: allocated card-hours (2001 + 2002 on day 1; 2002 + 2003 on day 2) of 16 × 24 = 384.
ORDINARY_DAYS = {dt.date(2024, 3, 1): 96.0 + 96.0, dt.date(2024, 3, 2): 176.0 + 48.0}
# The running job has ended on 03-04 12:00; the pending one ran.
LATER_LINES = [
    ORDINARY_LINES[0],
    f"2002|2002|alpha|h100|team-b|bob|2024-03-01T11:00:00|2024-03-01T12:00:00|"
    f"2024-03-04T12:00:00|3-00:00:00|COMPLETED|1|{tres(8)}|gpu002",
    ORDINARY_LINES[2],
    f"2004|2004|alpha|h100|team-c|cy|2024-03-02T22:00:00|2024-03-03T00:00:00|"
    f"2024-03-03T10:00:00|10:00:00|COMPLETED|1|{tres(8)}|gpu001",
]


def export(lines: list[str]) -> str:
    return "\n".join([HEADER, *lines]) + "\n"


def ordinary_export() -> str:
    return export(ORDINARY_LINES)


def later_export() -> str:
    return export(LATER_LINES)


@dataclass(frozen=True)
class Job:
    node: int
    team: str
    cards: int
    start: dt.datetime
    end: dt.datetime | None  # None: running
    elapsed_h: float  # what sacct printed (running: up to its own clock)


@dataclass
class RandomExport:
    """An export and what it holds, counted here independently of the importer."""

    jobs: list[Job] = field(default_factory=list)
    pending_submit: dt.datetime | None = None

    @property
    def as_of(self) -> dt.datetime:
        """The latest Submit, Start or End printed (Submit is one hour before Start)."""
        times = [job.start - dt.timedelta(hours=1) for job in self.jobs]
        times += [job.start for job in self.jobs]
        times += [job.end for job in self.jobs if job.end is not None]
        if self.pending_submit is not None:
            times.append(self.pending_submit)
        return max(times)

    def held(self, job: Job) -> tuple[dt.datetime, dt.datetime]:
        """Where a job's card-hours lie: a running one up to the as-of time at most."""
        if job.end is not None:
            return job.start, job.end
        until = min(job.start + dt.timedelta(hours=job.elapsed_h), self.as_of)
        return job.start, max(until, job.start)

    def allocated(self, begin: dt.datetime, end: dt.datetime, team: str | None = None) -> float:
        """Card-hours the jobs (of ``team``) hold inside [begin, end)."""
        total = 0.0
        for job in self.jobs:
            if team is not None and job.team != team:
                continue
            start, until = self.held(job)
            overlap = (min(until, end) - max(start, begin)).total_seconds() / 3600.0
            total += job.cards * max(overlap, 0.0)
        return total

    def text(self) -> str:
        lines = []
        for number, job in enumerate(self.jobs, start=3001):
            submit = job.start - dt.timedelta(hours=1)
            end = "Unknown" if job.end is None else _slurm(job.end)
            state = "RUNNING" if job.end is None else "COMPLETED"
            lines.append(
                f"{number}|{number}|alpha|h100|{job.team}|u|{_slurm(submit)}|{_slurm(job.start)}|"
                f"{end}|{_elapsed(job.elapsed_h)}|{state}|1|{tres(job.cards)}|gpu00{job.node}"
            )
        if self.pending_submit is not None:
            lines.append(
                f"3999|3999|alpha|h100|team-c|u|{_slurm(self.pending_submit)}|Unknown|Unknown|"
                "00:00:00|PENDING|1||None assigned"
            )
        return export(lines)


def random_export(
    node_plans: list[list[tuple[int, int, int, int]]],
    running_extra_h: list[int],
    pending_after_h: int | None,
) -> RandomExport:
    """Jobs per node from (gap hours, hours, cards, team index) tuples, one job at a time.

    The last job of a node may still run: ``running_extra_h[node]`` > 0 makes it RUNNING,
    its Elapsed that many hours beyond its planned hours (sacct's clock ran on after the
    other lines). ``pending_after_h``: a pending job submitted that long after the epoch.
    """
    teams = ("team-a", "team-b", "team-c")
    result = RandomExport()
    for node, plan in enumerate(node_plans, start=1):
        clock = EPOCH
        for position, (gap_h, hours, cards, team) in enumerate(plan):
            start = clock + dt.timedelta(hours=gap_h)
            end = start + dt.timedelta(hours=hours)
            runs = position == len(plan) - 1 and running_extra_h[node - 1] > 0
            elapsed_h = hours + (running_extra_h[node - 1] if runs else 0)
            job = Job(node, teams[team], cards, start, None if runs else end, elapsed_h)
            result.jobs.append(job)
            clock = end
    if pending_after_h is not None:
        result.pending_submit = EPOCH + dt.timedelta(hours=pending_after_h)
    return result


def _slurm(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def _elapsed(hours: float) -> str:
    days, rest = divmod(int(round(hours * 3600)), 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text
