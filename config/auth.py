"""Login rate limiting (django-axes): which logins count, the client address, the lockout page.

Failed logins are counted per username and client address; at AXES_FAILURE_LIMIT the pair is
locked for AXES_COOLOFF_TIME (an administrator can unlock earlier: `manage.py axes_reset`).
Failures are also summed per address over every username: at
FLEETWISE_LOGIN_ADDRESS_FAILURE_LIMIT within the cool-off the address is locked for all of
them (one password sprayed over many accounts). API tokens are not passwords and are not
limited here.
"""

from __future__ import annotations

from axes.attempts import get_cool_off_threshold
from axes.backends import AxesStandaloneBackend
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_cool_off, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import NON_FIELD_ERRORS
from django.db.models import Sum
from django.forms.utils import ErrorDict
from django.template.response import TemplateResponse


class LoginAttemptsBackend(AxesStandaloneBackend):
    """Axes' lockout check for logins over HTTP.

    authenticate() without a request (the test client's login(), scripts) is no network
    attempt, so there is nothing to limit; axes itself would refuse it with an error.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def address_failures(request) -> int:
    """Failed logins from the request's address within the cool-off, every username summed."""
    address = getattr(request, "axes_ip_address", None) or client_ip(request)
    if not address:
        return 0
    recent = AccessAttempt.objects.filter(
        ip_address=address, attempt_time__gte=get_cool_off_threshold(request)
    )
    return recent.aggregate(total=Sum("failures_since_start"))["total"] or 0


def address_locked(request) -> bool:
    return address_failures(request) >= settings.FLEETWISE_LOGIN_ADDRESS_FAILURE_LIMIT


class LoginAttemptsHandler(AxesDatabaseHandler):
    """Axes' database handler with the per-address limit beside the per-pair one.

    The address-wide sum is read from the same attempt rows (one per username and address), so
    a successful login, which resets its own username's row, does not reset a spray's count.
    """

    def get_failures(self, request, credentials=None) -> int:
        failures = super().get_failures(request, credentials)
        if address_locked(request):
            return max(failures, get_failure_limit(request, credentials))
        return failures


def client_ip(request) -> str | None:
    """The client's address: behind N trusted proxies, the Nth address from the right of
    X-Forwarded-For (each proxy appends the address it saw); else the socket's peer."""
    proxies = settings.FLEETWISE_TRUSTED_PROXY_COUNT
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    if proxies and len(hops) >= proxies:
        return hops[-proxies]
    return request.META.get("REMOTE_ADDR")


def lockout_message(request) -> str:
    cool_off = get_cool_off(request)
    minutes = max(1, round(cool_off.total_seconds() / 60)) if cool_off else None
    wait = f"Try again in {minutes} minutes" if minutes else "Try again later"
    if address_locked(request):
        return (
            f"Too many failed logins from your address, for several usernames. {wait}, "
            "or ask an administrator to unlock it."
        )
    return (
        f"Too many failed logins for this username from your address. {wait}, "
        "or ask an administrator to unlock the account."
    )


def lockout_response(request, original_response=None, credentials=None):
    """The login page again, with the lockout as its error, status 429."""
    form = AuthenticationForm(request, initial={"username": (credentials or {}).get("username")})
    # Shown as the form's error without validating it (that would count another attempt).
    form._errors = ErrorDict(
        {NON_FIELD_ERRORS: form.error_class([lockout_message(request)], error_class="nonfield")}
    )
    context = {"form": form, "next": request.POST.get("next", "") if request.POST else ""}
    return TemplateResponse(request, "registration/login.html", context, status=429).render()
