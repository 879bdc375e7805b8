"""Kubernetes allocation sources (GET/POST /api/v1/kubernetes-sources/, POST .../<id>/fetch/)
and their node and team rules (/api/v1/kubernetes-node-rules/, /api/v1/kubernetes-team-rules/):
docs/kubernetes-usage.md.

Administrators only, read and write: a source may hold a bearer token, and its rules decide
which team pays for which card-hours.
"""

from __future__ import annotations

import re

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from access.roles import ADMIN
from accounting.api.live_sources import RUN_STATUS, LiveSourceSerializer, read_now
from telemetry.kubernetes.models import KubernetesNodeRule, KubernetesSource, KubernetesTeamRule

# A bearer token: visible ASCII without spaces; nothing else may reach a request header.
TOKEN_PATTERN = re.compile(r"^[\x21-\x7e]{1,4096}$")
SETTINGS = (
    "cluster", "url", "label_selector", "node_label", "team_label", "default_team", "step_s",
    "scrape_interval_s", "enabled", "interval_s", "overlap_s", "timeout_s", "cursor",
)  # fmt: skip
STATUS = (
    *RUN_STATUS, "records_written", "card_hours", "mapped", "unmapped_nodes",
    "unmapped_namespaces", "warnings", "created", "updated",
)  # fmt: skip


class KubernetesSourceSerializer(LiveSourceSerializer):
    RECONNECT = frozenset({"url", "label_selector", "enabled"})

    token = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=4096,
        help_text="Bearer token; stored encrypted, never shown. Empty: remove it.",
    )  # fmt: skip

    class Meta:
        model = KubernetesSource
        fields = ["id", *SETTINGS, "token", *STATUS]
        read_only_fields = list(STATUS)

    def validate_token(self, value: str) -> str:
        if value and not TOKEN_PATTERN.match(value):
            raise serializers.ValidationError("Not a bearer token: visible characters only.")
        return value

    def validate(self, attrs):
        from telemetry.kubernetes.services import slurm_usage_refusal

        # Checked when a source is given its cluster; each fetch checks again before writing.
        cluster = attrs.get("cluster")
        refusal = slurm_usage_refusal(cluster) if cluster is not None else None
        if refusal:
            raise serializers.ValidationError(
                {"cluster": f"{refusal} A cluster takes allocation from one source kind, so "
                            "no pool is counted twice (docs/kubernetes-usage.md)."}
            )  # fmt: skip
        return attrs


class KubernetesNodeRuleSerializer(serializers.ModelSerializer):
    class Meta:
        model = KubernetesNodeRule
        fields = ["id", "source", "match", "pattern", "node_group", "priority"]

    def validate(self, attrs):
        source = attrs.get("source") or self.instance.source
        group = attrs.get("node_group") or self.instance.node_group
        if group.pool.cluster_id != source.cluster_id:
            raise serializers.ValidationError(
                {"node_group": "The node group is not in the source's cluster."}
            )
        return attrs


class KubernetesTeamRuleSerializer(serializers.ModelSerializer):
    class Meta:
        model = KubernetesTeamRule
        fields = ["id", "source", "match", "pattern", "team", "priority"]


class KubernetesSourceViewSet(viewsets.ModelViewSet):
    queryset = KubernetesSource.objects.select_related("cluster").order_by("pk")
    serializer_class = KubernetesSourceSerializer
    read_role = ADMIN
    write_role = ADMIN

    @extend_schema(request=None, responses={202: KubernetesSourceSerializer})
    @action(detail=True, methods=["post"])
    def fetch(self, request: Request, pk: str | None = None) -> Response:
        """Fetch now, whatever the schedule or back-off says (409 while a fetch runs)."""
        return read_now(self, "fetch")


class KubernetesNodeRuleViewSet(viewsets.ModelViewSet):
    queryset = KubernetesNodeRule.objects.select_related("node_group__pool").order_by("pk")
    serializer_class = KubernetesNodeRuleSerializer
    read_role = ADMIN
    write_role = ADMIN


class KubernetesTeamRuleViewSet(viewsets.ModelViewSet):
    queryset = KubernetesTeamRule.objects.order_by("pk")
    serializer_class = KubernetesTeamRuleSerializer
    read_role = ADMIN
    write_role = ADMIN
