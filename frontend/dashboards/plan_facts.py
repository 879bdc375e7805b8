"""The facts at the head of a plan's page, in the user's own terms: the batch as it was
entered (tokens or sequences) and the utilization every option's days rest on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.capacity.options import DEFAULT_UTILIZATION
from engine.capacity.workload import PlannerInputError, workload_from_spec

MILLION = 1e6
DEFAULT_SEQ_LEN = 2048  # the workload's defaults (engine.capacity.workload.TrainingWorkload)
DEFAULT_BATCH_SEQUENCES = 1536


def _batch_sequences(workload: Mapping[str, Any]) -> int | None:
    """The engine's batch in sequences (a tokens batch rounded to whole sequences)."""
    try:
        return workload_from_spec(workload).batch_sequences
    except (PlannerInputError, TypeError, ValueError):  # a stored workload it cannot read
        return None


def batch_summary(workload: Mapping[str, Any]) -> str:
    """ "16 M tokens as entered (1,953 sequences × 8,192 tokens)", or "1,536 sequences ×
    2,048 tokens (3.146 M tokens)" when it was entered in sequences; and how far it grows."""
    seq_len = int(workload.get("seq_len") or DEFAULT_SEQ_LEN)
    tokens = workload.get("global_batch_tokens")
    if tokens:
        sequences = _batch_sequences(workload)
        text = f"{tokens / MILLION:,.4g} M tokens as entered"
        if sequences is not None:
            text += f" ({sequences:,} sequences × {seq_len:,} tokens)"
    else:
        sequences = int(workload.get("global_batch_sequences") or DEFAULT_BATCH_SEQUENCES)
        text = (
            f"{sequences:,} sequences × {seq_len:,} tokens "
            f"({sequences * seq_len / MILLION:,.4g} M tokens)"
        )
    cap = workload.get("max_batch_tokens")
    if cap:
        text += f", growing with data parallelism up to {cap / MILLION:,.4g} M tokens"
    return text


def utilization_summary(overrides: Mapping[str, Any] | None) -> str:
    """Where the options' utilization comes from: entered for all, or per option."""
    entered = (overrides or {}).get("utilization")
    if entered is not None:
        return f"{entered:.0%} for every option (entered with the plan)"
    return (
        "per option: measured from usage records where a pool has them, else the pool's "
        f"planned utilization, else {DEFAULT_UTILIZATION:.0%} (default: an industry figure)"
    )
