"""Inventory pages: list, detail, create, edit and delete for each object type.

Lists and details read through `inventory.selectors`, so the number of queries per page is
constant however many rows there are. Forms are ModelForms: the models' clean() rules apply.
"""

from __future__ import annotations

from collections import defaultdict

from django.contrib import messages
from django.contrib.admin.utils import NestedObjects
from django.db import router, transaction
from django.db.models import Count, ProtectedError
from django.forms import CheckboxInput
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.generic import CreateView, DeleteView, DetailView, ListView, TemplateView
from django.views.generic.edit import UpdateView

from access.pages import PlannerRequiredMixin, RoleRequiredMixin
from accounting.models import ServingLoad
from core.concurrency import claim
from frontend import filters
from frontend.forms import OPENED_VERSION, add_opened_version
from frontend.forms_serving import ServingLoadForm
from frontend.templatetags.fleetwise_ui import detail_url_of
from inventory import deletion
from inventory.forms import (
    AcceleratorModelForm,
    ClusterForm,
    NodeGroupForm,
    PoolForm,
    SiteForm,
)
from inventory.imports import KINDS
from inventory.models import (
    AcceleratorModel,
    Cluster,
    NodeGroup,
    Pool,
    PoolPurpose,
    Site,
    SoftDeletable,
)
from inventory.selectors import (
    cluster_totals_prefetched,
    clusters_with_pools,
    fleet_totals,
    node_groups_queryset,
    pool_totals,
    pools_with_node_groups,
    site_totals_prefetched,
    sites_with_clusters,
)
from inventory.versioning import conflict_since

LIST_URL_NAMES = {
    Site: "frontend:site-list",
    Cluster: "frontend:cluster-list",
    Pool: "frontend:pool-list",
    NodeGroup: "frontend:nodegroup-list",
    AcceleratorModel: "frontend:accelerator-list",
}
IMPORT_KIND_OF = {
    Site: "sites",
    Cluster: "clusters",
    Pool: "pools",
    NodeGroup: "node-groups",
    AcceleratorModel: "accelerators",
}

SECTION_TITLES = {AcceleratorModel: "Card catalog"}
SERVING_LOADS_SHOWN = 20  # newest first; the API lists them all


def node_groups_with_path():
    return node_groups_queryset().select_related("pool__cluster__site")


class InventoryContextMixin:
    """Names and links every inventory page shows (title, list link, import kind)."""

    model = None

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        meta = self.model._meta
        context.update(
            section_title=SECTION_TITLES.get(self.model, meta.verbose_name_plural.capitalize()),
            verbose_name=meta.verbose_name,
            verbose_name_plural=meta.verbose_name_plural,
            list_url=reverse(LIST_URL_NAMES[self.model]),
            create_url=reverse(LIST_URL_NAMES[self.model].replace("-list", "-create")),
            import_kind=KINDS[IMPORT_KIND_OF[self.model]],
        )
        return context


# --- Overview -----------------------------------------------------------------------------------


class InventoryIndexView(RoleRequiredMixin, TemplateView):
    template_name = "frontend/inventory/index.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["sections"] = [
            (model._meta.verbose_name_plural, reverse(url_name), model.objects.count())
            for model, url_name in LIST_URL_NAMES.items()
        ]
        context["fleet"] = fleet_totals()
        return context


# --- Lists --------------------------------------------------------------------------------------


class InventoryListView(InventoryContextMixin, RoleRequiredMixin, ListView):
    paginate_by = 50
    filterset_class = None

    def base_queryset(self):
        return self.model.objects.all()

    def get_queryset(self):
        self.filterset = self.filterset_class(
            self.request.GET or None, queryset=self.base_queryset(), request=self.request
        )
        return self.filterset.qs

    def totals(self, obj):
        return None

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["filter"] = self.filterset
        context["is_filtered"] = bool(self.filterset.is_bound and self.filterset.form.has_changed())
        context["rows"] = [(obj, self.totals(obj)) for obj in context["object_list"]]
        return context


class SiteListView(InventoryListView):
    model = Site
    template_name = "frontend/inventory/site_list.html"
    filterset_class = filters.SiteListFilter

    def base_queryset(self):
        return sites_with_clusters()

    def totals(self, site):
        return site_totals_prefetched(site)


class ClusterListView(InventoryListView):
    model = Cluster
    template_name = "frontend/inventory/cluster_list.html"
    filterset_class = filters.ClusterListFilter

    def base_queryset(self):
        return clusters_with_pools()

    def totals(self, cluster):
        return cluster_totals_prefetched(cluster)


