"""The app's own "not found" page for the pages' in-app links, with DEBUG on as well.

With DEBUG off, Django's handler404 renders ``404.html`` for every 404. With DEBUG on it
shows its technical page instead, which a link inside the app should never lead to: a 404
raised by a page's view (an object gone, a part of an analysis that does not exist) gets the
same page in the app's layout. URLs that match no route keep Django's debug page, a
developer's aid; the API answers its own 404s as JSON.
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.defaults import page_not_found


class FriendlyNotFoundMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not settings.DEBUG or not isinstance(exception, Http404):
            return None  # without DEBUG, Django's handler404 renders the same page
        if request.path.startswith("/api/"):
            return None
        return page_not_found(request, exception)
