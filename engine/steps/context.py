"""Step 0 of the pool pipeline: read and check the inputs, resolve defaults per pool."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from engine.defaults import (
    PROVENANCES,
    resolve_choice_codes,
    resolve_column,
    validate_override_frame,
)
from engine.factors import require, vendor_codes
from engine.parallelism import scale_up_cards
from engine.records import NODE_GROUP_REQUIRED_COLUMNS, PoolMeasure
from engine.segments import Segments

REQUIRED_GROUP_COLUMNS: tuple[str, ...] = NODE_GROUP_REQUIRED_COLUMNS


def optional(frame: pd.DataFrame, column: str) -> np.ndarray:
    """Float column or all-NaN if absent."""
    if column not in frame.columns:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[column], errors="raise").to_numpy(dtype=float, na_value=np.nan)


def categorical(codes: np.ndarray, names: Sequence[str]) -> pd.Categorical[str]:
    return pd.Categorical.from_codes(codes.astype(np.int64), categories=pd.Index(list(names)))


def provenance_codes(basis: np.ndarray, provenance_of_basis: Sequence[str]) -> np.ndarray:
    """Codes into ``PROVENANCES`` from basis codes and the provenance of each basis."""
    codes: np.ndarray = np.asarray([PROVENANCES.index(p) for p in provenance_of_basis])[basis]
    return codes


DefaultsUsed = list[tuple[str, np.ndarray]]


@dataclass
class FactorStep:
    """One factor for every pool: value, basis (which input won), provenance, defaults used."""

    value: np.ndarray
    basis: pd.Categorical[str]
    provenance: np.ndarray  # codes into PROVENANCES
    used: DefaultsUsed
    extra: dict[str, object] = field(default_factory=dict)  # inputs shown beside the factor


class PoolContext:
    """Checked node-group and pool arrays plus the per-pool defaults (resolved once each)."""

    def __init__(self, node_groups: pd.DataFrame, pools: pd.DataFrame) -> None:
        if "pool_id" in pools.columns:
            pools = pools.set_index("pool_id")
        if not pools.index.is_unique:
            raise ValueError("pool ids must be unique")
        validate_override_frame(pools, "pool")
        missing = [c for c in REQUIRED_GROUP_COLUMNS if c not in node_groups.columns]
        if missing:
            raise ValueError(f"node_groups frame is missing column(s) {missing}")
        self.pools = pools
        self.labels = pools.index
        self.n_pools = len(pools)
        self._resolved: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._read_groups(node_groups)
        self.cooling, self.cooling_defaulted = resolve_choice_codes(pools, "cooling")
        self.fabric, self.fabric_defaulted = resolve_choice_codes(pools, "fabric")
        self.workload, self.workload_defaulted = resolve_choice_codes(pools, "workload_class")
        self.interval_rule, self.rule_defaulted = resolve_choice_codes(
            pools, "checkpoint_interval_rule"
        )
        self._read_job_cards()

    def _read_groups(self, node_groups: pd.DataFrame) -> None:
        self.group_pool = self.labels.get_indexer(pd.Index(node_groups["pool_id"]))
        require(
            self.group_pool >= 0,
            "node_groups.pool_id not found in pools",
            node_groups["pool_id"].tolist(),
        )
        if self.n_pools == 0:
            raise ValueError("no pools to evaluate")
        require(
            np.bincount(self.group_pool, minlength=self.n_pools) > 0,
            "pool has no node groups",
            self.labels,
        )
        self.segments = Segments(self.group_pool, self.n_pools)
        self.nodes = optional(node_groups, "nodes")
        self.cards_per_node = optional(node_groups, "cards_per_node")
        self.cards = self.nodes * self.cards_per_node
        self.peak = optional(node_groups, "peak_tflops")
        require(
            (self.cards > 0) & (self.peak > 0),
            "node groups need nodes, cards_per_node and peak_tflops > 0",
            node_groups["pool_id"].tolist(),
        )
        vendor_index, vendor_names = pd.factorize(node_groups["vendor"].astype(str))
        self.vendor = vendor_codes(np.asarray(vendor_names, dtype=str))[vendor_index]
        self.accelerator_code, self.accelerators = pd.factorize(
            node_groups["accelerator"].astype(str)
        )
        self.nvlink_given = optional(node_groups, "nvlink_bidir_gbs")
        self.nvlink = np.where(
            np.isnan(self.nvlink_given),
            self.setting("intra_node_bidir_gbs")[self.group_pool],
            self.nvlink_given,
        )
        # Cards a tensor-parallel group may span on NVLink: the card's domain, else the node.
        domain = optional(node_groups, "nvlink_domain_cards")
        self.scale_up = scale_up_cards(self.cards_per_node, domain).astype(float)
        self.card_default_mfu = optional(node_groups, "default_mfu")
        self.group_mfu_entered = optional(node_groups, "mfu")
        self.mfu_from_jobs = np.nan_to_num(optional(node_groups, "mfu_from_jobs")) > 0
        self.pool_cards = self.segments.sum(self.cards)
        self.pool_peak_tflops = self.segments.sum(self.cards * self.peak)

    def _read_job_cards(self) -> None:
        given = self.column("job_cards")
        self.job_cards = np.where(np.isnan(given), self.pool_cards, given)
        require(
            (self.job_cards > 0) & (self.job_cards <= self.pool_cards),
            "job_cards must be in (0, pool cards]",
            self.labels,
        )

    def column(self, name: PoolMeasure) -> np.ndarray:
        """A pool input as floats (all-NaN when the column is absent)."""
        return optional(self.pools, name)

    def setting(self, key: str) -> np.ndarray:
        """A DEFAULTS key per pool: the pool's override, else the table value."""
        if key not in self._resolved:
            self._resolved[key] = resolve_column(self.pools, key)
        return self._resolved[key][0]

    def defaulted(self, key: str) -> np.ndarray:
        """Pools where ``key`` came from the defaults table."""
        self.setting(key)
        return self._resolved[key][1]

    def require(self, valid: np.ndarray, message: str) -> None:
        require(valid, message, self.labels)

    def any_group(self, mask: np.ndarray) -> np.ndarray:
        return self.segments.any(mask)
