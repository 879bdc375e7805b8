"""A small client of slurmrestd's accounting endpoint (``GET /slurmdb/<version>/jobs``).

Requests go through core.outbound (the address policy, same-origin redirects only, answers
read in chunks up to ``FLEETWISE_OUTBOUND_MAX_RESPONSE_BYTES``). The window is sent as
``start_time=now-<seconds>&end_time=now``: Slurm's own time parser reads it on slurmrestd's
clock, so neither side's time zone matters (22.05 refuses epoch seconds, and reads dates in
its local zone). A failure is a :class:`SlurmrestdError` with a fixed description naming the
URL (without credentials); the texts slurmrestd answers go to the log, never to the page.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from accounting.slurmrestd.cursor import Window
from core.outbound import OutboundClient, OutboundError, OutboundPolicy, without_credentials

logger = logging.getLogger(__name__)

# Slurm's error numbers worth a hint (slurm_errno.h); others are shown by number only.
KNOWN_ERRORS = {
    1007: "authentication failed (has the token expired, or is it another user's?)",
    9000: "it did not understand the query (is the API version right?)",
}
OVERSIZE_HINT = (
    " A pull reads from the cursor to now: import older history from sacct files and set "
    "the cursor after it, or lower the overlap."
)


class SlurmrestdError(Exception):
    """slurmrestd unreachable, or it refused or failed the query (the message says which)."""


@dataclass(frozen=True)
class JobsAnswer:
    """One answer: its bytes (for the usage parser) and every job end time it holds."""

    body: bytes
    end_times: list[dt.datetime]
    jobs: int


def _number(value: Any) -> int | None:
    """An epoch time as v0.0.38 writes it (an int) or v0.0.40+ (``{"set", "number"}``)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def end_times(jobs: list[Any]) -> list[dt.datetime]:
    """The end time of every job that ended (any job, with GPUs or not: the cursor)."""
    found = []
    for job in jobs:
        times = job.get("time") if isinstance(job, dict) else None
        end = _number(times.get("end")) if isinstance(times, dict) else None
        if end is not None and end > 0:
            found.append(dt.datetime.fromtimestamp(end, dt.UTC))
    return found


class SlurmrestdClient:
    def __init__(
        self,
        url: str,
        *,
        api_version: str,
        user_name: str,
        token: str,
        timeout_s: float = 60,
        retries: int = 2,
        policy: OutboundPolicy | None = None,
        max_response_bytes: int | None = None,
    ) -> None:
        self.url = without_credentials(url.rstrip("/"))
        self.path = f"/slurmdb/{api_version}/jobs"
        headers = {"X-SLURM-USER-NAME": user_name, "X-SLURM-USER-TOKEN": token}
        self.http = OutboundClient(
            url, headers=headers, timeout_s=timeout_s, retries=retries, policy=policy,
            max_response_bytes=max_response_bytes or settings.FLEETWISE_OUTBOUND_MAX_RESPONSE_BYTES,
        )  # fmt: skip

    def close(self) -> None:
        self.http.close()

    def jobs(self, window: Window, slurm_cluster: str = "") -> JobsAnswer:
        """The jobs slurmdbd holds that were pending, running or ended in the window."""
        params = {"start_time": f"now-{window.start_age_s()}", "end_time": "now"}
        if slurm_cluster:
            params["cluster"] = slurm_cluster
        try:
            answer = self.http.get(self.path, params)
        except OutboundError as exc:
            hint = OVERSIZE_HINT if "allowed for one answer" in exc.description else ""
            raise SlurmrestdError(f"slurmrestd at {exc}{hint}") from exc
        payload = self._payload(answer.status, answer.body)
        jobs = payload["jobs"]
        return JobsAnswer(answer.body, end_times(jobs), len(jobs))

    def _payload(self, status: int, body: bytes) -> dict[str, Any]:
        if status in (401, 403):
            raise SlurmrestdError(
                f"slurmrestd at {self.url} refused the credentials (HTTP {status}): check the "
                "user name and that the token has not expired."
            )
        if status == 404:
            raise SlurmrestdError(
                f"slurmrestd at {self.url} has no {self.path} (HTTP 404): is the API version "
                "right, and is its openapi/db plugin loaded (slurmrestd -s)?"
            )
        try:
            payload = json.loads(body)
        except ValueError as exc:
            if status != 200:
                raise SlurmrestdError(self._refusal(status, None)) from exc
            raise SlurmrestdError(
                f"slurmrestd at {self.url} answered HTTP {status}, not JSON "
                "(is the URL the slurmrestd base URL?)"
            ) from exc
        if not isinstance(payload, dict):
            raise SlurmrestdError(f"slurmrestd at {self.url} answered an unexpected shape.")
        errors = payload.get("errors")
        if status != 200 or errors:
            raise SlurmrestdError(self._refusal(status, errors))
        if not isinstance(payload.get("jobs"), list):
            raise SlurmrestdError(f"slurmrestd at {self.url} answered an unexpected shape.")
        return payload

    def _refusal(self, status: int, errors: object) -> str:
        """A fixed text with the status and Slurm's error number; Slurm's texts are logged."""
        first = errors[0] if isinstance(errors, list) and errors else {}
        first = first if isinstance(first, dict) else {}
        number = first.get("error_number") or first.get("error_code")
        logger.warning(
            "slurmrestd at %s refused the jobs query (HTTP %s, error %s): %.300s",
            self.url, status, number, first.get("error") or first.get("description"),
        )  # fmt: skip
        known = KNOWN_ERRORS.get(number) if isinstance(number, int) else None
        detail = f", Slurm error {number}" if isinstance(number, int) else ""
        why = f": {known}" if known else "."
        return f"slurmrestd at {self.url} refused the jobs query (HTTP {status}{detail}){why}"
