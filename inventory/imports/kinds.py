"""What can be imported: the kinds of rows, their columns and natural keys, and the limits."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from django.db import models

from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

MAX_ROWS = 5000
MAX_UPLOAD_BYTES = 5 * 1024 * 1024
# What an XLSX may inflate to (5000 rows are a few MB of XML); more is refused unopened.
MAX_XLSX_INFLATED_BYTES = 100 * 1024 * 1024
FIRST_DATA_ROW = 2  # the header is spreadsheet row 1

NUL_MESSAGE = "contains a NUL character, which cannot be stored."
EARLIEST_DATE, LATEST_DATE = pd.Timestamp("1900-01-01"), pd.Timestamp("2200-01-01")

CREATE, UPDATE, UNCHANGED = "create", "update", "unchanged"
TRUE_WORDS = {"true", "yes", "y", "1", "x"}
FALSE_WORDS = {"false", "no", "n", "0"}
UNKNOWN_WORD = "unknown"  # a stated "not known" where a figure may be unknown (stored as 0)


class ImportFileError(ValueError):
    """The file as a whole cannot be used (unreadable, unknown or missing columns, too big)."""


@dataclass(frozen=True)
class ImportKind:
    """One importable object type: its columns and how rows map onto model instances."""

    slug: str
    label: str
    model: type[models.Model]
    columns: tuple[str, ...]
    # Natural-key columns naming the parent object, outermost first, e.g. ("site", "cluster").
    parent_columns: tuple[str, ...] = ()
    example: dict[str, str] = field(default_factory=dict)
    # Columns a new row must fill (the model's default would be a silent value), each with the
    # fix; a blank cell there is refused on every row. Not required of a file that only edits.
    stated: dict[str, str] = field(default_factory=dict)
    # Columns whose cell may read "unknown": stored as 0, as the form's "unknown" box does.
    unknown_allowed: tuple[str, ...] = ()

    @property
    def parent_field(self) -> str | None:
        return self.parent_columns[-1] if self.parent_columns else None

    @property
    def key_columns(self) -> tuple[str, ...]:
        return (*self.parent_columns, "name")

    @property
    def value_fields(self) -> tuple[str, ...]:
        return tuple(c for c in self.columns if c not in self.key_columns)

    def model_field(self, column: str) -> models.Field:
        return self.model._meta.get_field(column)

    @property
    def required_columns(self) -> tuple[str, ...]:
        """Key columns plus fields that accept no empty value and have no default."""
        required = [
            name
            for name in self.value_fields
            if not (
                self.model_field(name).has_default()
                or self.model_field(name).null
                or self.model_field(name).blank
            )
        ]
        return (*self.key_columns, *required)


KINDS: dict[str, ImportKind] = {
    kind.slug: kind
    for kind in [
        ImportKind(
            slug="sites",
            label="Sites",
            model=Site,
            columns=Site.EDITABLE_FIELDS,
            example={
                "name": "Oslo DC3",
                "location": "Oslo, NO",
                "cooling_type": "direct_liquid",
                "pue": "1.15",
                "tariff_per_kwh": "0.07",
                "currency": "EUR",
                "grid_carbon_g_per_kwh": "30",
                "metered_period_start": "2026-01-01",
                "assumptions": '{"mtbf_card_hours": 30000}',
            },
            stated={
                "tariff_per_kwh": "give the tariff per kWh in the site's currency, or write "
                f"{UNKNOWN_WORD} (stored as 0: the site's energy adds no cost).",
                "currency": "give the site's ISO 4217 currency code, e.g. EUR.",
            },
            unknown_allowed=("tariff_per_kwh",),
        ),
        ImportKind(
            slug="clusters",
            label="Clusters",
            model=Cluster,
            parent_columns=("site",),
            columns=Cluster.EDITABLE_FIELDS,
            example={
                "site": "Oslo DC3",
                "name": "train-1",
                "fabric": "infiniband",
                "inter_node_bandwidth_gbps_per_card": "400",
                "commissioned_on": "2025-06-01",
                "capital_cost_per_card": "35000",
                "amortization_years": "5",
            },
        ),
        ImportKind(
            slug="pools",
            label="Pools",
            model=Pool,
            parent_columns=("site", "cluster"),
            columns=("site", "cluster", "name", "purpose", "planned_utilization", "model_name")
            + ("assumptions", "notes"),
            example={
                "site": "Oslo DC3",
                "cluster": "train-1",
                "name": "h100-training",
                "purpose": "training",
                "planned_utilization": "0.7",
            },
        ),
        ImportKind(
            slug="node-groups",
            label="Node groups",
            model=NodeGroup,
            parent_columns=("site", "cluster", "pool"),
            columns=(
                "site",
                "cluster",
                "pool",
                "name",
                "accelerator",
                "node_count",
                "cards_per_node",
                "mfu",
            ),
            example={
                "site": "Oslo DC3",
                "cluster": "train-1",
                "pool": "h100-training",
                "name": "h100-nodes",
                "accelerator": "H100 SXM5 80GB",
                "node_count": "64",
                "cards_per_node": "8",
            },
        ),
        ImportKind(
            slug="accelerators",
            label="Card catalog (accelerator models)",
            model=AcceleratorModel,
            columns=AcceleratorModel.EDITABLE_FIELDS,
            example={
                "vendor": "Example Corp",
                "name": "XPU-1 96GB",
                "dense_bf16_tflops": "800",
                "memory_gb": "96",
                "memory_bandwidth_tbs": "3.2",
                "tdp_w": "700",
                "confidence": "user",
            },
        ),
    ]
}


def get_kind(slug: str) -> ImportKind:
    try:
        return KINDS[slug]
    except KeyError:
        raise ImportFileError(f"Unknown import type {slug!r}.") from None
