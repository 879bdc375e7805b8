"""A small client of the Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``).

Requests go through core.outbound (the address policy, same-origin redirects only, answers
read in chunks up to FLEETWISE_OUTBOUND_MAX_RESPONSE_BYTES). Bounded: a query answering more
than ``max_series`` series, or asking more than Prometheus' own 11,000 points per series, is
refused. Connection errors are retried with back-off; what remains is a
:class:`PrometheusError` naming the URL (without credentials) and a fixed description: the
texts Prometheus answers go to the log, never to the fetch a viewer reads.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
from django.conf import settings

from core.outbound import OutboundClient, OutboundError, OutboundPolicy, without_credentials

logger = logging.getLogger(__name__)

# Prometheus refuses range queries above 11,000 points per series.
MAX_POINTS_PER_SERIES = 11_000
MAX_SERIES = 50_000  # GPUs (or hosts) of one cluster answered by one query
# Prometheus' own error types (api/v1): shown by name; its error text is logged only.
ERROR_TYPES = frozenset(
    {"bad_data", "timeout", "canceled", "execution", "internal", "unavailable", "not_found"}
)


class PrometheusError(Exception):
    """Prometheus unreachable, or it refused or failed a query (the message says which)."""


class PrometheusClient:
    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout_s: float = 30,
        retries: int = 3,
        max_series: int = MAX_SERIES,
        policy: OutboundPolicy | None = None,
        max_response_bytes: int | None = None,
    ):
        self.url = without_credentials(url.rstrip("/"))
        self.max_series = max_series
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = OutboundClient(
            url, headers=headers, timeout_s=timeout_s, retries=retries, policy=policy,
            max_response_bytes=max_response_bytes or settings.FLEETWISE_OUTBOUND_MAX_RESPONSE_BYTES,
        )  # fmt: skip

    def close(self) -> None:
        self.http.close()

    def _get(self, path: str, params: dict) -> dict:
        try:
            # POST: long PromQL stays out of URLs and access logs.
            answer = self.http.post_form(path, params)
        except OutboundError as exc:
            raise PrometheusError(f"Prometheus at {exc}") from exc
        try:
            body = json.loads(answer.body)
        except ValueError as exc:
            raise PrometheusError(
                f"Prometheus at {self.url} answered HTTP {answer.status}, not JSON "
                "(is the URL the Prometheus base URL?)"
            ) from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            raise PrometheusError(self._refusal(answer.status, body))
        data = body.get("data")
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list):
            raise PrometheusError(f"Prometheus at {self.url} answered an unexpected shape.")
        if len(result) > self.max_series:
            raise PrometheusError(
                f"A query answered {len(result)} series, more than the limit of {self.max_series}."
            )
        return data

    def _refusal(self, status: int, body: object) -> str:
        """A fixed text with the status and Prometheus' error type; its error text is logged."""
        fields = body if isinstance(body, dict) else {}
        error_type = fields.get("errorType")
        logger.warning(
            "Prometheus at %s refused a query (HTTP %s, %s): %.300s",
            self.url, status, error_type, fields.get("error"),
        )  # fmt: skip
        kind = f", {error_type}" if error_type in ERROR_TYPES else ""
        return f"Prometheus at {self.url} refused a query (HTTP {status}{kind})."

    def instant(self, query: str, at_s: float) -> pd.DataFrame:
        """One value per series: a frame of its labels and ``value``."""
        data = self._get("/api/v1/query", {"query": query, "time": f"{at_s:.3f}"})
        rows = [{**item["metric"], "value": float(item["value"][1])} for item in data["result"]]
        return pd.DataFrame(rows)

    def range(
        self, query: str, start_s: float, end_s: float, step_s: float, labels: tuple[str, ...]
    ) -> pd.DataFrame:
        """Long frame: the ``labels`` of each series, ``t`` (epoch seconds) and ``value``;
        built from flat arrays in one go (a day of 250 hosts at 60 s is 360,000 points)."""
        if (end_s - start_s) / step_s + 1 > MAX_POINTS_PER_SERIES:
            raise PrometheusError("Range query asks for too many points; use a shorter chunk.")
        params = {"query": query, "start": start_s, "end": end_s, "step": step_s}
        result = self._get("/api/v1/query_range", params)["result"]
        # One array per series, parsed by numpy (a generator over points costs ~4× more).
        arrays = [np.array(item["values"], dtype=str).reshape(-1, 2) for item in result]
        lengths = np.array([len(a) for a in arrays], dtype=np.int64)
        pairs = np.concatenate(arrays) if arrays else np.empty((0, 2), dtype=str)
        frame = pd.DataFrame(
            {
                "t": pairs[:, 0].astype(np.float64).astype(np.int64),
                "value": pairs[:, 1].astype(float),
            }
        )
        for label in labels:
            names = np.array([item["metric"].get(label, "") for item in result], dtype=object)
            frame[label] = np.repeat(names, lengths)
        return frame

    def range_samples(
        self, query: str, start_s: float, end_s: float, step_s: float, labels: tuple[str, ...]
    ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
        """Like :meth:`range`, with each series' ``labels`` once: (a frame of one row per
        series, each point's row in it, ``t`` epoch seconds, ``value``) as flat arrays, so a
        day of 2,000 pods is not 600,000 rows of label strings."""
        if (end_s - start_s) / step_s + 1 > MAX_POINTS_PER_SERIES:
            raise PrometheusError("Range query asks for too many points; use a shorter chunk.")
        params = {"query": query, "start": start_s, "end": end_s, "step": step_s}
        result = self._get("/api/v1/query_range", params)["result"]
        lengths = np.array([len(item["values"]) for item in result], dtype=np.int64)
        times = [point[0] for item in result for point in item["values"]]
        values = [point[1] for item in result for point in item["values"]]
        frame = pd.DataFrame(
            {label: [item["metric"].get(label, "") for item in result] for label in labels},
            columns=list(labels),
        )
        return (
            frame,
            np.repeat(np.arange(len(result), dtype=np.int64), lengths),
            np.asarray(times, dtype=np.float64).astype(np.int64),
            np.asarray(values, dtype=np.float64),
        )
