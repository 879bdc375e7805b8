"""A generated kube-state-metrics history in OpenMetrics text (for promtool), with the exact
metric names and labels kube-state-metrics v2 publishes, scraped every 60 s.

Each pod has a lifetime (the series exist) and, inside it, phases; a sample at t stands for
the state at t. Samples lie 15 s after each minute (a scrape's offset), so a step ending on a
minute sees the sample of the minute before it.
"""

from __future__ import annotations

import datetime as dt
import zlib
from dataclasses import dataclass, field

START = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
START_S = int(START.timestamp())
SCRAPE_S = 60
OFFSET_S = 15
H = 3600
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
SCRAPED = 'job="kube-state-metrics",instance="10.0.0.5:8080"'


@dataclass
class Pod:
    namespace: str
    name: str
    node: str
    # container -> {resource: units}
    requests: dict[str, dict[str, float]]
    # (phase, from hour, to hour) from START, in order; the lifetime is their union
    phases: list[tuple[str, float, float]]
    labels: dict[str, str] = field(default_factory=dict)
    reason: str = ""  # kube_pod_status_reason while Failed (Evicted)

    @property
    def uid(self) -> str:
        digits = f"{zlib.crc32(self.name.encode()):012d}"
        return f"5f1c{digits[:4]}-0000-4000-8000-{digits}"

    def key(self) -> str:
        return f'namespace="{self.namespace}",pod="{self.name}",uid="{self.uid}"'


@dataclass
class NodeLabel:
    node: str
    value: str  # label_nodepool
    from_h: float
    to_h: float


def _times(from_h: float, to_h: float) -> range:
    first = START_S + int(from_h * H) + OFFSET_S
    return range(first, START_S + int(to_h * H), SCRAPE_S)


def _gauge(lines: list[str], metric: str, labels: str, value: float, times: range) -> None:
    lines.extend(f"{metric}{{{labels},{SCRAPED}}} {value:g} {t}" for t in times)


def openmetrics(pods: list[Pod], node_labels: list[NodeLabel]) -> str:
    families: dict[str, list[str]] = {}
    for pod in pods:
        life = (pod.phases[0][1], pod.phases[-1][2])
        info = (
            f'{pod.key()},host_ip="10.1.0.2",pod_ip="10.2.0.9",node="{pod.node}",'
            'created_by_kind="ReplicaSet",created_by_name="x",priority_class="",host_network="false"'
        )
        _gauge(families.setdefault("kube_pod_info", []), "kube_pod_info", info, 1, _times(*life))
        phase_lines = families.setdefault("kube_pod_status_phase", [])
        for phase in PHASES:
            for name, from_h, to_h in pod.phases:
                value = 1 if name == phase else 0
                labels = f'{pod.key()},phase="{phase}"'
                _gauge(phase_lines, "kube_pod_status_phase", labels, value, _times(from_h, to_h))
        if pod.reason:
            for name, from_h, to_h in pod.phases:
                if name == "Failed":
                    labels = f'{pod.key()},reason="{pod.reason}"'
                    lines = families.setdefault("kube_pod_status_reason", [])
                    _gauge(lines, "kube_pod_status_reason", labels, 1, _times(from_h, to_h))
        for container, resources in pod.requests.items():
            for resource, units in resources.items():
                unit = "core" if resource == "cpu" else "integer"
                labels = (
                    f'{pod.key()},container="{container}",node="{pod.node}",'
                    f'resource="{resource}",unit="{unit}"'
                )
                lines = families.setdefault("kube_pod_container_resource_requests", [])
                _gauge(lines, "kube_pod_container_resource_requests", labels, units, _times(*life))
        if pod.labels:
            text = ",".join(f'label_{k}="{v}"' for k, v in pod.labels.items())
            lines = families.setdefault("kube_pod_labels", [])
            _gauge(lines, "kube_pod_labels", f"{pod.key()},{text}", 1, _times(*life))
    for label in node_labels:
        labels = f'node="{label.node}",label_nodepool="{label.value}"'
        lines = families.setdefault("kube_node_labels", [])
        _gauge(lines, "kube_node_labels", labels, 1, _times(label.from_h, label.to_h))
    out: list[str] = []
    for metric, lines in families.items():
        out.append(f"# TYPE {metric} gauge")
        out.extend(lines)
    out.append("# EOF")
    return "\n".join(out) + "\n"
