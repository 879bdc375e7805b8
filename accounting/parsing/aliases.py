"""Map Slurm gres type names (``gres/gpu:<type>``) to catalog accelerator models.

The catalog names are the ``model`` column of ``accelerators.csv``. Sites name their gres
types freely (``h100``, ``a100_80g``, ``nvidia_h100_80gb_hbm3`` from AutoDetect=nvml, ...),
so parsers take the alias table as an argument; :data:`DEFAULT_GRES_ALIASES` is the starting
point users edit. Keys are compared after :func:`normalize_gres_type`, so ``A100-80G``,
``a100_80g`` and ``nvidia_a100_80g`` are the same key.

MIG slices (``a100_3g.20gb``, ``3g.20gb``) count as ``g/7`` of a card: A100, H100 and H200
all split into seven compute slices.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pandas as pd

MIG_COMPUTE_SLICES_PER_CARD = 7
# A slice profile whose memory scaled to the full card reaches this is from an 80 GB-class card
# (A100 40GB profiles imply <= 47 GB, A100 80GB profiles >= 70 GB).
MIG_80G_CLASS_MIN_IMPLIED_GB = 60.0

DEFAULT_GRES_ALIASES: dict[str, str] = {
    # NVIDIA Hopper / Blackwell
    "h100": "H100 SXM5 80GB",
    "h100_sxm": "H100 SXM5 80GB",
    "h100_sxm5": "H100 SXM5 80GB",
    "h100_80g": "H100 SXM5 80GB",
    "h100_80gb": "H100 SXM5 80GB",
    "h100_80gb_hbm3": "H100 SXM5 80GB",
    "h100_sxm5_80gb": "H100 SXM5 80GB",
    "h100_pcie": "H100 PCIe 80GB",
    "h100_pcie_80gb": "H100 PCIe 80GB",
    "h100_80gb_pcie": "H100 PCIe 80GB",
    "h800": "H800 SXM5 80GB",
    "h800_80gb_hbm3": "H800 SXM5 80GB",
    "h200": "H200 SXM 141GB",
    "h200_141gb": "H200 SXM 141GB",
    "h200_141gb_hbm3e": "H200 SXM 141GB",
    "h20": "H20 96GB",
    "b200": "B200 180GB",
    # NVIDIA Ampere / Volta / Ada
    "a100": "A100 SXM4 40GB",
    "a100_40g": "A100 SXM4 40GB",
    "a100_40gb": "A100 SXM4 40GB",
    "a100_sxm4_40gb": "A100 SXM4 40GB",
    "a100_80g": "A100 SXM4 80GB",
    "a100_80gb": "A100 SXM4 80GB",
    "a100_sxm4_80gb": "A100 SXM4 80GB",
    "a100_80gb_pcie": "A100 SXM4 80GB",
    "a800": "A800 SXM4 80GB",
    "a800_80g": "A800 SXM4 80GB",
    "v100": "V100 SXM2 32GB",
    "v100_32g": "V100 SXM2 32GB",
    "v100_sxm2_32gb": "V100 SXM2 32GB",
    "a10": "A10",
    "l40s": "L40S",
    "l40": "L40",
    "l4": "L4",
    "a100_pcie_40gb": "A100 PCIe 40GB",
    "a100_40gb_pcie": "A100 PCIe 40GB",
    "a100_pcie_40g": "A100 PCIe 40GB",
    "gh200": "GH200 96GB",
    "gh200_96gb": "GH200 96GB",
    "gh200_480gb": "GH200 96GB",
    "rtx2080ti": "RTX 2080 Ti",
    "rtx_2080_ti": "RTX 2080 Ti",
    "geforce_rtx_2080_ti": "RTX 2080 Ti",
    # AMD
    "mi250x": "MI250X",
    "mi250": "MI250X",
    "mi300x": "MI300X",
    "mi300": "MI300X",
    "mi100": "MI100",
    "instinct_mi100": "MI100",
    "mi210": "MI210",
    "instinct_mi210": "MI210",
    # Huawei
    "910b": "Ascend 910B",
    "910b2": "Ascend 910B",
    "910b3": "Ascend 910B",
    "ascend910b": "Ascend 910B",
    "ascend_910b": "Ascend 910B",
    "npu_910b": "Ascend 910B",
    "ascend910b2": "Ascend 910B",
    "ascend910b3": "Ascend 910B",
    "ascend910b4": "Ascend 910B",
    "ascend_910b2": "Ascend 910B",
    "ascend_910b3": "Ascend 910B",
    # Intel
    "gaudi2": "Gaudi 2",
    "hl225": "Gaudi 2",
    "hl_225": "Gaudi 2",
    "gaudi3": "Gaudi 3",
    "hl325": "Gaudi 3",
}

_VENDOR_PREFIXES = ("nvidia_", "tesla_", "amd_", "huawei_", "intel_", "habana_")
_MIG_RE = re.compile(r"^(?:(?P<base>.+?)_)?(?P<slices>[1-7])g\.(?P<memory_gb>\d+)gb(?:\+me)?$")


def normalize_gres_type(name: str) -> str:
    """Canonical spelling of a gres type or model name used as an alias key."""
    key = re.sub(r"[\s\-]+", "_", str(name).strip().lower())
    for prefix in _VENDOR_PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix) :]
            break
    return key


def normalize_aliases(aliases: Mapping[str, str]) -> dict[str, str]:
    """Alias table keyed by normalized names; catalog names also resolve to themselves."""
    table = {normalize_gres_type(model): model for model in aliases.values()}
    table.update({normalize_gres_type(key): model for key, model in aliases.items()})
    return table


@dataclass(frozen=True)
class ResolvedGresType:
    """What one gres type name means: catalog model (None when unknown) and card fraction."""

    gres_type: str
    accelerator_model: str | None
    card_fraction: float
    mig_profile: str | None


def resolve_gres_type(name: str, normalized_aliases: Mapping[str, str]) -> ResolvedGresType:
    """Resolve one gres type; ``normalized_aliases`` comes from :func:`normalize_aliases`."""
    key = normalize_gres_type(name)
    mig = _MIG_RE.match(key)
    if mig is None:
        return ResolvedGresType(name, normalized_aliases.get(key), 1.0, None)
    slices = int(mig["slices"])
    profile = f"{slices}g.{mig['memory_gb']}gb"
    fraction = slices / MIG_COMPUTE_SLICES_PER_CARD
    if key in normalized_aliases:  # a site's name for a slice is still a slice of that card
        return ResolvedGresType(name, normalized_aliases[key], fraction, profile)
    base = mig["base"]
    model = None
    if base:
        implied_card_gb = int(mig["memory_gb"]) * MIG_COMPUTE_SLICES_PER_CARD / slices
        candidates = [base]
        if implied_card_gb >= MIG_80G_CLASS_MIN_IMPLIED_GB:
            candidates.insert(0, f"{base}_80g")
        model = next((normalized_aliases[c] for c in candidates if c in normalized_aliases), None)
    return ResolvedGresType(name, model, fraction, profile)


def resolve_gres_types(names: Iterable[str], aliases: Mapping[str, str]) -> pd.DataFrame:
    """Resolve distinct gres type names at once (a handful per file, so a plain loop).

    Returns a frame indexed by ``gres_type`` with columns ``accelerator_model`` (str, NA when
    unknown), ``card_fraction`` (float64) and ``mig_profile`` (str, NA unless MIG).
    """
    table = normalize_aliases(aliases)
    resolved = [resolve_gres_type(name, table) for name in dict.fromkeys(names)]
    frame = pd.DataFrame(
        {
            "gres_type": pd.Series([r.gres_type for r in resolved], dtype="str"),
            "accelerator_model": pd.Series([r.accelerator_model for r in resolved], dtype="str"),
            "card_fraction": pd.Series([r.card_fraction for r in resolved], dtype="float64"),
            "mig_profile": pd.Series([r.mig_profile for r in resolved], dtype="str"),
        }
    )
    return frame.set_index("gres_type")


def card_family(model: str) -> str:
    """``A100 SXM4 80GB`` -> ``a100``; ``Ascend 910B`` -> ``ascend 910b`` (a card's variants)."""
    words = model.lower().split()
    return " ".join(words[:2]) if words and words[0].isalpha() else (words[0] if words else "")


def fit_aliases_to_cluster(
    table: Mapping[str, str], cluster_models: Iterable[str], keep: Iterable[str] = ()
) -> dict[str, str]:
    """The alias table for one cluster: a name resolves against the cluster's own cards first.

    ``a100`` (catalog default A100 SXM4 40GB) on a cluster whose only A100 is the 80GB one
    means that one. When the cluster has several variants of the family, or none, the name
    is left out (unknown: the import warns and asks for an alias) rather than guessed; so is
    a specific name (``a100_40g``) whose card the cluster does not have.
    ``keep`` are keys the user set explicitly; they are never changed. An empty inventory
    leaves the table as it is.
    """
    models = set(cluster_models)
    if not models:
        return dict(table)
    explicit = set(keep)
    fitted: dict[str, str] = {}
    for key, model in table.items():
        variants = [m for m in models if card_family(m) == card_family(model)]
        # A bare family name (``a100``) says no variant: with two in the cluster, don't guess.
        generic = key == normalize_gres_type(card_family(model))
        if key in explicit or (model in models and not (generic and len(variants) > 1)):
            fitted[key] = model
        elif generic and len(variants) == 1:
            fitted[key] = variants[0]
    return fitted
