from django.apps import AppConfig


class ReportsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "reports"
    verbose_name = "Scheduled reports"

    def ready(self) -> None:
        from reports.jobs import register_jobs

        register_jobs()
