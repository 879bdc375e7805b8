"""Bulk import pages: upload or paste → preview with per-row errors → all-or-nothing commit.

The parsed cells wait in the server-side session between preview and commit (nothing comes
back from the browser but a token), and `commit_import` validates them again before saving.
"""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.generic import FormView, TemplateView

from access.pages import PlannerRequiredMixin, RoleRequiredMixin
from frontend.forms import ImportUploadForm
from inventory.imports import (
    CREATE,
    KINDS,
    MAX_UPLOAD_BYTES,
    UNCHANGED,
    UPDATE,
    ImportFileError,
    ImportRejected,
    ParsedTable,
    check_columns,
    column_help,
    commit_import,
    parse_text,
    parse_upload,
    preview_import,
    template_csv,
    template_xlsx,
)

SESSION_KEY = "inventory_import"
LIST_URL_OF_KIND = {
    "sites": "frontend:site-list",
    "clusters": "frontend:cluster-list",
    "pools": "frontend:pool-list",
    "node-groups": "frontend:nodegroup-list",
    "accelerators": "frontend:accelerator-list",
}
MAX_ERRORS_LISTED = 100


class ImportKindMixin:
    def dispatch(self, request, *args, **kwargs):
        if kwargs["kind"] not in KINDS:
            raise Http404("No such import type.")
        self.kind = KINDS[kwargs["kind"]]
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["kind"] = self.kind
        context["upload_url"] = reverse("frontend:import-upload", args=[self.kind.slug])
        return context


class ImportIndexView(PlannerRequiredMixin, TemplateView):
    template_name = "frontend/imports/index.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["kinds"] = list(KINDS.values())
        return context


class ImportUploadView(PlannerRequiredMixin, ImportKindMixin, FormView):
    template_name = "frontend/imports/upload.html"
    form_class = ImportUploadForm
    max_upload_bytes = MAX_UPLOAD_BYTES  # a larger body is a 413, unread (core.upload_limits)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["columns"] = column_help(self.kind)
        return context

    def form_valid(self, form):
        upload = form.cleaned_data.get("file")
        try:
            if upload:
                table, source = parse_upload(upload), upload.name
            else:
                table, source = parse_text(form.cleaned_data["pasted_rows"]), "pasted rows"
            check_columns(self.kind, table)
        except ImportFileError as exc:
            form.add_error("file" if upload else "pasted_rows", str(exc))
            return self.form_invalid(form)
        self.request.session[SESSION_KEY] = {
            "token": uuid.uuid4().hex,
            "kind": self.kind.slug,
            "source": source,
            "table": table.to_payload(),
        }
        return HttpResponseRedirect(reverse("frontend:import-preview", args=[self.kind.slug]))


class ImportPreviewView(PlannerRequiredMixin, ImportKindMixin, TemplateView):
    """GET shows the stored rows validated against the current database; POST saves them."""

    template_name = "frontend/imports/preview.html"

    def pending(self) -> dict | None:
        pending = self.request.session.get(SESSION_KEY)
        return pending if pending and pending.get("kind") == self.kind.slug else None

    def no_pending_response(self):
        messages.info(self.request, "There is no import waiting; upload a file or paste rows.")
        return HttpResponseRedirect(reverse("frontend:import-upload", args=[self.kind.slug]))

    def render_preview(self, pending: dict, preview=None, rejected_message: str = ""):
        table = ParsedTable.from_payload(pending["table"])
        try:
            preview = preview or preview_import(self.kind, table)
        except ImportFileError as exc:
            messages.error(self.request, str(exc))
            return HttpResponseRedirect(reverse("frontend:import-upload", args=[self.kind.slug]))
        errors = preview.errors
        context = self.get_context_data(
            preview=preview,
            pending=pending,
            errors=errors[:MAX_ERRORS_LISTED],
            unlisted_error_count=max(0, len(errors) - MAX_ERRORS_LISTED),
            rows_with_errors=sum(1 for row in preview.rows if row.errors),
            new_count=preview.count(CREATE),
            update_count=preview.count(UPDATE),
            unchanged_count=preview.count(UNCHANGED),
            rejected_message=rejected_message,
        )
        return self.render_to_response(context)

    def get(self, request, *args, **kwargs):
        pending = self.pending()
        if pending is None:
            return self.no_pending_response()
        return self.render_preview(pending)

    def post(self, request, *args, **kwargs):
        pending = self.pending()
        if pending is None:
            return self.no_pending_response()
        if request.POST.get("token") != pending["token"]:
            messages.warning(
                request, "A newer upload replaced that preview. Check this one and save again."
            )
            return HttpResponseRedirect(request.path)
        try:
            result = commit_import(self.kind, ParsedTable.from_payload(pending["table"]))
        except ImportRejected as exc:
            return self.render_preview(pending, exc.preview, rejected_message=exc.message)
        except ImportFileError as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(reverse("frontend:import-upload", args=[self.kind.slug]))
        del request.session[SESSION_KEY]
        messages.success(
            request,
            f"Imported {self.kind.label.lower()} from {pending['source']}: {result.created} added, "
            f"{result.updated} updated, {result.unchanged} unchanged.",
        )
        return HttpResponseRedirect(reverse(LIST_URL_OF_KIND[self.kind.slug]))


class ImportTemplateView(RoleRequiredMixin, ImportKindMixin, TemplateView):
    """An empty template (header row) to fill in; CSV or XLSX."""

    def get(self, request, *args, **kwargs):
        if kwargs["fmt"] not in ("csv", "xlsx"):
            raise Http404("Templates come as .csv or .xlsx.")
        if kwargs["fmt"] == "csv":
            body, content_type = template_csv(self.kind), "text/csv; charset=utf-8"
        else:
            body = template_xlsx(self.kind)
            content_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
        response = HttpResponse(body, content_type=content_type)
        filename = f"fleetwise-{self.kind.slug}-template.{kwargs['fmt']}"
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response
