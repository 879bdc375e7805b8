"""50 users over the dashboards and the API (run by benchmarks/load/run.py).

Every user holds a session made by the runner (a viewer, like most readers of the app) and
an API token; the runner writes them, the analysis and plan ids to a JSON file named by
FLEETWISE_LOAD_FIXTURE. Users pick a page by weight and think 1-3 s between requests
(FLEETWISE_LOAD_THINK_S="0" for closed-loop saturation). Requests carry X-Forwarded-Proto:
https as the reverse proxy would (production settings: secure cookies, SSL redirect).
Only the HTML and JSON are fetched, not static files (whitenoise serves those from memory).
"""

from __future__ import annotations

import itertools
import json
import os
import threading

from locust import HttpUser, between, constant

FIXTURE = json.loads(open(os.environ["FLEETWISE_LOAD_FIXTURE"]).read())  # noqa: SIM115
THINK_S = os.environ.get("FLEETWISE_LOAD_THINK_S", "1-3")
_accounts = itertools.cycle(FIXTURE["users"])
_lock = threading.Lock()


def _think():
    if THINK_S == "0":
        return constant(0)
    low, high = (float(x) for x in THINK_S.split("-"))
    return between(low, high)


# (weight, page or api, URL, name in the statistics): what a reader opens most weighs most.
ROUTES = [
    (4, "page", "/", "/"),
    (2, "page", "/analyses/", "/analyses/"),
    (3, "page", f"/analyses/{FIXTURE['analysis']}/", "/analyses/<id>/"),
    (3, "page", "/usage/", "/usage/"),
    (1, "page", "/usage/?group_by=team&granularity=month", "/usage/?group_by=team"),
    (3, "page", "/costs/", "/costs/"),
    (2, "page", "/planner/", "/planner/"),
    (1, "page", f"/planner/{FIXTURE['plan']}/", "/planner/<id>/"),
    (1, "page", "/inventory/pools/", "/inventory/pools/"),
    (2, "api", "/api/v1/pools/", "/api/v1/pools/"),
    (1, "api", "/api/v1/clusters/", "/api/v1/clusters/"),
    (2, "api", "/api/v1/analyses/", "/api/v1/analyses/"),
    (2, "api", "/api/v1/usage-records/?page_size=50", "/api/v1/usage-records/"),
    (1, "api", "/api/v1/import-jobs/", "/api/v1/import-jobs/"),
    (1, "api", "/api/v1/plans/", "/api/v1/plans/"),
]


def _visit(kind: str, url: str, name: str):
    def visit(user) -> None:
        user.fetch(kind, url, name)

    visit.__name__ = f"{kind} {name}"
    return visit


class FleetUser(HttpUser):
    wait_time = _think()
    tasks = [visit for weight, *route in ROUTES for visit in [_visit(*route)] * weight]

    def on_start(self) -> None:
        with _lock:
            account = next(_accounts)
        self.page_headers = {
            "X-Forwarded-Proto": "https",
            "Cookie": f"sessionid={account['session']}",
        }
        self.api_headers = {
            "X-Forwarded-Proto": "https",
            "Authorization": f"Token {account['token']}",
            "Accept": "application/json",
        }

    def fetch(self, kind: str, url: str, name: str) -> None:
        headers = self.api_headers if kind == "api" else self.page_headers
        with self.client.get(
            url, headers=headers, name=name, catch_response=True, allow_redirects=False
        ) as response:
            if response.status_code != 200:
                response.failure(f"status {response.status_code}")
