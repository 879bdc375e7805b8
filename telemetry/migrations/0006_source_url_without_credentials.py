"""Credentials out of stored Prometheus URLs (`http://user:password@host` becomes
`http://host`) and out of the fetch errors that quoted them.

Since this release a URL with credentials is refused (the bearer token field is encrypted);
one saved before stayed in clear in the database. Its credentials are dropped, not moved:
only a bearer token is supported, so such a source needs its token entered (its fetches
answer HTTP 401 until then).
"""

import re
from urllib.parse import urlsplit, urlunsplit

from django.db import migrations


def _without_credentials(url):
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/\s?#@\"']+(?=@)", re.I)


def drop_credentials(apps, schema_editor):
    PrometheusSource = apps.get_model("telemetry", "PrometheusSource")
    for source in PrometheusSource.objects.filter(url__contains="@"):
        cleaned = _without_credentials(source.url)
        if cleaned != source.url:
            PrometheusSource.objects.filter(pk=source.pk).update(url=cleaned)
    TelemetryFetch = apps.get_model("telemetry", "TelemetryFetch")
    for pk, error in TelemetryFetch.objects.filter(error__contains="@").values_list("pk", "error"):
        cleaned = _USERINFO.sub(r"\g<1>[redacted]", error)
        if cleaned != error:
            TelemetryFetch.objects.filter(pk=pk).update(error=cleaned)


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0005_card_hours_spelling")]

    operations = [migrations.RunPython(drop_credentials, migrations.RunPython.noop)]
