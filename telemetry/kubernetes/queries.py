"""The PromQL sent to a Kubernetes source's Prometheus, and the GPU resources it counts.

kube-state-metrics (v2) writes an extended resource with its name sanitized (``nvidia.com/gpu``
→ ``resource="nvidia_com_gpu"``, ``nvidia.com/mig-1g.10gb`` → ``nvidia_com_mig_1g_10gb``).
Only these names, validated label names and a validated label selector reach a query.
"""

from __future__ import annotations

import re

from accounting.parsing.aliases import MIG_COMPUTE_SLICES_PER_CARD

# Whole cards, by vendor (the device plugins' resource names, as kube-state-metrics writes them).
WHOLE_CARD_RESOURCES = ("nvidia_com_gpu", "amd_com_gpu", "habana_ai_gaudi")
MIG_RESOURCE = re.compile(r"^nvidia_com_mig_(?P<slices>[1-7])g_(?P<memory_gb>\d+)gb(?:_me)?$")
RESOURCE_REGEX = "|".join([*WHOLE_CARD_RESOURCES, r"nvidia_com_mig_[1-7]g_[0-9]+gb(_me)?"])
POD_KEY = ("namespace", "pod", "uid")


def card_fraction(resource: str) -> float | None:
    """Cards one unit of ``resource`` holds: 1 for a whole card, g/7 for a MIG slice (as
    accounting.parsing.aliases counts Slurm's MIG gres); None for anything else."""
    if resource in WHOLE_CARD_RESOURCES:
        return 1.0
    mig = MIG_RESOURCE.match(resource)
    if mig is None:
        return None
    return int(mig["slices"]) / MIG_COMPUTE_SLICES_PER_CARD


def mig_profile(resource: str) -> str:
    """``nvidia_com_mig_1g_10gb`` → ``1g.10gb`` (Slurm's spelling); "" for whole cards."""
    mig = MIG_RESOURCE.match(resource)
    return f"{mig['slices']}g.{mig['memory_gb']}gb" if mig else ""


def _series(metric: str, matchers: str, selector: str) -> str:
    inner = ", ".join(part for part in (matchers, selector) if part)
    return f"{metric}{{{inner}}}"


def _latest(metric: str, matchers: str, selector: str, window_s: int) -> str:
    # The latest sample of the last scrape interval: a pod gone from kube-state-metrics stops
    # counting within one scrape, whether or not Prometheus wrote a staleness marker.
    return f"last_over_time({_series(metric, matchers, selector)}[{int(window_s)}s])"


def allocation_query(selector: str, scrape_s: int) -> str:
    """Per running pod, node and GPU resource: the units its containers request."""
    pod = ", ".join(POD_KEY)
    requests = _latest(
        "kube_pod_container_resource_requests", f'resource=~"{RESOURCE_REGEX}"', selector, scrape_s
    )
    running = _latest("kube_pod_status_phase", 'phase="Running"', selector, scrape_s)
    info = _latest("kube_pod_info", 'node!=""', selector, scrape_s)
    return (
        f"sum by ({pod}, resource) ({requests})"
        f" * on ({pod}) group_left() (max by ({pod}) ({running}) == 1)"
        f" * on ({pod}) group_left(node) max by ({pod}, node) ({info})"
    )


def node_label_query(label: str, selector: str, scrape_s: int) -> str:
    """Per node: the value of its pool label (kube_node_labels, value 1)."""
    return f"max by (node, {label}) ({_latest('kube_node_labels', '', selector, scrape_s)})"


def pod_label_query(label: str, selector: str, window_s: int) -> str:
    """Per GPU pod seen in the last ``window_s`` (an instant query at the day's end, one value
    per pod instead of one per step): the value of its team label (kube_pod_labels)."""
    pod = ", ".join(POD_KEY)
    window = f"[{int(window_s)}s]"
    labels = f"max_over_time({_series('kube_pod_labels', '', selector)}{window})"
    gpu = f'resource=~"{RESOURCE_REGEX}"'
    requests = (
        f"max_over_time({_series('kube_pod_container_resource_requests', gpu, selector)}{window})"
    )
    return f"max by ({pod}, {label}) ({labels}) and on ({pod}) {requests}"
