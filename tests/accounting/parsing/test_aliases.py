"""Gres type -> catalog model alias table and MIG fractions."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from accounting.parsing import DEFAULT_GRES_ALIASES, normalize_gres_type, resolve_gres_types

# The card catalog the app loads (inventory.catalog): every alias must name one of its models.
CATALOG = Path(__file__).resolve().parents[3] / "inventory" / "fixtures" / "accelerators.csv"


@pytest.mark.parametrize(
    ("gres_type", "model", "fraction", "profile"),
    [
        ("h100", "H100 SXM5 80GB", 1.0, None),
        ("nvidia_h100_80gb_hbm3", "H100 SXM5 80GB", 1.0, None),  # AutoDetect=nvml name
        ("A100-80G", "A100 SXM4 80GB", 1.0, None),
        ("a100", "A100 SXM4 40GB", 1.0, None),
        ("910b", "Ascend 910B", 1.0, None),
        ("mi300x", "MI300X", 1.0, None),
        ("Gaudi 2", "Gaudi 2", 1.0, None),  # a catalog name resolves to itself
        ("a100_3g.20gb", "A100 SXM4 40GB", 3 / 7, "3g.20gb"),
        # 3g.40gb implies an 80 GB card (40 x 7/3 = 93 GB): the 80 GB alias wins.
        ("a100_3g.40gb", "A100 SXM4 80GB", 3 / 7, "3g.40gb"),
        ("nvidia_h100_1g.10gb", "H100 SXM5 80GB", 1 / 7, "1g.10gb"),
        ("2g.20gb", None, 2 / 7, "2g.20gb"),  # slice without a card name: model unknown
        ("tesla_k80", None, 1.0, None),
        # Names Slurm's AutoDetect (nvml, rsmi) writes into gres.conf on real clusters.
        ("nvidia_a100-pcie-40gb", "A100 PCIe 40GB", 1.0, None),
        ("nvidia_a100-sxm4-80gb", "A100 SXM4 80GB", 1.0, None),
        ("rtx2080ti", "RTX 2080 Ti", 1.0, None),
        ("nvidia_geforce_rtx_2080_ti", "RTX 2080 Ti", 1.0, None),
        ("l40", "L40", 1.0, None),
        ("mi100", "MI100", 1.0, None),
        ("mi210", "MI210", 1.0, None),
        ("gh200", "GH200 96GB", 1.0, None),
        ("nvidia_gh200_480gb", "GH200 96GB", 1.0, None),
    ],
)
def test_resolution(gres_type, model, fraction, profile):
    row = resolve_gres_types([gres_type], DEFAULT_GRES_ALIASES).loc[gres_type]
    assert (
        row["accelerator_model"] if isinstance(row["accelerator_model"], str) else None
    ) == model
    assert row["card_fraction"] == pytest.approx(fraction)
    assert (row["mig_profile"] if isinstance(row["mig_profile"], str) else None) == profile


def test_every_default_target_is_a_catalog_model():
    with CATALOG.open() as handle:
        models = {row["model"] for row in csv.DictReader(handle)}
    assert set(DEFAULT_GRES_ALIASES.values()) <= models


def test_normalisation():
    assert normalize_gres_type(" NVIDIA_A100-SXM4-80GB ") == "a100_sxm4_80gb"


def test_alias_table_fitted_to_the_clusters_cards():
    from accounting.parsing.aliases import fit_aliases_to_cluster, normalize_aliases

    table = normalize_aliases(DEFAULT_GRES_ALIASES)
    only_80 = fit_aliases_to_cluster(table, {"A100 SXM4 80GB", "H100 SXM5 80GB"})
    assert only_80["a100"] == "A100 SXM4 80GB"
    assert "a100_40g" not in only_80  # a card the cluster does not have: asked, not guessed
    assert "mi300x" not in only_80  # no AMD card in the cluster: unknown, not guessed
    both = fit_aliases_to_cluster(table, {"A100 SXM4 40GB", "A100 SXM4 80GB"})
    assert "a100" not in both  # two variants: the bare name is ambiguous
    assert both["a100_80g"] == "A100 SXM4 80GB" and both["a100_40g"] == "A100 SXM4 40GB"
    assert fit_aliases_to_cluster(table, set()) == table
    kept = fit_aliases_to_cluster({"a100": "A100 SXM4 40GB"}, {"A100 SXM4 80GB"}, keep={"a100"})
    assert kept == {"a100": "A100 SXM4 40GB"}
    for autodetected in ("nvidia_a100-sxm4-80gb", "nvidia_h100_80gb_hbm3", "ascend910b3"):
        assert normalize_gres_type(autodetected) in table
