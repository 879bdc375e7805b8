"""Inventory API viewsets; querysets are built by selectors so lists stay N+1-free."""

from __future__ import annotations

import uuid
from collections import Counter

from django.db import router, transaction
from django.db.models import ProtectedError
from django.db.models.deletion import Collector
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from core.concurrency import ConditionalUpdateMixin
from core.jobs import lifecycle
from core.jobs.status import JobStatus
from core.tabular.exporting import TabularListMixin
from inventory import deletion
from inventory.api.serializers import (
    AcceleratorModelSerializer,
    ClusterSerializer,
    NodeGroupSerializer,
    PoolSerializer,
    SiteSerializer,
)
from inventory.deletion import CONFIRM_USAGE
from inventory.filtersets import (
    AcceleratorModelFilterSet,
    ClusterFilterSet,
    NodeGroupFilterSet,
    PoolFilterSet,
    SiteFilterSet,
)
from inventory.models import AcceleratorModel, Cluster, PoolTotalsCheck, Site, SoftDeletable
from inventory.selectors import node_groups_queryset, pools_with_node_groups


def cascade_counts(obj) -> list[tuple[int, str]]:
    """(count, plural name) of every other kind of row that deleting `obj` would delete.

    Raises ProtectedError when something still points at it. Big children (usage records)
    are fast-deleted querysets in the collector: counted in SQL, never loaded.
    """
    collector = Collector(using=router.db_for_write(type(obj)))
    collector.collect([obj])
    counts: Counter = Counter()
    for model, instances in collector.data.items():
        counts[model] += len(instances)
    for queryset in collector.fast_deletes:
        counts[queryset.model] += queryset.count()
    counts.pop(type(obj), None)
    return [
        (n, str(model._meta.verbose_name if n == 1 else model._meta.verbose_name_plural))
        for model, n in sorted(counts.items(), key=lambda item: -item[1])
        if n
    ]


