"""Honest range of each estimate: days and cost at the 10th and 90th percentile of the
documented uncertainty of every default the estimate used, and which uncertainty matters most.

An entered or measured figure carries no default uncertainty; a modeled or default one does:
the modeled throughput (MFU × scaling: how far real runs fall from the model, calibrated on
the residuals of the published calibration runs), the fabric's achieved bandwidth (through the
exposed communication of the chosen split), the MTBF per card and the restart time. Each is a
log-normal multiplier: the model's has the calibration runs' 10th and 90th percentiles of
published ÷ modeled (`model_ratio_p10`, `model_ratio_p90`), the others a 90th percentile of
`uncertainty_<name>` times the central value (defaults table, with its sources). The band
draws all of them together (a fixed seed: the same plan gives the same band), vectorised over
options × draws; the tornado moves one at a time to its 10th and 90th percentile.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from engine.capacity.options import blocking_save_hours, table_default
from engine.reliability import effective_time_arrays, restart_h_at

UNCERTAINTIES: tuple[str, ...] = ("mfu", "fabric", "mtbf", "restart")
Z90 = 1.2815515655446004  # standard normal 90th percentile
BAND_DRAWS = 256
BAND_SEED = 20_240_731  # fixed: the band of a plan does not move between runs
STALL_RATIO = 100.0  # a 90th percentile 100× the central days: failures stall the job
STALL_NOTE = (
    "no upper bound: at the 90th percentile of MTBF and restart time failures leave no "
    "productive time"
)


def _model_error() -> tuple[float, float]:
    """Log-normal μ and σ of published ÷ modeled throughput from its 10th and 90th percentile."""
    low = np.log(table_default("model_ratio_p10"))
    high = np.log(table_default("model_ratio_p90"))
    return float((low + high) / 2.0), float((high - low) / (2.0 * Z90))


def _sigmas(frame: pd.DataFrame) -> dict[str, NDArray[np.float64]]:
    """Log-normal σ of each uncertainty per option; 0 where the figure was not a default."""
    applies = {
        "mfu": np.isin(frame["mfu_provenance"].to_numpy(), ("default", "modeled")),
        "fabric": frame["scaling_provenance"].to_numpy() == "modeled",
        "mtbf": (frame["effective_time_provenance"].to_numpy() == "modeled")
        & frame["mtbf_defaulted"].to_numpy(bool),
        "restart": (frame["effective_time_provenance"].to_numpy() == "modeled")
        & frame["restart_grows"].to_numpy(bool),
    }
    sigmas = {
        name: np.where(applies[name], np.log(table_default(f"uncertainty_{name}")) / Z90, 0.0)
        for name in UNCERTAINTIES
        if name != "mfu"
    }
    return {"mfu": np.where(applies["mfu"], _model_error()[1], 0.0), **sigmas}


def _model_multiplier(
    frame: pd.DataFrame, z: NDArray[np.float64], centred: bool
) -> NDArray[np.float64]:
    """Published ÷ modeled throughput at z standard deviations where MFU is modeled, else 1;
    `centred` leaves the calibration's median shift out (z = 0 is the central estimate)."""
    mu, sigma = _model_error()
    applies = np.isin(frame["mfu_provenance"].to_numpy(), ("default", "modeled"))[:, None]
    shift = 0.0 if centred else mu
    multiplier: NDArray[np.float64] = np.where(applies, np.exp(shift + sigma * z), 1.0)
    return multiplier


