"""Stateless calculators behind /api/v1/estimates/: thin adapters over the pure engine."""

from __future__ import annotations

import math
from typing import Any

from engine.aggregate import attribute_waste_arrays
from engine.defaults import DEFAULTS
from engine.evaluate import NodeGroup, evaluate_pool
from engine.factors import FACTOR_NAMES
from engine.heterogeneous import CardGroup, bucket_effect
from engine.reliability import daly_interval_h, effective_training_time, young_interval_h

MINUTES_PER_HOUR = 60.0


def _hours(minutes: float | None) -> float | None:
    return None if minutes is None else minutes / MINUTES_PER_HOUR


def estimate_effective_time(data: dict[str, Any]) -> dict[str, Any]:
    accelerator = data.get("accelerator")
    result = effective_training_time(
        data["cards"],
        mtbf_card_hours=data.get("mtbf_card_hours"),
        cooling=data.get("cooling") or "air",
        checkpoint_save_h=_hours(data.get("checkpoint_save_minutes")),
        restart_h=_hours(data.get("restart_minutes")),
        checkpoint_interval_h=_hours(data.get("checkpoint_interval_minutes")),
        interval_rule=data.get("interval_rule", "young"),
        site_kind=data.get("site_kind", "unknown"),
        accelerator="" if accelerator is None else accelerator.name,
    )
    given = {
        "mtbf_card_hours": "mtbf_card_hours" in data,
        "checkpoint_save_minutes": "checkpoint_save_minutes" in data,
        "restart_minutes": "restart_minutes" in data,
        "checkpoint_interval_minutes": "checkpoint_interval_minutes" in data,
    }
    # Typed-in values are entered, never measured (docs/efficiency-model.md, Provenance).
    provenance = {key: "entered" if entered else "default" for key, entered in given.items()}
    if not given["checkpoint_interval_minutes"]:
        provenance["checkpoint_interval_minutes"] = "modeled"
    if not given["mtbf_card_hours"] and data.get("cooling"):
        provenance["mtbf_card_hours"] = "modeled"
    return {
        "site_kind": result.site_kind,
        "mtbf_card_hours": result.mtbf_card_hours,
        "mtbf_basis": result.mtbf_basis,
        "mtbf_job_hours": result.mtbf_job_h,
        "checkpoint_save_minutes": result.checkpoint_save_h * MINUTES_PER_HOUR,
        "restart_minutes": result.restart_h * MINUTES_PER_HOUR,
        "young_interval_minutes": float(
            young_interval_h(result.checkpoint_save_h, result.mtbf_job_h) * MINUTES_PER_HOUR
        ),
        "daly_interval_minutes": float(
            daly_interval_h(result.checkpoint_save_h, result.mtbf_job_h) * MINUTES_PER_HOUR
        ),
        "checkpoint_interval_minutes": result.checkpoint_interval_h * MINUTES_PER_HOUR,
        "interval_rule": result.interval_rule,
        "effective_time": result.effective_time,
        "ettr": result.ettr,
        "runtime_goodput": result.effective_time,
        "stalled": result.stalled,
        "lost_share": {
            "checkpoint_saves": result.lost_checkpoint_share,
            "rework": result.lost_rework_share,
            "restarts": result.lost_restart_share,
            "total": result.lost_share,
        },
        "provenance": provenance,
    }


def estimate_pool(data: dict[str, Any]) -> dict[str, Any]:
    groups = [
        CardGroup(
            accelerator=member["accelerator"].name,
            vendor=member["accelerator"].vendor,
            cards=member["cards"],
            peak_tflops=member["accelerator"].dense_bf16_tflops,
            mfu=member.get("mfu") or member["accelerator"].default_training_mfu,
        )
        for member in data["members"]
    ]
    overrides: dict[str, float] = {}
    if data.get("mixing_penalty") is not None:
        overrides = {
            "mixing_penalty_same_vendor": data["mixing_penalty"],
            "mixing_penalty_cross_vendor": data["mixing_penalty"],
        }
    result = bucket_effect(
        groups, microbatches=data.get("global_batch_microbatches"), overrides=overrides
    )
    slowest = min(groups, key=lambda g: g.peak_tflops * g.mfu)
    return {
        "strategies": {
            s.strategy: {
                "throughput_pflops": s.throughput_tflops / 1000.0,
                "heterogeneity_factor": s.heterogeneity,
            }
            for s in result.strategies
        },
        "recommended": result.recommended,
        "why": result.why,
        "slowest_card": slowest.accelerator,
        "ideal_pflops": result.ideal_tflops / 1000.0,
        "total_cards": result.total_cards,
        "mixing_penalty": result.mixing_penalty,
        "microbatches": result.microbatches,
    }


class EstimateInputError(ValueError):
    """Inputs that are valid one by one but not enough together; `errors` maps field → why."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def _modeled_pool(data: dict[str, Any]):
    """Model the factors of one job: `cards` of `accelerator` at a site of `cooling`."""
    accelerator = data["accelerator"]
    cards = data["cards"]
    cards_per_node = min(8, cards)
    group = NodeGroup(
        accelerator=accelerator.name,
        vendor=accelerator.vendor,
        peak_tflops=accelerator.dense_bf16_tflops,
        nodes=math.ceil(cards / cards_per_node),
        cards_per_node=cards_per_node,
        nvlink_bidir_gbs=accelerator.intra_node_interconnect_gbs,
        default_mfu=accelerator.default_training_mfu,
        # Tensor parallelism may span the card's NVLink domain (None: the 8-card node).
        nvlink_domain_cards=accelerator.nvlink_domain_cards,
    )
    return evaluate_pool([group], cooling=data.get("cooling") or DEFAULTS["cooling"].value)


def estimate_utilization(data: dict[str, Any]) -> dict[str, Any]:
    """The five-factor product from entered factors, modeling the ones left out."""
    entered = dict.fromkeys(FACTOR_NAMES)
    if data.get("pue") is not None:
        entered["energy"] = 1.0 / data["pue"]
    elif data.get("energy") is not None:
        entered["energy"] = data["energy"]
    for name in ("mfu", "scaling", "effective_time", "utilization"):
        entered[name] = data.get(name)
    missing = [name for name, value in entered.items() if value is None]
    modeled = None
    if missing:
        if data.get("accelerator") is None or data.get("cards") is None:
            raise EstimateInputError(
                {
                    ("pue" if name == "energy" else name): "Give a value, or give "
                    "'accelerator' and 'cards' (and optionally 'cooling') to model it."
                    for name in missing
                }
            )
        modeled = _modeled_pool(data)
    factors = {}
    for name in FACTOR_NAMES:
        if entered[name] is not None:
            factors[name] = {
                "value": float(entered[name]),
                "provenance": "entered",
                "basis": "entered",
            }
        else:
            result = modeled.factors[name]
            factors[name] = {
                "value": result.value,
                "provenance": result.provenance,
                "basis": result.basis,
            }
    values = [[factors[name]["value"] for name in FACTOR_NAMES]]
    product, lost, shares = attribute_waste_arrays(values)
    return {
        "factors": factors,
        "effective_utilization": float(product[0]),
        "lost_share": float(lost[0]),
        "waste_share": {name: float(shares[0][i]) for i, name in enumerate(FACTOR_NAMES)},
    }
