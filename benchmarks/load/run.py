"""Load test: gunicorn + PostgreSQL + Redis, the demo fleet plus a year of usage, 50 users.

1. Builds (or reuses) the database like benchmarks/pages.py: the demo fleet and 300,000 usage
   records of 2024 through the real import, rollups refreshed, the dashboards' default views
   precomputed (what the worker does after a refresh).
2. Has a worker (a `celery worker` subprocess on Redis) compute one fleet analysis and one
   capacity plan, so their pages show real results; the worker then stops.
3. Creates 50 viewers with a session each (force_login: the load is on pages, not on password
   hashing) and an API token each.
4. Starts gunicorn with platform/gunicorn.conf.py and the production settings (whitenoise,
   DEBUG off, persistent connections), static files collected first.
5. Runs locust headless (benchmarks/load/locustfile.py): the users over the dashboards and the
   API lists for the given time, then prints requests/s, p50/p95/p99 and errors, overall and
   per endpoint, with the load average before and after.

    .venv/bin/python benchmarks/load/run.py
    .venv/bin/python benchmarks/load/run.py --users 50 --duration 60 --think 1-3
    .venv/bin/python benchmarks/load/run.py --think 0       # closed loop: the saturation point
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
VENV_BIN = Path(sys.executable).parent
OUT_DIR = REPO_ROOT / "var" / "load"
P95_TARGET_MS = 300

from benchmarks import common, pages  # noqa: E402  (after sys.path)


def loadavg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


def prepare(args, env: dict[str, str]) -> dict:
    """Data, one analysis and one plan (computed by a real worker), users, sessions, tokens."""
    if args.database_url.startswith("postgres"):
        common.ensure_postgres_database(args.database_url)
    os.environ["CELERY_BROKER_URL"] = args.redis_url
    # Sessions are signed with the key gunicorn will use (a session's auth hash depends on it).
    os.environ["DJANGO_SECRET_KEY"] = env["DJANGO_SECRET_KEY"]
    common.setup_django(args.database_url)
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from access.tokens import issue_token
    from accounting.rollups import run_refresh_hooks
    from inventory.models import Pool, Site
    from planner import plans, services
    from planner.models import Analysis, Plan

    began = time.perf_counter()
    timings = pages.build(args.seed)
    run_refresh_hooks(None)  # the dashboards' default views, as after a rollup refresh
    print(f"data ready in {time.perf_counter() - began:.0f} s {timings}")

    owner, _ = User.objects.get_or_create(username="load-planner")
    owner.groups.add(Group.objects.get(name="planner"))
    analysis = Analysis.objects.filter(scope="fleet", status="succeeded").first()
    plan = Plan.objects.filter(status="succeeded").first()
    if analysis is None or plan is None:
        worker = subprocess.Popen(
            [str(VENV_BIN / "celery"), "-A", "config", "worker", "--pool", "solo"],
            cwd=REPO_ROOT,
            env={**env, "DJANGO_SETTINGS_MODULE": "config.settings.local"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            if analysis is None:
                analysis = services.start_analysis(scope="fleet")
            if plan is None:
                site = Site.objects.get(name="Frankfurt DC1 (air)")
                plan = plans.create_plan(
                    owner=owner,
                    name="GPT-3 175B on A100/H100",
                    workload={"model_params": 175e9, "tokens": 300e9},
                    options_spec={
                        "accelerators": ["A100 SXM4 80GB", "H100 SXM5 80GB"],
                        "cards": [512, 1024, 2048],
                        "sites": [site.pk],
                        "pools": [Pool.objects.get(name="mixed-a100-h100").pk],
                    },
                )
            wait_for(
                lambda: (
                    Analysis.objects.filter(pk=analysis.pk, status="succeeded").exists()
                    and Plan.objects.filter(pk=plan.pk, status="succeeded").exists()
                ),
                300,
                "the worker to compute the analysis and the plan",
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)

    from access.models import FleetWideAccess

    viewer_group = Group.objects.get(name="viewer")
    accounts = []
    for number in range(1, args.users + 1):
        user, _ = User.objects.get_or_create(username=f"load-viewer-{number:02d}")
        user.groups.add(viewer_group)
        FleetWideAccess.objects.get_or_create(user=user)  # every team: scoping fails closed
        client = Client()
        client.force_login(user)
        _, key = issue_token(user, name="load test")
        accounts.append({"session": client.cookies["sessionid"].value, "token": key})
    return {"analysis": analysis.pk, "plan": plan.pk, "users": accounts}


def warm_up(base: str, fixture: dict, rounds: int) -> None:
    """Each URL a few times before measuring: a fresh gunicorn worker imports pandas and
    plotly and opens its database connection on its first requests."""
    account = fixture["users"][0]
    urls = [
        "/",
        "/analyses/",
        f"/analyses/{fixture['analysis']}/",
        "/usage/",
        "/costs/",
        "/planner/",
        f"/planner/{fixture['plan']}/",
        "/inventory/pools/",
        "/api/v1/pools/",
        "/api/v1/usage-records/?page_size=50",
    ]
    headers = {"X-Forwarded-Proto": "https", "Cookie": f"sessionid={account['session']}"}
    for _ in range(rounds):
        for url in urls:
            request = urllib.request.Request(f"{base}{url}", headers=headers)  # noqa: S310
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310  # nosec B310
                if response.status != 200:
                    raise SystemExit(f"warm-up: {url} answered {response.status}")


def summarise(stats_csv: Path) -> tuple[list[dict], dict]:
    with stats_csv.open() as handle:
        rows = list(csv.DictReader(handle))
    total = next(row for row in rows if row["Name"] == "Aggregated")
    return [row for row in rows if row["Name"] != "Aggregated"], total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/fleetwise_load"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=int, default=60, help="seconds")
    parser.add_argument("--think", default="1-3", help='seconds between requests, or "0"')
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--gunicorn-workers", type=int, default=None, help="default: config")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--warm-up", type=int, default=5, help="rounds over the URLs first")
    args = parser.parse_args()
    OUT_DIR.mkdir(parents=True, exist_ok=True)

    env = {
        **os.environ,
        "DATABASE_URL": args.database_url,
        "CELERY_BROKER_URL": args.redis_url,
        "DJANGO_SECRET_KEY": "load-benchmark-only-not-a-secret",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_LOG_LEVEL": "WARNING",
    }
    fixture = prepare(args, env)
    fixture_path = OUT_DIR / "fixture.json"
    fixture_path.write_text(json.dumps(fixture))

    web_env = {
        **env,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "GUNICORN_BIND": f"127.0.0.1:{args.port}",
    }
    if args.gunicorn_workers:
        web_env["GUNICORN_WORKERS"] = str(args.gunicorn_workers)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=REPO_ROOT,
        env=web_env,
        check=True,
    )
    with (OUT_DIR / "gunicorn.log").open("w") as web_log:
        web = subprocess.Popen(
            [
                str(VENV_BIN / "gunicorn"),
                "--config",
                "platform/gunicorn.conf.py",
                "config.wsgi:application",
            ],
            cwd=REPO_ROOT,
            env=web_env,
            stdout=web_log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{args.port}"

    def healthy() -> bool:
        login = urllib.request.Request(  # noqa: S310  (http to our own gunicorn)
            f"{base}/accounts/login/", headers={"X-Forwarded-Proto": "https"}
        )
        try:
            with urllib.request.urlopen(login, timeout=2) as response:  # noqa: S310  # nosec B310
                return response.status == 200
        except OSError:
            return False

    try:
        wait_for(healthy, 60, "gunicorn")
        warm_up(base, fixture, rounds=args.warm_up)
        before = loadavg()
        locust = subprocess.run(
            [
                str(VENV_BIN / "locust"),
                "-f",
                str(REPO_ROOT / "benchmarks" / "load" / "locustfile.py"),
                "--headless",
                "--users",
                str(args.users),
                "--spawn-rate",
                str(args.users),
                "--run-time",
                f"{args.duration}s",
                "--host",
                base,
                "--csv",
                str(OUT_DIR / "locust"),
                "--only-summary",
                "--loglevel",
                "WARNING",
            ],
            cwd=REPO_ROOT,
            env={
                **os.environ,
                "FLEETWISE_LOAD_FIXTURE": str(fixture_path),
                "FLEETWISE_LOAD_THINK_S": args.think,
            },
            capture_output=True,
            text=True,
        )
        after = loadavg()
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=60)
    if locust.returncode not in (0, 1):  # 1: some requests failed (reported below)
        print(locust.stdout[-3000:], locust.stderr[-3000:])
        raise SystemExit(f"locust exited with {locust.returncode}")

    endpoints, total = summarise(OUT_DIR / "locust_stats.csv")
    print()
    print(
        f"{args.users} users, {args.duration} s, think {args.think} s, gunicorn "
        f"{web_env.get('GUNICORN_WORKERS', 'config default')} workers; "
        f"load average before {before}, after {after}"
    )
    print()
    print("| endpoint | requests | errors | req/s | p50 ms | p95 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|---|---|---|")
    for row in sorted(endpoints, key=lambda r: -float(r["95%"])) + [total]:
        print(
            f"| {row['Name']} | {row['Request Count']} | {row['Failure Count']} "
            f"| {float(row['Requests/s']):.1f} | {row['50%']} | {row['95%']} | {row['99%']} "
            f"| {float(row['Max Response Time']):.0f} |"
        )
    errors = int(total["Failure Count"])
    p95 = float(total["95%"])
    print()
    print(
        f"requests/s {float(total['Requests/s']):.1f}; p50 {total['50%']} ms, p95 {p95:.0f} ms, "
        f"p99 {total['99%']} ms; errors {errors}"
    )
    verdict = "met" if errors == 0 and p95 < P95_TARGET_MS else "MISSED"
    print(f"target (0 errors, p95 < {P95_TARGET_MS} ms): {verdict}")
    failures = OUT_DIR / "locust_failures.csv"
    if errors and failures.exists():
        print(failures.read_text()[:2000])


if __name__ == "__main__":
    main()
