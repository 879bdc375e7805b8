"""Rows of an sreport table after its header: field counts, GPU rows, figures.

Shared by the cluster utilization and the AccountUtilizationByUser readers.

Slurm counts a MIG slice as one ``gres/gpu`` (the test cluster's ``gpu:1g.10gb:4`` adds 4 to
the node's 8 A100s). Fleetwise counts it as its share of a card (1g = 1/7, like the sacct
reader): a typed slice row is scaled to card-hours, and the untyped ``gres/gpu`` row beside
it loses the slices' difference (:func:`slices_as_cards`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from accounting.parsing.aliases import resolve_gres_types
from accounting.parsing.blocks import RecordBlock, read_block_frame
from accounting.parsing.errors import IssueCollector
from accounting.parsing.sreport_header import HOURS_PER_UNIT, PERCENT_FIX, SreportHeader

# gres/gpu and gres/gpu:TYPE are card-hours; gres/gpumem, gres/gpuutil, cpu, billing are not.
GPU_TRES_RE = r"^gres/gpu(?::[^=,]+)?$"


def raw_rows(
    block: RecordBlock, header: SreportHeader, skip_until: int, issues: IssueCollector
) -> tuple[pd.DataFrame, np.ndarray]:
    """Records after the header with the header's field count, as strings, and their lines."""
    keep = ~block.blank
    keep[: skip_until + 1] = False
    # Banner rules after the header (several reports in one file) are not data.
    first_bytes = block.data[np.minimum(block.record_starts, len(block.data) - 1)]
    rules = (first_bytes == ord("-")) & (block.field_counts == 1)
    keep &= ~rules
    wrong = keep & (block.field_counts != header.field_count)
    lines = block.record_lines
    for position in np.flatnonzero(wrong)[: issues.max_errors]:
        found = int(block.field_counts[position])
        issues.add(
            int(lines[position]),
            header.labels[min(found, len(header.labels) - 1)],
            f"line has {found} fields, the header {header.field_count}",
        )
    good = keep & ~wrong
    names = header.names + (["_trailing"] if header.field_count > len(header.names) else [])
    raw = read_block_frame(block.select_bytes(good), names, delimiter="|")
    return raw, lines[good]


def gpu_rows(
    raw: pd.DataFrame, lines: np.ndarray, other_tres_rows: dict[str, int]
) -> tuple[pd.DataFrame, np.ndarray]:
    """Only GPU TRES rows; the others are counted per TRES name in ``other_tres_rows``."""
    tres = raw["tres name"].str.strip()
    is_gpu = tres.str.match(GPU_TRES_RE).to_numpy(dtype=bool)
    for name, count in tres[~is_gpu].value_counts().items():
        other_tres_rows[str(name)] = other_tres_rows.get(str(name), 0) + int(count)
    raw = raw.loc[is_gpu].reset_index(drop=True)
    raw["tres name"] = tres[is_gpu].to_numpy()
    return raw, lines[is_gpu]


def card_hours(
    text: pd.Series,
    lines: np.ndarray,
    label: str,
    header: SreportHeader,
    issues: IssueCollector,
) -> pd.Series:
    """Printed figures -> card-hours (float64); bad figures are issues."""
    # -t hourper prints "12960(95.00%)": keep the figure before the bracket.
    figure = text.str.replace(r"\(.*\)\s*$", "", regex=True).str.strip()
    values = pd.to_numeric(figure, errors="coerce").astype("float64")
    # -t percent without its banner (-n) prints "12.06%": a share, not a time (said once).
    percent = figure.str.endswith("%").to_numpy(dtype=bool)
    first_percent = percent & (np.cumsum(percent) == 1)
    issues.add_where(
        first_percent, lines, label, f"'{{value}}' is a percentage: {PERCENT_FIX}", text
    )
    # NaN, inf and overflowing figures (1e999) are no card-hours either.
    bad = (~np.isfinite(values.to_numpy()) | (values < 0).to_numpy()) & ~percent
    issues.add_where(bad, lines, label, "'{value}' is not a non-negative number", text)
    return values * HOURS_PER_UNIT.get(header.time_unit or "", 1.0)


def typed_models(tres_name: pd.Series, aliases: Mapping[str, str]) -> pd.Series:
    """Catalog model of typed ``gres/gpu:TYPE`` rows (NA for untyped or unknown types)."""
    return _typed(tres_name, aliases, "accelerator_model")


def card_fractions(tres_name: pd.Series, aliases: Mapping[str, str]) -> pd.Series:
    """The share of a card one unit of each row's TRES is: g/7 for a MIG slice, else 1."""
    return _typed(tres_name, aliases, "card_fraction").fillna(1.0).astype("float64")


def _typed(tres_name: pd.Series, aliases: Mapping[str, str], column: str) -> pd.Series:
    typed = tres_name.str.extract(r"^gres/gpu:(.+)$")[0]
    resolved = resolve_gres_types(typed.dropna().unique(), aliases)[column]
    return typed.map(resolved)


def entity_labels(frame: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """One label per row naming its entity (the ``keys`` columns' values joined)."""
    columns = [frame[key].astype("str").fillna("") for key in keys]  # a blank field is missing
    return functools.reduce(lambda left, right: left + "\x1f" + right, columns)


def slices_as_cards(
    frame: pd.DataFrame, figures: Sequence[str], keys: Sequence[str], fraction: pd.Series
) -> pd.DataFrame:
    """Figures in card-hours where Slurm counted MIG slices as GPUs (module docstring).

    ``fraction``: :func:`card_fractions` of the rows; ``keys``: the columns that make one
    entity's rows (cluster; cluster, account and user). A file without its typed slice rows
    keeps Slurm's count in the untyped row: nothing says how many slices are in it.
    """
    frame, figures = frame.copy(), list(figures)
    fraction = fraction.reindex(frame.index)
    if bool((fraction == 1.0).all()):
        return frame
    untyped = (frame["tres_name"] == "gres/gpu").to_numpy()
    entity = entity_labels(frame, keys)
    excess = frame[figures].mul(1.0 - fraction, axis=0)
    by_entity = excess.loc[~untyped].groupby(entity[~untyped]).sum()
    taken = by_entity.reindex(entity[untyped]).fillna(0.0).to_numpy()
    frame.loc[untyped, figures] = frame.loc[untyped, figures].to_numpy() - taken
    frame.loc[~untyped, figures] = frame.loc[~untyped, figures].mul(fraction[~untyped], axis=0)
    return frame
