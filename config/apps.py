"""The project package as a Django app: it holds the worker's own bookkeeping (the task
delivery ledger of config.quarantine)."""

from django.apps import AppConfig


class ProjectConfig(AppConfig):
    name = "config"
    label = "config"
    verbose_name = "Workers"
    default_auto_field = "django.db.models.BigAutoField"
