"""The accelerator catalog fixture the project owns (figures from the shared spec)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

CATALOG_CSV = Path(__file__).resolve().parent / "fixtures" / "accelerators.csv"


def _optional_float(text: str) -> float | None:
    return float(text) if text.strip() else None


def _optional_int(text: str) -> int | None:
    return int(text) if text.strip() else None


def catalog_rows(path: Path = CATALOG_CSV) -> list[dict[str, Any]]:
    """The fixture's rows as AcceleratorModel field values."""
    with path.open(newline="", encoding="utf-8") as handle:
        return [
            {
                "vendor": row["vendor"],
                "name": row["model"],
                "dense_bf16_tflops": float(row["dense_bf16_tflops"]),
                "dense_fp8_tflops": _optional_float(row["dense_fp8_tflops"]),
                "dense_int8_tops": _optional_float(row.get("dense_int8_tops") or ""),
                "dense_fp4_tflops": _optional_float(row.get("dense_fp4_tflops") or ""),
                "memory_gb": float(row["memory_gb"]),
                "memory_bandwidth_tbs": float(row["memory_bandwidth_tbs"]),
                "tdp_w": float(row["tdp_w"]),
                "intra_node_interconnect_gbs": float(row["intra_node_interconnect_gbs"]),
                "nvlink_domain_cards": _optional_int(row.get("nvlink_domain_cards") or ""),
                "default_training_mfu": float(row["default_training_mfu"]),
                "list_price": _optional_float(row["list_price_usd"]),
                "rental_price_per_card_hour": _optional_float(
                    row["rental_price_per_card_hour_usd"]
                ),
                "currency": "USD",
                "confidence": row["confidence"],
                "source": row["note"],
            }
            for row in csv.DictReader(handle)
        ]


def load_catalog(accelerator_model, overwrite: bool = False) -> int:
    """Create missing catalog entries (or refresh all with `overwrite`); returns rows written.

    Takes the model class so a data migration can pass its historical model.
    """
    written = 0
    # An older migration's historical model lacks the columns added after it.
    known = {field.name for field in accelerator_model._meta.get_fields()}
    for row in catalog_rows():
        values = {key: value for key, value in row.items() if key in known}
        name = values.pop("name")
        if overwrite:
            accelerator_model.objects.update_or_create(name=name, defaults=values)
            written += 1
        else:
            _, created = accelerator_model.objects.get_or_create(name=name, defaults=values)
            written += int(created)
    return written
