"""History pages of inventory objects: the list of changes with their diffs, and revert.

Reading the history needs the viewer role; reverting is a POST (with CSRF) for planners.
A deleted object keeps its history page, so it can be restored from there.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views import View
from django.views.generic import TemplateView

from access.pages import RoleRequiredMixin
from frontend.inventory_views import LIST_URL_NAMES, SECTION_TITLES
from frontend.templatetags.fleetwise_ui import detail_url_of
from inventory.history import RevertRefused, history_entries, revert_to
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

# URL prefix of each model's pages, as in frontend/urls.py.
URL_NAMES = {
    Site: "site",
    Cluster: "cluster",
    Pool: "pool",
    NodeGroup: "nodegroup",
    AcceleratorModel: "accelerator",
}


def history_url_of(model, pk: int) -> str:
    return reverse(f"frontend:{URL_NAMES[model]}-history", args=[pk])


class HistoryView(RoleRequiredMixin, TemplateView):
    model = None
    template_name = "frontend/history/history.html"
    paginate_by = 50

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        model, pk = self.model, self.kwargs["pk"]
        entries = history_entries(model, pk)
        current = model.objects.filter(pk=pk).first()
        if not entries and current is None:
            raise Http404(f"No {model._meta.verbose_name} with id {pk}, and no history of one.")
        page = Paginator(entries, self.paginate_by).get_page(self.request.GET.get("page"))
        name = str(current) if current else entries[0].record.name
        context.update(
            model_name=model._meta.verbose_name,
            section_title=SECTION_TITLES.get(model, model._meta.verbose_name_plural.capitalize()),
            list_url=reverse(LIST_URL_NAMES[model]),
            object=current,
            object_label=name,
            detail_url=detail_url_of(current) if current else None,
            page_obj=page,
            entries=page.object_list,
            revert_url_name=f"frontend:{URL_NAMES[model]}-revert",
        )
        return context


class RevertView(RoleRequiredMixin, View):
    """POST only: restore one recorded version (a GET is refused with 405)."""

    model = None
    http_method_names = ["post"]

    def post(self, request, pk: int, history_id: int):
        record = get_object_or_404(self.model.history.all(), id=pk, history_id=history_id)
        back = history_url_of(self.model, pk)
        try:
            instance = revert_to(record, request.user)
        except RevertRefused as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(back)
        when = record.history_date.strftime("%Y-%m-%d %H:%M:%S")
        label = self.model._meta.verbose_name
        messages.success(request, f"Restored {label} “{instance}” to its version of {when} UTC.")
        return HttpResponseRedirect(back)


def history_urls(path) -> list:
    """The history and revert URLs of every inventory object type."""
    prefixes = {
        Site: "sites",
        Cluster: "clusters",
        Pool: "pools",
        NodeGroup: "node-groups",
        AcceleratorModel: "accelerators",
    }
    urls = []
    for model, prefix in prefixes.items():
        name = URL_NAMES[model]
        urls += [
            path(
                f"inventory/{prefix}/<int:pk>/history/",
                HistoryView.as_view(model=model),
                name=f"{name}-history",
            ),
            path(
                f"inventory/{prefix}/<int:pk>/history/<int:history_id>/revert/",
                RevertView.as_view(model=model),
                name=f"{name}-revert",
            ),
        ]
    return urls
