"""A small client of the Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``).

Bounded: a query answering more than ``max_series`` series, or asking more than Prometheus'
own 11,000 points per series, is refused before anything large is held. Connection errors
are retried with back-off; what remains is a :class:`PrometheusError` naming the URL.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

# Prometheus refuses range queries above 11,000 points per series.
MAX_POINTS_PER_SERIES = 11_000
MAX_SERIES = 50_000  # GPUs (or hosts) of one cluster answered by one query
MAX_RESPONSE_BYTES = 512 * 1024 * 1024


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
    ):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_series = max_series
        self.session = requests.Session()
        retry = Retry(
            total=retries,
            connect=retries,
            read=retries,
            backoff_factor=0.5,
            status_forcelist=(502, 503, 504),
            allowed_methods=("GET", "POST"),
        )
        self.session.mount("http://", HTTPAdapter(max_retries=retry))
        self.session.mount("https://", HTTPAdapter(max_retries=retry))
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def close(self) -> None:
        self.session.close()

    def _get(self, path: str, params: dict) -> dict:
        try:
            # POST: long PromQL stays out of URLs and access logs.
            response = self.session.post(f"{self.url}{path}", data=params, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise PrometheusError(
                f"Prometheus at {self.url} is unreachable: {type(exc).__name__}"
            ) from exc
        if len(response.content) > MAX_RESPONSE_BYTES:
            raise PrometheusError("Prometheus answered more than the allowed response size.")
        try:
            body = response.json()
        except ValueError as exc:
            raise PrometheusError(
                f"Prometheus at {self.url} answered HTTP {response.status_code}, not JSON "
                "(is the URL the Prometheus base URL?)"
            ) from exc
        if body.get("status") != "success":
            raise PrometheusError(
                f"Prometheus refused a query: {body.get('errorType', '')} {body.get('error', '')}"
            )
        result = body["data"]["result"]
        if len(result) > self.max_series:
            raise PrometheusError(
                f"A query answered {len(result)} series, more than the limit of {self.max_series}."
            )
        return body["data"]

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
