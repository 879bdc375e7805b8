"""``sreport -P -t hours -T gres/gpu cluster AccountUtilizationByUser`` -> team card-hours.

Typical input (the banner is optional, like for cluster utilization)::

    Cluster/Account/User Utilization 2024-03-01T00:00:00 - 2024-03-31T23:59:59 (2678400 secs)
    Usage reported in TRES Hours
    Cluster|Account|Login|Proper Name|TRES Name|Used
    alpha|root|||gres/gpu|1200
    alpha|physics|||gres/gpu|900
    alpha|physics|ann|Ann A|gres/gpu|900

Account lines (empty Login) are sums over the account tree below them, so only user lines
are kept: each user's card-hours in each account, counted once. ``cluster
UserUtilizationByAccount`` (``Cluster|Login|Proper Name|Account|TRES Name|Used``, user lines
only) is the same lines in another order, read by their names. The output columns are
:data:`ACCOUNT_DTYPES`; a MIG slice's card-hours are its share of a card
(:func:`accounting.parsing.sreport_rows.slices_as_cards`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from accounting.parsing.aliases import resolve_gres_types
from accounting.parsing.errors import IssueCollector
from accounting.parsing.fields import blank_to_na
from accounting.parsing.schema import conform_usage_frame
from accounting.parsing.sreport_header import SreportHeader
from accounting.parsing.sreport_rows import card_hours, typed_models

if TYPE_CHECKING:  # pandas-stubs' name for the dtypes astype accepts
    from pandas._typing import AstypeArg

# An untyped line fully covered by its typed ones leaves float dust (MIG shares), not usage.
REMAINDER_FLOOR_CARD_HOURS = 1e-9
ACCOUNT_DTYPES: dict[str, AstypeArg] = {
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


def account_usage_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """Team usage as usage-record rows: one per account, user and card type over the period.

    Typed ``gres/gpu:TYPE`` lines are parts of the user's ``gres/gpu`` line, so the untyped
    line only keeps what the typed ones do not cover (each card-hour counted once).
    """
    typed = rows["tres_name"] != "gres/gpu"
    keys = ["cluster", "account", "user", "period_start"]
    typed_sum = rows.loc[typed].groupby(keys)["used_card_hours"].sum().rename("_typed")
    rows = rows.join(typed_sum, on=keys)
    remainder = rows["used_card_hours"] - rows["_typed"].fillna(0.0)
    used = rows["used_card_hours"].where(typed, remainder)
    keep = (used > REMAINDER_FLOOR_CARD_HOURS).to_numpy()
    rows, used = rows.loc[keep].reset_index(drop=True), used[keep].reset_index(drop=True)
    period_h = (rows["period_end"] - rows["period_start"]).dt.total_seconds() / 3600.0
    gres_type = rows["tres_name"].str.extract(r"^gres/gpu:(.+)$")[0]
    profiles = resolve_gres_types(gres_type.dropna().unique(), {})["mig_profile"]
    key = (
        "sreport:"
        + rows["account"]
        + "/"
        + rows["user"]
        + "/"
        + rows["tres_name"]
        + "@"
        + rows["period_start"].dt.strftime("%Y-%m-%dT%H:%M:%S")
    )
    frame = pd.DataFrame(
        {
            "cluster": rows["cluster"],
            "job_id": key,
            "job_label": "",
            "parent_job_id": "",
            "record_key": key,
            "account": rows["account"],
            "user": rows["user"],
            "accelerator_model": rows["accelerator_model"],
            "gres_type": gres_type,
            "mig_profile": gres_type.map(profiles),
            "cards": used / period_h,
            "start": rows["period_start"],
            "end": rows["period_end"],
            "duration_h": period_h,
            "card_hours": used,
            "state": "completed",
            "scheduler_state": "SREPORT",
            "source_line": rows["source_line"],
        }
    )
    return conform_usage_frame(frame)
