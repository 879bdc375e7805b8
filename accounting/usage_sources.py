"""Usage sources that live above accounting (telemetry's Kubernetes allocation): two hooks
they fill in their ``AppConfig.ready``, since accounting may not import them.

* **upload checks**: ``check(cluster) -> reason | None``; a Slurm usage upload into a cluster
  some check refuses is a 400 naming the cluster and the rule (`services.create_import_job`).
* **source names**: ``name(cluster_ids) -> {cluster_id: "Kubernetes"}``; a cluster none names
  takes its usage from Slurm. The analyses' utilization reason says which
  (`accounting.selectors.measured.apply_measured_usage`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from inventory.models import Cluster

UploadCheck = Callable[[Cluster], str | None]
SourceNames = Callable[[Sequence[int]], dict[int, str]]
SLURM = "Slurm"

_UPLOAD_CHECKS: dict[str, UploadCheck] = {}
_SOURCE_NAMES: dict[str, SourceNames] = {}


def register_upload_check(name: str, check: UploadCheck) -> None:
    """Add (or replace: ``ready`` may run twice in tests) the check called ``name``."""
    _UPLOAD_CHECKS[name] = check


def register_source_names(name: str, names: SourceNames) -> None:
    _SOURCE_NAMES[name] = names


def upload_refusal(cluster: Cluster) -> str | None:
    """Why a Slurm usage upload into ``cluster`` is refused (the first check that says so)."""
    for check in _UPLOAD_CHECKS.values():
        if reason := check(cluster):
            return reason
    return None


def source_names(cluster_ids: Sequence[int]) -> dict[int, str]:
    """Each cluster's usage source: "Slurm" unless a registered source names another."""
    found = {int(pk): SLURM for pk in cluster_ids}
    for names in _SOURCE_NAMES.values():
        found.update({pk: name for pk, name in names(list(found)).items() if pk in found})
    return found
