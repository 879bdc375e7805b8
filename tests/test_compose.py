"""docker-compose.yml is valid (Debian's docker-compose, no engine needed) and complete, and
publishes gunicorn on loopback only; Docker restarts web, worker and beat when they exit."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_ENV = {"DJANGO_SECRET_KEY": "test-secret", "POSTGRES_PASSWORD": "test-password"}


def docker_compose() -> str:
    binary = shutil.which("docker-compose")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose is missing; .ci/run installs it")
        pytest.skip("docker-compose not installed (apt-get install docker-compose)")
    return binary


def resolved_config() -> dict:
    result = subprocess.run(
        [docker_compose(), "config"],
        cwd=ROOT,
        env={**os.environ, **COMPOSE_ENV},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_compose_config_is_valid():
    result = subprocess.run(
        [docker_compose(), "config", "-q"],
        cwd=ROOT,
        env={**os.environ, **COMPOSE_ENV},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_compose_refuses_to_start_without_secrets():
    env = {k: v for k, v in os.environ.items() if k not in COMPOSE_ENV}
    result = subprocess.run(
        [docker_compose(), "config", "-q"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "POSTGRES_PASSWORD" in result.stderr or "DJANGO_SECRET_KEY" in result.stderr


def test_compose_has_the_services_and_wiring():
    services = resolved_config()["services"]
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)
    assert any(
        v.startswith("postgres-data") or "postgres-data" in str(v)
        for v in services["postgres"]["volumes"]
    )
    for name in ("postgres", "redis", "web", "worker"):
        assert "healthcheck" in services[name], name
    for name in ("web", "worker", "beat"):
        service = services[name]
        assert service["build"]["dockerfile"].startswith("platform/"), name
        depends = service["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy"
        assert depends["redis"]["condition"] == "service_healthy"
        environment = service["environment"]
        assert environment["DATABASE_URL"].startswith("postgres://")
        assert environment["CELERY_BROKER_URL"].startswith("redis://")
        assert environment["DJANGO_SETTINGS_MODULE"] == "config.settings.production"
    assert "gunicorn" in " ".join(services["web"]["command"])
    assert "worker" in services["worker"]["command"]
    assert "beat" in services["beat"]["command"]
    assert (ROOT / "platform" / "Dockerfile").exists()


def test_compose_publishes_the_web_port_on_loopback_only():
    services = resolved_config()["services"]
    published = services["web"]["ports"]
    assert published
    for port in published:
        host_ip = port.get("host_ip") if isinstance(port, dict) else port.split(":")[0]
        assert host_ip == "127.0.0.1", port
    assert all("ports" not in service for name, service in services.items() if name != "web")


def test_compose_restarts_a_process_that_exits():
    services = resolved_config()["services"]
    for name in ("postgres", "redis", "web", "worker", "beat"):
        assert services[name]["restart"] == "unless-stopped", name
    assert services["migrate"]["restart"] == "no"  # a one-off: done once it succeeded


def test_compose_worker_health_needs_a_consuming_worker():
    check = " ".join(resolved_config()["services"]["worker"]["healthcheck"]["test"])
    assert "inspect ping" in check and "manage.py worker_health" in check
