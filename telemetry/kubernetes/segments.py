"""Step samples of running GPU pods → running segments → usage-record rows (pure pandas).

A sample at time ``t`` (a range query's step) says the pod was Running at ``t`` and counts
the step ``(t − step, t]``. Consecutive steps of one pod with the same resource, cards, node
group and team form one segment: a record from ``first t − step`` to ``last t`` whose
card-hours are cards × steps × step. A node that changes node group (its pool label
changed) splits the segment, so each pool counts the node for its own time. One UTC day is
computed at a time (its answers alone in memory), so no segment crosses a midnight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from telemetry.kubernetes.queries import card_fraction, mig_profile

RECORD_PREFIX = "k8s:"
SCHEDULER_STATE = "Running (Kubernetes)"
PARTITION = "kubernetes"
ALLOCATION_LABELS = ("namespace", "pod", "uid", "node", "resource")
# (node, node-label value) → (node_group_id, pool_id, accelerator_id), or None: unmapped.
NodeGroupIds = tuple[int, int | None, int | None]
NodeResolver = Callable[[str, str], NodeGroupIds | None]
# (namespace, team-label value) → (team, mapped by a rule).
TeamResolver = Callable[[str, str], tuple[str, bool]]


@dataclass(frozen=True)
class Samples:
    """A range answer: each series' labels once (a row per series) and its points as flat
    arrays: ``series`` (the point's row), ``t`` (epoch seconds) and ``value``, in the
    answer's order (a series' points together, in time order)."""

    labels: pd.DataFrame
    series: np.ndarray
    t: np.ndarray
    value: np.ndarray

    @classmethod
    def empty(cls, labels: tuple[str, ...]) -> Samples:
        none = np.empty(0, dtype=np.int64)
        return cls(pd.DataFrame(columns=list(labels)), none, none, np.empty(0))


@dataclass
class Segments:
    """The rows to write and what the mapping left open."""

    rows: pd.DataFrame
    unmapped_nodes: set[str] = field(default_factory=set)
    unmapped_namespaces: set[str] = field(default_factory=set)
    unknown_resources: set[str] = field(default_factory=set)

    def add(self, other: Segments) -> None:
        if len(other.rows):
            self.rows = pd.concat([self.rows, other.rows], ignore_index=True)
        self.unmapped_nodes |= other.unmapped_nodes
        self.unmapped_namespaces |= other.unmapped_namespaces
        self.unknown_resources |= other.unknown_resources


@dataclass(frozen=True)
class Day:
    """The step grid of one chunk: steps at ``start_s + step_s × k``, k = 1…n."""

    start_s: int
    end_s: int
    step_s: int

    @property
    def steps(self) -> int:
        return (self.end_s - self.start_s) // self.step_s

    def index(self, t: np.ndarray) -> np.ndarray:
        return (t - self.start_s) // self.step_s - 1


def _label_grid(
    nodes: pd.Index, node_labels: Samples | None, day: Day
) -> tuple[np.ndarray, list[str]]:
    """nodes × steps: the code of each node's pool-label value at each step (−1: none)."""
    grid = np.full((len(nodes), max(day.steps, 0)), -1, dtype=np.int64)
    if node_labels is None or not len(node_labels.t):
        return grid, []
    codes, names = pd.factorize(node_labels.labels["node_label"].astype(str))
    rows = nodes.get_indexer(pd.Index(node_labels.labels["node"].astype(str)))[node_labels.series]
    steps = day.index(node_labels.t)
    ok = (rows >= 0) & (steps >= 0) & (steps < day.steps) & (codes[node_labels.series] >= 0)
    grid[rows[ok], steps[ok]] = codes[node_labels.series][ok]
    return grid, [str(name) for name in names]


