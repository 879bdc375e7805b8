"""`/healthz/`: a public liveness check for load balancers (no login, no data, plain HTTP; an
administrator's session also sees the disk figure of core/retention/disk.py);
`/healthz/worker/`: whether some worker still consumes the queue (core/jobs/pulse.py)."""

from django.db import DatabaseError, connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from access.roles import ADMIN, has_role
from core.jobs.pulse import pulse_health
from core.retention.disk import disk_usage


@never_cache
@require_GET
def healthz(request):
    """200 when the database answers, 503 when it does not; says nothing else, except to a
    signed-in administrator: the stored files' bytes and the disk's free space as well."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        return JsonResponse({"status": "database unavailable"}, status=503)
    body: dict[str, object] = {"status": "ok"}
    if has_role(request.user, ADMIN):
        body["disk"] = disk_usage()  # core/retention/disk.py
    return JsonResponse(body)


@never_cache
@require_GET
def healthz_worker(request):
    """200 while a worker ran beat's pulse recently, else 503 with why; a separate URL, so a
    load balancer that polls /healthz/ keeps the web up while the workers are down."""
    try:
        health = pulse_health()
    except DatabaseError:
        return JsonResponse({"status": "database unavailable"}, status=503)
    body = {"status": health.status, "pulse_age_s": health.age_s}
    return JsonResponse(body, status=200 if health.ok else 503)
