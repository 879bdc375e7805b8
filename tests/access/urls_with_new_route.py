"""The app's URLconf plus one route nobody described (the matrix must name it)."""

from django.http import HttpResponse
from django.urls import include, path

urlpatterns = [
    path("", include("config.urls")),
    path("brand-new/", lambda request: HttpResponse("hi"), name="brand-new"),
]
