"""Slurm's pre-TRES GPU notation (``AllocGRES``/``ReqGRES``, Slurm 17.11 and before).

``gpu:2``, ``gpu:k80:4``, ``gpu:tesla:2(IDX:0-1)``, ``gpu:k80:2,gpu:p100:1,mic:1`` are
rewritten as the TRES string a later Slurm would print (``gres/gpu:k80=2,gres/gpu:p100=1,
gres/gpu=3``) so one reader handles both eras. Other gres (``mic``, ``nic``) are not GPUs.
"""

from __future__ import annotations

import re

import pandas as pd

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
