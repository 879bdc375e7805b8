"""pandas frames as JSON: the one conversion every stored result and API row goes through."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import numpy as np
import pandas as pd


def json_value(value: Any) -> Any:
    """A frame cell as JSON: NaN, inf, NA and NaT → None; numpy scalars → Python; times → ISO."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating, decimal.Decimal)):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return {key: json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(item) for item in value]
    if isinstance(value, (dt.date, dt.datetime, pd.Timestamp)):
        return value.isoformat()
    return None if pd.isna(value) else str(value)


def json_rows(frame: pd.DataFrame, *, index: bool = False) -> list[dict[str, Any]]:
    """Frame rows as JSON-safe dicts; with ``index`` the index becomes leading columns."""
    if index:
        frame = frame.reset_index()
    columns = list(frame.columns)
    return [
        {column: json_value(value) for column, value in zip(columns, row, strict=True)}
        for row in frame.itertuples(index=False, name=None)
    ]
