from django.apps import AppConfig


class FrontendConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "frontend"
    verbose_name = "Browser app"

    def ready(self) -> None:
        # Charts register here, once per process (web and worker), not as a side effect of
        # whichever module happens to import a dashboard first.
        from frontend.dashboards import (  # noqa: F401
            analyses,
            costs,
            inference,
            planner,
            usage,
        )
