"""GPU holdings of a job: TRES strings (``gres/gpu:h100=8``) and the pre-TRES notation.

Slurm's pre-TRES GPU notation (``AllocGRES``/``ReqGRES``, Slurm 17.11 and before).

``gpu:2``, ``gpu:k80:4``, ``gpu:tesla:2(IDX:0-1)``, ``gpu:k80:2,gpu:p100:1,mic:1`` are
rewritten as the TRES string a later Slurm would print (``gres/gpu:k80=2,gres/gpu:p100=1,
gres/gpu=3``) so one reader handles both eras. Other gres (``mic``, ``nic``) are not GPUs.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from accounting.parsing.schema import MAX_JOB_CARDS

GPU_TRES_RE = re.compile(r"(?:^|,)gres/gpu(?::([^=,]+))?=([^,]*)")
COUNT_RE = re.compile(r"^\d+$")
_INDEX_RE = re.compile(r"\([^)]*\)")


def tres_from_gres(gres: str) -> str:
    """One AllocGRES value -> the equivalent AllocTRES GPU entries ("" when no GPU)."""
    typed: list[str] = []
    total = 0
    bad: str | None = None
    for item in _INDEX_RE.sub("", str(gres)).split(","):
        parts = [part.strip() for part in item.strip().split(":")]
        if not parts or parts[0].lower() != "gpu":
            continue
        gpu_type, count_text = None, "1"
        if len(parts) == 2:
            gpu_type, count_text = (None, parts[1]) if parts[1].isdigit() else (parts[1], "1")
        elif len(parts) >= 3:
            gpu_type, count_text = parts[1], parts[2]
        if not count_text.isdigit():
            bad = count_text
            continue
        total += int(count_text)
        if gpu_type:
            typed.append(f"gres/gpu:{gpu_type}={count_text}")
    if bad is not None:
        return f"gres/gpu={bad}"  # the TRES reader reports the bad count by line
    return ",".join([*typed, f"gres/gpu={total}"]) if total else ""


def tres_column_from_gres(gres: pd.Series) -> pd.Series:
    """Vector form: each distinct value converted once."""
    codes, uniques = pd.factorize(gres, use_na_sentinel=False)
    converted = [tres_from_gres(value) for value in uniques]
    return pd.Series(pd.array(converted, dtype="str")[codes], index=gres.index)


def gpu_entries(tres: str) -> list[tuple[str | None, float]] | str:
    """GPU holdings of one AllocTRES string: [(gres type or None, count)], or a problem text."""
    typed: list[tuple[str | None, float]] = []
    untyped_total: float | None = None
    for gres_type, value in GPU_TRES_RE.findall(str(tres)):
        if not COUNT_RE.match(value.strip()):
            return f"gres/gpu count '{value}' is not a non-negative whole number"
        count = float(value)
        if count > MAX_JOB_CARDS:
            return f"gres/gpu count '{value}' is more than a job can hold (at most {MAX_JOB_CARDS})"
        if gres_type:
            if count > 0:
                typed.append((gres_type, count))
        else:
            untyped_total = count
    typed_total = sum(count for _, count in typed)
    if untyped_total is not None and untyped_total > typed_total:
        # GPUs beyond the typed ones (or all of them when none is typed).
        typed.append((None, untyped_total - typed_total))
    return typed


def gpu_entry_table(alloc_tres: pd.Series) -> tuple[np.ndarray, pd.DataFrame, np.ndarray]:
    """Parse each distinct AllocTRES once.

    Returns (per-row code, table of GPU kinds per code with columns ``_tres_code``,
    ``gres_type``, ``_raw_count``, ``_kinds``, and per-code problem text, "" when fine).
    """
    codes, uniques = pd.factorize(alloc_tres, use_na_sentinel=False)
    code_column: list[int] = []
    type_column: list[str | None] = []
    count_column: list[float] = []
    kinds_column: list[int] = []
    first_column: list[bool] = []
    problems = np.full(len(uniques), "", dtype=object)
    for code, tres in enumerate(uniques):
        entries = gpu_entries(tres)
        if isinstance(entries, str):
            problems[code] = entries
            continue
        for position, (gres_type, count) in enumerate(entries):
            first_column.append(position == 0)
            code_column.append(code)
            type_column.append(gres_type)
            count_column.append(count)
            kinds_column.append(len(entries))
    table = pd.DataFrame(
        {
            "_tres_code": pd.Series(code_column, dtype="int64"),
            "gres_type": pd.Series(type_column, dtype="str"),
            "_raw_count": pd.Series(count_column, dtype="float64"),
            "_kinds": pd.Series(kinds_column, dtype="int64"),
            "_first_kind": pd.Series(first_column, dtype="bool"),
        }
    )
    return codes.astype("int64"), table, problems
