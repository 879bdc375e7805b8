"""Energy step: ``1 / PUE``.

Precedence (kernel: ``factors.energy_arrays``): meter readings of the period (measured) >
an entered PUE (entered) > the cooling type's default PUE (default). Readings of another
period still give the ratio, labelled modeled (basis ``metered_kwh_other_period``).
"""

from __future__ import annotations

import numpy as np

from engine.defaults import COOLING_TYPES
from engine.factors import ENERGY_BASES, ENERGY_PROVENANCE, choice_lookup, energy_arrays
from engine.steps.context import FactorStep, PoolContext, categorical, provenance_codes

_METERED = ENERGY_BASES.index("metered_kwh")
_DEFAULT = ENERGY_BASES.index("cooling_default")
_OTHER_PERIOD = ENERGY_BASES.index("metered_kwh_other_period")


def energy_step(ctx: PoolContext) -> FactorStep:
    facility_kwh, it_kwh = ctx.column("facility_kwh"), ctx.column("it_kwh")
    ctx.require(
        np.isnan(facility_kwh) == np.isnan(it_kwh),
        "facility_kwh and it_kwh must be given together",
    )
    default_pue = choice_lookup(ctx.cooling, [ctx.setting(f"pue_{c}") for c in COOLING_TYPES])
    energy, pue, basis = energy_arrays(ctx.column("pue"), facility_kwh, it_kwh, default_pue)
    meters_elsewhere = np.nan_to_num(ctx.column("meters_outside_period")) > 0
    basis = np.where((basis == _METERED) & meters_elsewhere, _OTHER_PERIOD, basis)
    ctx.require(pue >= 1.0, "PUE (pue or facility_kwh / it_kwh) must be >= 1")
    used = [("cooling", ctx.cooling_defaulted & (basis == _DEFAULT))] + [
        (f"pue_{c}", (basis == _DEFAULT) & (ctx.cooling == i) & ctx.defaulted(f"pue_{c}"))
        for i, c in enumerate(COOLING_TYPES)
    ]
    return FactorStep(
        value=energy,
        basis=categorical(basis, ENERGY_BASES),
        provenance=provenance_codes(basis, ENERGY_PROVENANCE),
        used=used,
        extra={"pue": pue},
    )
