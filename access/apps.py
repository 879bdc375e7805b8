from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccessConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "access"
    verbose_name = "Access and roles"

    def ready(self) -> None:
        from access.services import grant_role_permissions

        # Model permissions exist only after post_migrate, so the grant runs there too.
        post_migrate.connect(grant_role_permissions, dispatch_uid="access.grant_role_permissions")
