"""Login rate limiting (django-axes): which logins count, the client address, the lockout page.

Failed logins are counted per username and client address; at AXES_FAILURE_LIMIT the pair is
locked for AXES_COOLOFF_TIME (an administrator can unlock earlier: `manage.py axes_reset`).
API tokens are not passwords and are not limited here.
"""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_cool_off
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import NON_FIELD_ERRORS
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