class PoolListView(InventoryListView):
    model = Pool
    template_name = "frontend/inventory/pool_list.html"
    filterset_class = filters.PoolListFilter

    def base_queryset(self):
        return pools_with_node_groups()

    def totals(self, pool):
        return pool_totals(pool)


class NodeGroupListView(InventoryListView):
    model = NodeGroup
    template_name = "frontend/inventory/nodegroup_list.html"
    filterset_class = filters.NodeGroupListFilter

    def base_queryset(self):
        return node_groups_with_path().order_by(
            "pool__cluster__site__name", "pool__cluster__name", "pool__name", "name"
        )


class AcceleratorListView(InventoryListView):
    model = AcceleratorModel
    template_name = "frontend/inventory/accelerator_list.html"
    filterset_class = filters.AcceleratorListFilter
    paginate_by = 100

    def base_queryset(self):
        # Grouped queries ignore Meta.ordering, so order explicitly.
        queryset = AcceleratorModel.objects.annotate(node_group_count=Count("node_groups"))
        return queryset.order_by("vendor", "name")


# --- Details ------------------------------------------------------------------------------------


class InventoryDetailView(InventoryContextMixin, RoleRequiredMixin, DetailView):
    pass


class SiteDetailView(InventoryDetailView):
    model = Site
    template_name = "frontend/inventory/site_detail.html"

    def get_queryset(self):
        return sites_with_clusters()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        site = self.object
        context["totals"] = site_totals_prefetched(site)
        context["cluster_rows"] = [(c, cluster_totals_prefetched(c)) for c in site.clusters.all()]
        return context


class ClusterDetailView(InventoryDetailView):
    model = Cluster
    template_name = "frontend/inventory/cluster_detail.html"

    def get_queryset(self):
        return clusters_with_pools()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        cluster = self.object
        context["totals"] = cluster_totals_prefetched(cluster)
        context["pool_rows"] = [(pool, pool_totals(pool)) for pool in cluster.pools.all()]
        return context


class PoolDetailView(InventoryDetailView):
    model = Pool
    template_name = "frontend/inventory/pool_detail.html"

    def get_queryset(self):
        return pools_with_node_groups()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["totals"] = pool_totals(self.object)
        if context["can_edit"]:
            context["node_group_form"] = NodeGroupForm(fixed_pool=self.object)
        if self.object.purpose == PoolPurpose.INFERENCE:
            context["serving_loads"] = self.object.serving_loads.all()[:SERVING_LOADS_SHOWN]
            if context["can_edit"]:
                context["serving_load_form"] = ServingLoadForm(pool=self.object)
        return context


class NodeGroupDetailView(InventoryDetailView):
    model = NodeGroup
    template_name = "frontend/inventory/nodegroup_detail.html"

    def get_queryset(self):
        return node_groups_with_path()


class AcceleratorDetailView(InventoryDetailView):
    model = AcceleratorModel
    template_name = "frontend/inventory/accelerator_detail.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        groups = list(node_groups_with_path().filter(accelerator=self.object))
        context["node_groups"] = groups
        context["cards_in_use"] = sum(group.cards for group in groups)
        return context


# --- Create and edit ----------------------------------------------------------------------------


class InventoryFormMixin(InventoryContextMixin, PlannerRequiredMixin):
    template_name = "frontend/inventory/form.html"

    def get_success_url(self) -> str:
        return detail_url_of(self.object)

    def form_valid(self, form):
        response = super().form_valid(form)
        verb = "Saved" if self.is_update else "Added"
        messages.success(self.request, f"{verb} {self.model._meta.verbose_name} “{self.object}”.")
        return response

    @property
    def is_update(self) -> bool:
        return isinstance(self, UpdateView)

    def get_object(self, queryset=None):
        obj = super().get_object(queryset)
        # The form writes submitted values onto the instance; titles keep the stored name.
        self.stored_label = str(obj)
        return obj

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        name = self.model._meta.verbose_name
        context["title"] = f"Edit {name} {self.stored_label}" if self.is_update else f"New {name}"
        context["cancel_url"] = (
            detail_url_of(self.object) if self.is_update else context["list_url"]
        )
        return context


class InitialFromQueryMixin:
    """Pre-select a parent given in the query string, e.g. /clusters/new/?site=3."""

    initial_from_query: tuple[str, ...] = ()

    def get_initial(self):
        initial = super().get_initial()
        for name in self.initial_from_query:
            value = self.request.GET.get(name, "")
            if value.isdecimal():
                initial[name] = int(value)
        return initial