def _groups(
    node_names: pd.Index, labels: list[str], pairs: np.ndarray, resolve: NodeResolver
) -> list[NodeGroupIds | None]:
    width = len(labels) + 1
    return [
        resolve(
            str(node_names[pair // width]), str(labels[pair % width - 1]) if pair % width else ""
        )
        for pair in pairs
    ]


def _accounts(
    labels: pd.DataFrame, team_of_uid: dict[str, str], resolve: TeamResolver
) -> tuple[np.ndarray, set[str]]:
    """Per series: its team; and the namespaces no rule mapped."""
    uids = labels["uid"].astype(str)
    keys = pd.DataFrame(
        {
            "namespace": labels["namespace"].astype(str),
            "team_label": [team_of_uid.get(uid, "") for uid in uids],
        }
    )
    unique = keys.drop_duplicates()
    found = {key: resolve(*key) for key in unique.itertuples(index=False, name=None)}
    unmapped = {namespace for (namespace, _), (_, mapped) in found.items() if not mapped}
    accounts = [found[key][0] for key in keys.itertuples(index=False, name=None)]
    return np.asarray(accounts, dtype=object), unmapped


def day_segments(
    allocation: Samples,
    day: Day,
    window_end_s: int,
    resolve_node: NodeResolver,
    resolve_team: TeamResolver,
    node_labels: Samples | None = None,
    team_of_uid: dict[str, str] | None = None,
) -> Segments:
    """Running segments of one day's ``allocation`` samples (labels :data:`ALLOCATION_LABELS`).

    ``node_labels``: labels node, node_label (the pool label at each step); ``team_of_uid``:
    each pod's team-label value. A segment reaching ``window_end_s`` is still running: its
    end is left empty (like a running Slurm job) and the next fetch writes it again, longer.
    """
    labels = allocation.labels
    if not len(allocation.t):
        return Segments(pd.DataFrame())
    resources = labels["resource"].astype(str)
    shares = {r: card_fraction(r) for r in resources.unique()}
    unknown = {r for r, share in shares.items() if share is None}
    share = resources.map(shares).astype("float64").to_numpy()
    cards = allocation.value * share[allocation.series]
    keep = np.flatnonzero(cards > 0)
    node_codes, node_names = pd.factorize(labels["node"].astype(str))
    grid, label_names = _label_grid(pd.Index(node_names), node_labels, day)
    series, t, cards = allocation.series[keep], allocation.t[keep], cards[keep]
    steps = day.index(t)
    inside = (steps >= 0) & (steps < day.steps)
    series, t, cards, steps = series[inside], t[inside], cards[inside], steps[inside]
    point_label = grid[node_codes[series], steps] if grid.size else np.full(len(t), -1)
    pair = node_codes[series] * (len(label_names) + 1) + point_label + 1
    pairs, group_code = np.unique(pair, return_inverse=True)
    groups = _groups(pd.Index(node_names), label_names, pairs, resolve_node)
    width = len(label_names) + 1
    unmapped_nodes = {
        str(node_names[p // width]) for p, g in zip(pairs, groups, strict=True) if g is None
    }
    accounts, unmapped_namespaces = _accounts(labels, team_of_uid or {}, resolve_team)
    breaks = np.ones(len(t), dtype=bool)
    breaks[1:] = (
        (series[1:] != series[:-1]) | (np.diff(t) != day.step_s)
        | (group_code[1:] != group_code[:-1]) | (cards[1:] != cards[:-1])
    )  # fmt: skip
    first = np.flatnonzero(breaks)
    last = np.append(first[1:] - 1, len(t) - 1)
    rows = _rows(
        labels.iloc[series[first]].reset_index(drop=True), accounts[series[first]],
        [groups[g] for g in group_code[first]], cards[first], t[first], t[last],
        day.step_s, window_end_s,
    )  # fmt: skip
    return Segments(rows, unmapped_nodes, unmapped_namespaces, unknown)


def _rows(
    labels: pd.DataFrame,
    accounts: np.ndarray,
    groups: list[NodeGroupIds | None],
    cards: np.ndarray,
    first_t: np.ndarray,
    last_t: np.ndarray,
    step_s: int,
    window_end_s: int,
) -> pd.DataFrame:
    start_s = first_t - step_s
    duration_h = (last_t - start_s) / 3600.0
    running = last_t >= window_end_s
    resource = labels["resource"].astype(str)
    uid = labels["uid"].astype(str)
    keys = RECORD_PREFIX + uid + ":" + resource + ":" + pd.Series(start_s).astype(str)
    end = pd.Series(pd.to_datetime(last_t, unit="s", utc=True)).where(~running)
    return pd.DataFrame(
        {
            "record_key": keys.to_numpy(),
            "pool_id": pd.array([g[1] if g else None for g in groups], dtype="Int64"),
            "node_group_id": pd.array([g[0] if g else None for g in groups], dtype="Int64"),
            "job_id": uid.str[:100].to_numpy(),
            "job_label": labels["pod"].astype(str).str[:100].to_numpy(),
            "parent_job_id": "",
            "account": pd.Series(accounts, dtype=str).str[:100].to_numpy(),
            "user": labels["namespace"].astype(str).str[:100].to_numpy(),
            "partition": PARTITION,
            "accelerator_id": pd.array([g[2] if g else None for g in groups], dtype="Int64"),
            "gres_type": resource.str[:100].to_numpy(),
            "mig_profile": resource.map(mig_profile).to_numpy(),
            "cards": cards,
            "nodes": 1,
            "node_list": labels["node"].astype(str).to_numpy(),
            "submit": pd.NaT,
            "start": pd.to_datetime(start_s, unit="s", utc=True),
            "end": end.to_numpy(),
            "duration_h": duration_h,
            "card_hours": cards * duration_h,
            "state": np.where(running, "running", "completed"),
            "scheduler_state": SCHEDULER_STATE,
        }
    )
