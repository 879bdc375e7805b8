from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path

from config.health import healthz, healthz_worker


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """Browsers ask for /favicon.ico whatever the page links; the icon is a public static file."""
    return HttpResponsePermanentRedirect(static("frontend/favicon.svg"))


urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz/", healthz, name="healthz"),
    path("healthz/worker/", healthz_worker, name="healthz-worker"),
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("config.api")),
    path("reports/", include("reports.urls")),
    path("alerts/", include("alerts.urls")),
    path("", include("frontend.urls")),
]
