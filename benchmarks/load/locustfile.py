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

from locust import HttpUser, between, constant, task

FIXTURE = json.loads(open(os.environ["FLEETWISE_LOAD_FIXTURE"]).read())  # noqa: SIM115
THINK_S = os.environ.get("FLEETWISE_LOAD_THINK_S", "1-3")
_accounts = itertools.cycle(FIXTURE["users"])
_lock = threading.Lock()


def _think():
    if THINK_S == "0":
        return constant(0)
    low, high = (float(x) for x in THINK_S.split("-"))
    return between(low, high)


class FleetUser(HttpUser):
    wait_time = _think()

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

    def page(self, url: str, name: str | None = None) -> None:
        with self.client.get(
            url,
            headers=self.page_headers,
            name=name or url,
            catch_response=True,
            allow_redirects=False,
        ) as response:
            if response.status_code != 200:
                response.failure(f"status {response.status_code}")

    def api(self, url: str, name: str | None = None) -> None:
        with self.client.get(
            url,
            headers=self.api_headers,
            name=name or url,
            catch_response=True,
            allow_redirects=False,
        ) as response:
            if response.status_code != 200:
                response.failure(f"status {response.status_code}")

    # -- dashboards (weights: what a reader opens most) --
    @task(4)
    def fleet(self) -> None:
        self.page("/")

    @task(2)
    def analyses(self) -> None:
        self.page("/analyses/")

    @task(3)
    def analysis(self) -> None:
        self.page(f"/analyses/{FIXTURE['analysis']}/", "/analyses/<id>/")

    @task(3)
    def usage(self) -> None:
        self.page("/usage/")

    @task(1)
    def usage_by_team(self) -> None:
        self.page("/usage/?group_by=team&granularity=month", "/usage/?group_by=team")

    @task(3)
    def costs(self) -> None:
        self.page("/costs/")

    @task(2)
    def planner(self) -> None:
        self.page("/planner/")

    @task(1)
    def plan(self) -> None:
        self.page(f"/planner/{FIXTURE['plan']}/", "/planner/<id>/")

    @task(1)
    def inventory(self) -> None:
        self.page("/inventory/pools/")

    # -- API lists --
    @task(2)
    def api_pools(self) -> None:
        self.api("/api/v1/pools/")

    @task(1)
    def api_clusters(self) -> None:
        self.api("/api/v1/clusters/")

    @task(2)
    def api_analyses(self) -> None:
        self.api("/api/v1/analyses/")

    @task(2)
    def api_usage_records(self) -> None:
        self.api("/api/v1/usage-records/?page_size=50", "/api/v1/usage-records/")

    @task(1)
    def api_import_jobs(self) -> None:
        self.api("/api/v1/import-jobs/")

    @task(1)
    def api_plans(self) -> None:
        self.api("/api/v1/plans/")
