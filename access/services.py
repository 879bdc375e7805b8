"""Keep the role groups' Django model permissions in line with the roles (for the admin site)."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

from access.roles import ADMIN, PLANNER, VIEWER

# Apps whose models the roles act on: viewers see them all in the admin site.
DOMAIN_APPS = ("inventory", "planner", "accounting", "reports", "exports")
# What planners change; report schedules and export tokens are administered (issue #9).
PLANNER_EDIT_APPS = ("inventory", "planner", "accounting")
ADMIN_EXTRA_APPS = (
    "access",
    "auth",
    "authtoken",
    "django_celery_beat",
)


def grant_role_permissions(sender=None, **kwargs) -> None:
    domain = Permission.objects.filter(content_type__app_label__in=DOMAIN_APPS)
    viewing = domain.filter(codename__startswith="view_")
    grants = {
        VIEWER: viewing,
        PLANNER: viewing | domain.filter(content_type__app_label__in=PLANNER_EDIT_APPS),
        ADMIN: Permission.objects.filter(
            content_type__app_label__in=DOMAIN_APPS + ADMIN_EXTRA_APPS
        ),
    }
    for name, permissions in grants.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*permissions)


def mailing_list_account(address: str, note: str = "a mailing list"):
    """The account of a mailing-list address, made if missing: a viewer of every team who
    cannot log in, so reports and alerts may go to the list (`access.recipients`)."""
    from django.contrib.auth import get_user_model

    from access.models import FleetWideAccess

    users = get_user_model().objects
    account = users.filter(email__iexact=address, is_active=True).first()
    if account is not None:
        return account
    username = address.split("@")[0][:130] + "-list"
    account, _ = users.get_or_create(username=username, defaults={"email": address})
    account.set_unusable_password()
    account.save()
    account.groups.add(Group.objects.get(name=VIEWER))
    FleetWideAccess.objects.get_or_create(user=account, defaults={"note": note})
    return account