class ProtectedDeleteMixin:
    """Refuse to delete an object others still point to, with a 409 that says why; and
    delete what goes with it only when the client confirms with ``?cascade=true``. A cluster
    or pool holding usage records needs ``?confirm=delete-usage`` (the 409 names the records
    and their period); it is soft-deleted (inventory.deletion): hidden with all it holds,
    restorable from its history until purged."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "cascade", bool, description="true: also delete the rows that depend on it."
            ),
            OpenApiParameter(
                "confirm",
                str,
                enum=[CONFIRM_USAGE],
                description=f"{CONFIRM_USAGE}: delete a cluster or pool that holds usage "
                "records (restorable from its history until purged).",
            ),
        ],
        responses={
            204: OpenApiResponse(description="Deleted."),
            409: OpenApiResponse(
                description="Still in use, or would delete other rows (named, with "
                "`would_delete` counts) without ?cascade=true, or usage records (named in "
                "`measured`, with their period) without ?confirm=delete-usage."
            ),
        },
    )
    def destroy(self, request, *args, **kwargs):
        instance = self.get_object()
        confirm = request.query_params.get("confirm")
        try:
            with transaction.atomic():
                also = cascade_counts(instance)
                confirmed = request.query_params.get("cascade") == "true"
                if not isinstance(instance, SoftDeletable):
                    if also and not confirmed:
                        return self._cascade_refused(instance, also)
                    self.perform_destroy(instance)
                else:
                    if also and not (confirmed or confirm == CONFIRM_USAGE):
                        measured = deletion.measured_data(instance)
                        if not measured:
                            return self._cascade_refused(instance, also)
                        raise deletion.ConfirmationNeeded(instance, measured)
                    deletion.delete(instance, user=request.user, confirm=confirm)
        except deletion.ConfirmationNeeded as exc:
            return self._usage_refused(exc, also)
        except ProtectedError as exc:
            names = sorted({deletion.label(obj) for obj in exc.protected_objects})[:10]
            return Response(
                {"detail": f"Still in use by: {', '.join(names)}. Remove those first."},
                status=status.HTTP_409_CONFLICT,
            )
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _cascade_refused(self, instance, also: list[tuple[int, str]]) -> Response:
        name = type(instance)._meta.verbose_name
        detail = (
            f"{name.capitalize()} “{instance}” has {_listed(also)}: deleting it deletes them "
            "too. Repeat the request with ?cascade=true to confirm."
        )
        return Response(
            {"detail": detail, "would_delete": {name: n for n, name in also}},
            status=status.HTTP_409_CONFLICT,
        )

    def _usage_refused(self, exc: deletion.ConfirmationNeeded, also) -> Response:
        named = {m.what for m in exc.measured}
        rest = [(n, name) for n, name in also if name not in named]
        others = f" It also has {_listed(rest)}." if rest else ""
        detail = (
            f"{exc.message}{others} Repeat the request with ?confirm={CONFIRM_USAGE} to confirm."
        )
        body = {
            "detail": detail,
            "confirm": CONFIRM_USAGE,
            "measured": [m.as_dict() for m in exc.measured],
            "would_delete": {name: n for n, name in also},
        }
        return Response(body, status=status.HTTP_409_CONFLICT)


def _listed(counts: list[tuple[int, str]]) -> str:
    return deletion.listed([f"{n:,} {name}" for n, name in counts])


class SiteViewSet(
    ConditionalUpdateMixin, TabularListMixin, ProtectedDeleteMixin, viewsets.ModelViewSet
):
    queryset = Site.objects.all()
    serializer_class = SiteSerializer
    filterset_class = SiteFilterSet
    ordering_fields = ["name", "pue", "tariff_per_kwh", "created"]
    search_fields = ["name", "location"]


class AcceleratorModelViewSet(
    ConditionalUpdateMixin, TabularListMixin, ProtectedDeleteMixin, viewsets.ModelViewSet
):
    queryset = AcceleratorModel.objects.all()
    serializer_class = AcceleratorModelSerializer
    filterset_class = AcceleratorModelFilterSet
    ordering_fields = ["vendor", "name", "dense_bf16_tflops", "memory_gb", "tdp_w"]
    search_fields = ["vendor", "name"]


class ClusterViewSet(
    ConditionalUpdateMixin, TabularListMixin, ProtectedDeleteMixin, viewsets.ModelViewSet
):
    queryset = Cluster.objects.select_related("site")
    serializer_class = ClusterSerializer
    filterset_class = ClusterFilterSet
    ordering_fields = ["name", "site__name", "commissioned_on", "created"]
    search_fields = ["name", "site__name"]


class PoolViewSet(
    ConditionalUpdateMixin, TabularListMixin, ProtectedDeleteMixin, viewsets.ModelViewSet
):
    queryset = pools_with_node_groups()
    serializer_class = PoolSerializer
    filterset_class = PoolFilterSet
    ordering_fields = ["name", "cluster__name", "purpose", "created"]
    search_fields = ["name", "cluster__name"]

    @extend_schema(
        request=None,
        responses={
            202: OpenApiResponse(
                inline_serializer(
                    "TaskAccepted",
                    {"task_id": serializers.CharField(), "status_url": serializers.CharField()},
                ),
                description="Queued on a Celery worker.",
            )
        },
    )
    @action(detail=True, methods=["post"], url_path="recompute-totals")
    def recompute_totals(self, request, pk=None):
        """Recompute the pool's derived totals on a Celery worker (a worker round-trip)."""
        check = lifecycle.queue(PoolTotalsCheck(pool=self.get_object()))
        task_id = str(check.run_id)  # the job row's run: what the status URL reads back
        return Response(
            {
                "task_id": task_id,
                "status_url": request.build_absolute_uri(f"/api/v1/tasks/{task_id}/"),
            },
            status=status.HTTP_202_ACCEPTED,
        )


class NodeGroupViewSet(
    ConditionalUpdateMixin, TabularListMixin, ProtectedDeleteMixin, viewsets.ModelViewSet
):
    queryset = node_groups_queryset()
    serializer_class = NodeGroupSerializer
    filterset_class = NodeGroupFilterSet
    ordering_fields = ["name", "node_count", "pool__name"]
    search_fields = ["name", "accelerator__name"]


# A totals check's job status in Celery's words (what the Fleet page's script reads).
CELERY_STATES = {
    JobStatus.QUEUED: "PENDING",
    JobStatus.RUNNING: "STARTED",
    JobStatus.SUCCEEDED: "SUCCESS",
    JobStatus.FAILED: "FAILURE",
}


class TotalsCheckStatusView(APIView):
    """State and result of a worker round-trip (a pool totals check), read from its job row."""

    @extend_schema(
        responses=inline_serializer(
            "TaskStatus",
            {
                "task_id": serializers.CharField(),
                "status": serializers.CharField(),
                "result": serializers.JSONField(allow_null=True),
                "date_done": serializers.DateTimeField(allow_null=True),
            },
        )
    )
    def get(self, request, task_id: str):
        try:
            check = PoolTotalsCheck.objects.filter(run_id=uuid.UUID(task_id)).first()
        except ValueError:
            check = None
        if check is None:
            # No such run: queued and not saved yet, or never existed.
            return Response(
                {"task_id": task_id, "status": "PENDING", "result": None, "date_done": None}
            )
        failed = check.status == JobStatus.FAILED
        return Response(
            {
                "task_id": task_id,
                "status": CELERY_STATES[check.status],
                "result": check.error if failed else check.result,
                "date_done": check.finished_at,
            }
        )
