from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "telemetry"
    verbose_name = "GPU telemetry (DCGM via Prometheus)"

    def ready(self) -> None:
        from telemetry.jobs import register_jobs

        register_jobs()
