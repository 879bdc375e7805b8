"""Energy and money per million served tokens.

energy = cards × power × time × PUE, with power = TDP × share drawn while serving;
cost = cards × price per card-hour × time + energy × tariff. Time is the time the deployment
takes to serve a million tokens at the rate it serves (the target, or its capacity).
A card's hourly price is entered, else the catalog rental price, else the list price spread
over the amortization years; with none of them the cost is unknown (NaN), not zero.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

HOURS_PER_YEAR = 8_760.0
SECONDS_PER_HOUR = 3_600.0
MILLION = 1e6


def card_hour_price(
    frame: pd.DataFrame, entered: float | None, amortization_years: float
) -> tuple[NDArray[np.float64], NDArray[np.object_]]:
    """Price of one card-hour per row and where it came from."""
    n = len(frame)
    if entered is not None:
        return np.full(n, float(entered)), np.full(n, "entered", dtype=object)
    rental_column = frame.get("rental_price_per_card_hour", pd.Series(np.nan, frame.index))
    listed = frame.get("list_price", pd.Series(np.nan, frame.index))
    rental = rental_column.astype(float).to_numpy()
    amortized = listed.astype(float).to_numpy() / (amortization_years * HOURS_PER_YEAR)
    price = np.where(np.isfinite(rental), rental, amortized)
    basis = np.where(
        np.isfinite(rental), "catalog rental", np.where(np.isfinite(amortized), "amortized", "none")
    )
    return price, basis.astype(object)


def energy_kwh_per_million(
    cards: ArrayLike, power_w: ArrayLike, pue: ArrayLike, tokens_per_s: ArrayLike
) -> NDArray[np.float64]:
    seconds = MILLION / np.asarray(tokens_per_s, np.float64)
    watts = np.asarray(cards, np.float64) * np.asarray(power_w, np.float64) * np.asarray(pue)
    kwh: NDArray[np.float64] = watts * seconds / SECONDS_PER_HOUR / 1_000.0
    return kwh


def cost_per_million(
    cards: ArrayLike,
    card_hour_price: ArrayLike,
    tokens_per_s: ArrayLike,
    energy_kwh: ArrayLike,
    tariff_per_kwh: float | None,
) -> NDArray[np.float64]:
    """Card-hours plus energy for a million tokens; energy left out when no tariff is given."""
    hours = MILLION / np.asarray(tokens_per_s, np.float64) / SECONDS_PER_HOUR
    cards_cost = np.asarray(cards, np.float64) * np.asarray(card_hour_price, np.float64) * hours
    energy_cost = 0.0 if tariff_per_kwh is None else np.asarray(energy_kwh) * tariff_per_kwh
    return cards_cost + energy_cost
