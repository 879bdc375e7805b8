"""Physical ranges of the numbers entered in the inventory, from the one table of limits.

Each model's clean() adds `range_errors(self)`, so the API, the forms, the admin and the bulk
import refuse the same values with the same message (docs/deployment.md, "Limits").
"""

from __future__ import annotations

from django.core.exceptions import ValidationError

from engine.limits import date_error, limit, limit_errors

# Model name -> {field: limit name in engine.limits.LIMITS}.
FIELD_LIMITS: dict[str, dict[str, str]] = {
    "Site": {
        "pue": "pue",
        "metered_facility_energy_kwh": "energy_kwh",
        "metered_it_energy_kwh": "energy_kwh",
        "tariff_per_kwh": "tariff_per_kwh",
        "grid_carbon_g_per_kwh": "grid_carbon_g_per_kwh",
    },
    "AcceleratorModel": {
        "dense_bf16_tflops": "card_tflops",
        "dense_fp8_tflops": "card_tflops",
        "dense_int8_tops": "card_tflops",
        "dense_fp4_tflops": "card_tflops",
        "memory_gb": "memory_gb",
        "memory_bandwidth_tbs": "memory_bandwidth_tbs",
        "tdp_w": "tdp_w",
        "intra_node_interconnect_gbs": "interconnect_gbs",
        "default_training_mfu": "share",
        "list_price": "money",
        "rental_price_per_card_hour": "price_per_card_hour",
    },
    "Cluster": {
        "inter_node_bandwidth_gbps_per_card": "interconnect_gbits",
        "capital_cost_per_card": "money",
        "amortization_years": "amortization_years",
        "yearly_opex": "money",
        "rental_price_per_card_hour": "price_per_card_hour",
    },
    "Pool": {"planned_utilization": "share"},
    "NodeGroup": {"node_count": "node_count", "cards_per_node": "cards_per_node", "mfu": "share"},
}
DATE_FIELDS: dict[str, tuple[str, ...]] = {
    "Site": ("metered_period_start", "metered_period_end"),
    "Cluster": ("commissioned_on",),
}


def range_errors(instance) -> dict[str, str]:
    """Field → message for every number or date of `instance` outside its range.

    A value its model field already refuses (pue 0.5: "at least 1.0") gets one message, not two.
    """
    name = type(instance).__name__
    errors = {
        field: message
        for field, message in limit_errors(instance, FIELD_LIMITS.get(name, {})).items()
        if _field_accepts(instance, field)
    }
    for field in DATE_FIELDS.get(name, ()):
        if message := date_error(getattr(instance, field, None)):
            errors[field] = message
    if name == "Site" and not errors:
        errors.update(metered_pue_errors(instance))
    return errors


def _field_accepts(instance, field: str) -> bool:
    try:
        instance._meta.get_field(field).run_validators(getattr(instance, field))
    except (ValidationError, TypeError, ValueError):  # not even a number: clean_fields says so
        return False
    return True


def metered_pue_errors(site) -> dict[str, str]:
    """The PUE the metered energies give must be a PUE, as an entered one must."""
    facility, it = site.metered_facility_energy_kwh, site.metered_it_energy_kwh
    numbers = all(isinstance(value, int | float) for value in (facility, it))
    if not numbers or it <= 0:  # missing or not numbers: the field checks report those
        return {}
    pue = facility / it
    if limit("pue").contains(pue):
        return {}
    return {
        "metered_facility_energy_kwh": f"The metered energies give a PUE of {pue:.3g}. "
        + limit("pue").message.replace("Must be", "A PUE must be")
    }