class VersionedUpdateView(InventoryFormMixin, UpdateView):
    """An edit page that refuses to save over a change made since it was opened.

    The form carries the version it was opened at; the save claims the row at that version
    (`inventory.versioning`). A stale save shows who changed what, theirs beside yours, and
    the form then holds the current version: saving again keeps your values deliberately.
    """

    def get_form(self, form_class=None):
        return add_opened_version(super().get_form(form_class))

    def form_valid(self, form):
        opened = form.cleaned_data.get(OPENED_VERSION)
        with transaction.atomic():
            if opened is None or claim(self.model, self.object.pk, opened):
                return super().form_valid(form)
        return self.stale(form, opened)

    def stale(self, form, opened: int):
        current = self.model._base_manager.get(pk=self.object.pk)
        stored = {field.name for field in self.model._meta.concrete_fields}
        yours = {name: form.cleaned_data.get(name) for name in form.fields if name in stored}
        label = f"{self.model._meta.verbose_name.capitalize()} “{current}”"
        conflict = conflict_since(current, opened, yours, label)
        form.data = form.data.copy()
        form.data[OPENED_VERSION] = str(conflict.current_version)
        self.take_theirs(form, current, [f.name for f in conflict.fields if not f.yours_changed])
        self.object = current
        return self.render_to_response(self.get_context_data(form=form, conflict=conflict))

    def take_theirs(self, form, current, names: list[str]) -> None:
        """Put their saved values in the form where you had changed nothing: no clash there."""
        kwargs = {**self.get_form_kwargs(), "data": None, "files": None, "instance": current}
        saved = self.get_form_class()(**kwargs)
        for name in names:
            value = saved[name].value()
            if isinstance(form.fields[name].widget, CheckboxInput):
                form.data.setlist(name, ["on"] if value else [])
            else:
                form.data[name] = "" if value is None else str(value)


class SiteCreateView(InventoryFormMixin, CreateView):
    model = Site
    form_class = SiteForm


class SiteUpdateView(VersionedUpdateView):
    model = Site
    form_class = SiteForm


class ClusterCreateView(InitialFromQueryMixin, InventoryFormMixin, CreateView):
    model = Cluster
    form_class = ClusterForm
    initial_from_query = ("site",)


class ClusterUpdateView(VersionedUpdateView):
    model = Cluster
    form_class = ClusterForm


class PoolCreateView(InitialFromQueryMixin, InventoryFormMixin, CreateView):
    model = Pool
    form_class = PoolForm
    initial_from_query = ("cluster",)


class PoolUpdateView(VersionedUpdateView):
    model = Pool
    form_class = PoolForm


class NodeGroupCreateView(InitialFromQueryMixin, InventoryFormMixin, CreateView):
    model = NodeGroup
    form_class = NodeGroupForm
    initial_from_query = ("pool", "accelerator")


class PoolInUrlMixin:
    """A form that adds something to the pool in the URL and goes back to its page;
    ``pool_form_kwarg`` names the form's argument that receives the pool."""

    pool_form_kwarg = "pool"

    def get_pool(self) -> Pool:
        if not hasattr(self, "_pool"):
            queryset = Pool.objects.select_related("cluster__site")
            self._pool = get_object_or_404(queryset, pk=self.kwargs["pk"])
        return self._pool

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), self.pool_form_kwarg: self.get_pool()}

    def get_success_url(self) -> str:
        return detail_url_of(self.get_pool())


class PoolNodeGroupCreateView(PoolInUrlMixin, InventoryFormMixin, CreateView):
    """Add a node group to the pool in the URL (the form on the pool page posts here)."""

    model = NodeGroup
    form_class = NodeGroupForm
    pool_form_kwarg = "fixed_pool"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        pool = self.get_pool()
        context["title"] = f"Add a node group to pool {pool.cluster.site.name} / {pool}"
        context["cancel_url"] = detail_url_of(pool)
        return context


class PoolServingLoadMixin(PoolInUrlMixin, PlannerRequiredMixin):
    """A serving load of the inference pool in the URL, added, edited or deleted from the
    pool page (``load_pk``: a load of another pool is not found)."""

    model = ServingLoad
    pk_url_kwarg = "load_pk"
    done_verb = "Added"
    title_text = "Add a serving load to"

    def get_queryset(self):
        return ServingLoad.objects.filter(pool=self.get_pool())

    def form_valid(self, form):
        # Named before the save (a new load) or the delete (a gone one).
        text = f"{self.done_verb} serving load “{self.object or form.instance}”."
        response = super().form_valid(form)
        messages.success(self.request, text)
        return response

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        pool = self.get_pool()
        return {
            **context,
            "title": f"{self.title_text} pool {pool.cluster.site.name} / {pool}",
            "section_title": "Pools",
            "list_url": reverse(LIST_URL_NAMES[Pool]),
            "cancel_url": detail_url_of(pool),
            "pool": pool,
        }