def _throughput(
    frame: pd.DataFrame, z: dict[str, NDArray[np.float64]], centred: bool = False
) -> NDArray[np.float64]:
    """MFU × scaling × effective time with each uncertainty at z standard deviations
    (arrays shaped options × draws): the model's error scales the modeled throughput, the
    fabric's the exposed seconds that ride on it."""
    sigma = _sigmas(frame)

    def col(name: str) -> NDArray[np.float64]:
        return frame[name].to_numpy(np.float64)[:, None]

    model_x = _model_multiplier(frame, z["mfu"], centred)
    fabric_x = np.exp(sigma["fabric"][:, None] * z["fabric"])
    scaling = col("scaling")
    step = 1.0 / scaling  # in units of the central per-card compute time
    fabric = step * np.nan_to_num(col("fabric_share"))
    drawn_scaling = np.minimum(1.0 / (step - fabric + fabric / fabric_x), 1.0)
    cards = col("cards")
    save = blocking_save_hours(frame)[:, None]
    restart = restart_h_at(
        col("restart_hours"),
        cards,
        np.where(col("restart_grows") > 0, table_default("restart_growth_h_per_doubling"), 0.0),
    ) * np.exp(sigma["restart"][:, None] * z["restart"])
    modeled = effective_time_arrays(
        cards,
        col("mtbf_card_hours") * np.exp(sigma["mtbf"][:, None] * z["mtbf"]),
        save,
        restart,
        col("checkpoint_interval_hours"),
        (frame["checkpoint_interval_rule"].to_numpy() == "daly")[:, None],
    ).effective_time
    is_modeled = (frame["effective_time_provenance"].to_numpy() == "modeled")[:, None]
    effective = np.where(is_modeled, modeled, col("effective_time"))
    drawn = np.where(np.isnan(drawn_scaling), scaling, drawn_scaling)
    return np.minimum(col("mfu") * drawn * model_x, 1.0) * effective


def days_band(frame: pd.DataFrame) -> pd.DataFrame:
    """days_low/high and cost_low/high (10th/90th percentile), always containing the central
    estimate; NaN where the option has no result."""
    rng = np.random.default_rng(BAND_SEED)
    z = {name: rng.standard_normal((1, BAND_DRAWS)) for name in UNCERTAINTIES}
    central = frame["mfu"] * frame["scaling"] * frame["effective_time"]
    ratio = central.to_numpy(np.float64)[:, None] / _throughput(frame, z)
    low, high = np.percentile(ratio, [10, 90], axis=1)
    # Failures that leave no productive time have no finishing date: no upper bound, said why.
    stalls = high > STALL_RATIO
    high = np.where(stalls, np.nan, high)
    days = frame["days"].to_numpy(np.float64)
    cost = frame["total_cost"].to_numpy(np.float64)
    # Cost follows calendar days at a fixed utilization (card-hours, energy and idle alike).
    return pd.DataFrame(
        {
            "days_low": np.minimum(days * low, days),
            "days_high": np.where(stalls, np.nan, np.maximum(days * high, days)),
            "cost_low": np.minimum(cost * low, cost),
            "cost_high": np.where(stalls, np.nan, np.maximum(cost * high, cost)),
            "band_note": np.where(stalls, STALL_NOTE, ""),
        },
        index=frame.index,
    )


def uncertainty_tornado(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (option, uncertainty): days with it at its 10th and 90th percentile and
    the others central, sorted within each option by the width of the swing."""
    rows = []
    central_z = np.zeros((1, 1))
    for name in UNCERTAINTIES:
        swing = []
        for sign in (-1.0, 1.0):
            z = dict.fromkeys(UNCERTAINTIES, central_z)
            z[name] = np.full((1, 1), sign * Z90)
            swing.append(_throughput(frame, z, centred=name != "mfu")[:, 0])
        central = (frame["mfu"] * frame["scaling"] * frame["effective_time"]).to_numpy(np.float64)
        days = frame["days"].to_numpy(np.float64)
        a, b = days * central / swing[0], days * central / swing[1]
        rows.append(
            pd.DataFrame(
                {
                    "option_id": frame.index,
                    "uncertainty": name,
                    "days_low": np.minimum(a, b),
                    "days_high": np.maximum(a, b),
                }
            )
        )
    table = pd.concat(rows, ignore_index=True)
    table["swing_days"] = table["days_high"] - table["days_low"]
    return table.sort_values(["option_id", "swing_days"], ascending=[True, False]).reset_index(
        drop=True
    )
