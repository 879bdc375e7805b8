"""Upload bodies refused by size before anything reads them.

A view that takes a file declares ``max_upload_bytes`` (bytes, or a callable giving them).
:class:`UploadLimitMiddleware`, placed before CsrfViewMiddleware (which reads a form body to
find its token), answers 413 when the declared Content-Length is above that limit plus the
multipart framing: Django reads no more of a body than its Content-Length, so nothing of a
600 MiB upload is read or written to disk. It also installs :class:`CappedUploadHandler`, which
stops a file that streams in beyond the same bound, whatever the request declared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest, HttpResponse, JsonResponse

# Multipart framing around the file: boundaries, part headers and the small form fields.
MULTIPART_OVERHEAD_BYTES = 64 * 1024
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def declared_limit(view_func: Callable[..., Any]) -> int | None:
    """The ``max_upload_bytes`` of a view (function, class-based view or DRF viewset)."""
    view_class = getattr(view_func, "view_class", None) or getattr(view_func, "cls", None)
    limit = getattr(view_class or view_func, "max_upload_bytes", None)
    return limit() if callable(limit) else limit


def _megabytes(limit: int) -> str:
    return f"{limit / 2**20:g} MiB"


def too_large_response(view_func: Callable[..., Any], limit: int) -> HttpResponse:
    """413, as JSON for the API (``detail``, ``max_bytes``), as a short text for a page."""
    text = f"The upload is larger than the {_megabytes(limit)} limit; nothing of it was read."
    if getattr(view_func, "cls", None) is not None:  # a DRF view
        return JsonResponse({"detail": text, "max_bytes": limit}, status=413)
    page = f"{text} Go back and choose a smaller file."
    return HttpResponse(page, status=413, content_type="text/plain; charset=utf-8")


class CappedUploadHandler(FileUploadHandler):
    """Counts the bytes of each uploaded file as they arrive; past the cap, the request fails
    (a 400) before more of it is read. Passes the data on to the next handler."""

    def __init__(self, request: HttpRequest, cap_bytes: int):
        super().__init__(request)
        self.cap_bytes = cap_bytes
        self.received = 0

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > self.cap_bytes:
            raise RequestDataTooBig(f"An uploaded file is larger than {self.cap_bytes} bytes.")
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


class UploadLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        limit = declared_limit(view_func)
        if limit is None or request.method not in BODY_METHODS:
            return None
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0  # Django then reads no body at all
        if declared > limit + MULTIPART_OVERHEAD_BYTES:
            return too_large_response(view_func, limit)
        request.upload_handlers.insert(
            0, CappedUploadHandler(request, limit + MULTIPART_OVERHEAD_BYTES)
        )
        return None