class PoolServingLoadCreateView(PoolServingLoadMixin, CreateView):
    form_class = ServingLoadForm
    template_name = "frontend/inventory/form.html"


class PoolServingLoadUpdateView(PoolServingLoadMixin, UpdateView):
    form_class = ServingLoadForm
    template_name = "frontend/inventory/form.html"
    done_verb = "Saved"
    title_text = "Edit a serving load of"


class PoolServingLoadDeleteView(PoolServingLoadMixin, DeleteView):
    template_name = "frontend/inventory/servingload_confirm_delete.html"
    done_verb = "Deleted"
    title_text = "Delete a serving load of"

    def get_form_kwargs(self):
        # The confirmation form takes no pool (PoolInUrlMixin gives one to edit forms).
        return super(PoolInUrlMixin, self).get_form_kwargs()


class NodeGroupUpdateView(VersionedUpdateView):
    model = NodeGroup
    form_class = NodeGroupForm


class AcceleratorCreateView(InventoryFormMixin, CreateView):
    model = AcceleratorModel
    form_class = AcceleratorModelForm


class AcceleratorUpdateView(VersionedUpdateView):
    model = AcceleratorModel
    form_class = AcceleratorModelForm


# --- Delete -------------------------------------------------------------------------------------


def describe_blockers(objects) -> list[str]:
    """Protected objects grouped by type, e.g. ["2 node groups (a100-nodes, h100-nodes)"]."""
    names_by_meta = defaultdict(set)
    for obj in objects:
        names_by_meta[obj._meta].add(str(obj))
    parts = []
    for meta, names in names_by_meta.items():
        label = meta.verbose_name if len(names) == 1 else meta.verbose_name_plural
        shown = ", ".join(sorted(names)[:10]) + (" …" if len(names) > 10 else "")
        parts.append(f"{len(names)} {label} ({shown})")
    return parts


class InventoryDeleteView(InventoryContextMixin, PlannerRequiredMixin, DeleteView):
    template_name = "frontend/inventory/confirm_delete.html"

    def get_success_url(self) -> str:
        return reverse(LIST_URL_NAMES[self.model])

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        collector = NestedObjects(using=router.db_for_write(self.model))
        collector.collect([self.object])
        context["blockers"] = describe_blockers(collector.protected)
        context["also_deleted"] = [
            (
                len(objs),
                model._meta.verbose_name if len(objs) == 1 else model._meta.verbose_name_plural,
            )
            for model, objs in collector.model_objs.items()
            if model is not self.model and objs
        ]
        measured = isinstance(self.object, SoftDeletable) and deletion.measured_data(self.object)
        if measured:  # a soft delete, confirmed by a box that names the records
            context["measured"] = measured
            context["confirm_value"] = deletion.CONFIRM_USAGE
            context["kept_until"] = deletion.kept_until(self.object)
        return context

    def form_valid(self, form):
        label = str(self.object)
        soft = False
        try:
            if isinstance(self.object, SoftDeletable):  # inventory.deletion
                confirm = self.request.POST.get("confirm")
                soft = deletion.delete(self.object, user=self.request.user, confirm=confirm)
            else:
                self.object.delete()
        except deletion.ConfirmationNeeded as exc:
            context = self.get_context_data(confirm_error=exc.message)
            return self.render_to_response(context, status=400)
        except ProtectedError as exc:
            blockers = " and ".join(describe_blockers(exc.protected_objects))
            message = f"“{label}” cannot be deleted while {blockers} depend on it. "
            messages.error(self.request, message + "Delete or change those first.")
            return HttpResponseRedirect(detail_url_of(self.object))
        done = f"Deleted {self.model._meta.verbose_name} “{label}”."
        if soft:
            until = deletion.kept_until(self.object)
            done += f" It can be restored from its history until {until:%Y-%m-%d}."
        messages.success(self.request, done)
        return HttpResponseRedirect(self.get_success_url())


class SiteDeleteView(InventoryDeleteView):
    model = Site


class ClusterDeleteView(InventoryDeleteView):
    model = Cluster


class PoolDeleteView(InventoryDeleteView):
    model = Pool


class NodeGroupDeleteView(InventoryDeleteView):
    model = NodeGroup

    def get_success_url(self) -> str:
        return reverse("frontend:pool-detail", args=[self.object.pool_id])


class AcceleratorDeleteView(InventoryDeleteView):
    model = AcceleratorModel
