"""How a report figure moved since the previous period: delta, arrow and whether that is better."""

from __future__ import annotations

# A change smaller than this (in the value's own unit, e.g. 0.005 = half a point) is "flat".
FLAT_CHANGE = 0.005


def change(current: float | None, previous: float | None, higher_is_better: bool) -> dict:
    """Delta and arrow of a figure vs the previous period; ``better`` None when flat/unknown."""
    if current is None or previous is None:
        return {"delta": None, "arrow": "–", "direction": "unknown", "better": None}
    delta = current - previous
    scale = max(abs(previous), 1.0) if abs(previous) > 1 else 1.0
    if abs(delta) / scale < FLAT_CHANGE:
        return {"delta": delta, "arrow": "→", "direction": "flat", "better": None}
    up = delta > 0
    return {
        "delta": delta,
        "arrow": "▲" if up else "▼",
        "direction": "up" if up else "down",
        "better": up == higher_is_better,
    }
