"""``sreport -P -t hours -T gres/gpu cluster AccountUtilizationByUser`` -> team card-hours.

Typical input (the banner is optional, like for cluster utilization)::

    Cluster/Account/User Utilization 2024-03-01T00:00:00 - 2024-03-31T23:59:59 (2678400 secs)
    Usage reported in TRES Hours
    Cluster|Account|Login|Proper Name|TRES Name|Used
    alpha|root|||gres/gpu|1200
    alpha|physics|||gres/gpu|900
    alpha|physics|ann|Ann A|gres/gpu|900

Account lines (empty Login) are sums over the account tree below them, so only user lines
are kept: each user's card-hours in each account, counted once. The output columns are
:data:`ACCOUNT_DTYPES`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from accounting.parsing.errors import IssueCollector
from accounting.parsing.fields import blank_to_na
from accounting.parsing.sreport_header import SreportHeader
from accounting.parsing.sreport_rows import card_hours, typed_models

ACCOUNT_DTYPES: dict[str, str] = {
    "cluster": "str",
    "account": "str",
    "user": "str",
    "tres_name": "str",
    "accelerator_model": "str",
    "period_start": "datetime64[us, UTC]",
    "period_end": "datetime64[us, UTC]",
    "used_card_hours": "float64",
    "source_line": "int64",
}


def account_rows(
    raw: pd.DataFrame,
    lines: np.ndarray,
    header: SreportHeader,
    aliases: Mapping[str, str],
    issues: IssueCollector,
) -> pd.DataFrame:
    """User lines of an AccountUtilizationByUser table (account lines are tree sums)."""
    is_user = (raw["login"].str.strip() != "").to_numpy()
    raw, lines = raw.loc[is_user].reset_index(drop=True), lines[is_user]
    issues.add_where(
        (raw["account"].str.strip() == "").to_numpy(), lines, "Account", "empty account"
    )
    frame = pd.DataFrame(
        {
            "cluster": blank_to_na(raw["cluster"]),
            "account": raw["account"].str.strip(),
            "user": raw["login"].str.strip(),
            "tres_name": raw["tres name"],
            "used_card_hours": card_hours(raw["used"], lines, "Used", header, issues),
        }
    )
    frame["accelerator_model"] = typed_models(frame["tres_name"], aliases)
    frame["period_start"] = header.period_start
    frame["period_end"] = header.period_end
    frame["source_line"] = lines
    return pd.DataFrame({name: frame[name].astype(dtype) for name, dtype in ACCOUNT_DTYPES.items()})
