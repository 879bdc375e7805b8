from django.apps import AppConfig


class AlertsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "alerts"
    verbose_name = "Alerts and budgets"

    def ready(self) -> None:
        from alerts import signals  # noqa: F401  (evaluate after each usage import and analysis)
