from django.apps import AppConfig


class PlannerConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "planner"
    verbose_name = "Efficiency engine and capacity planner"

    def ready(self) -> None:
        from planner import signals
        from planner.jobs import register_jobs

        signals.connect()
        register_jobs()
