"""Exchange rates: every role reads them; administrators add them (and edit them in /admin/)."""

from __future__ import annotations

from rest_framework import mixins, serializers, viewsets

from access.roles import ADMIN
from core.tabular.exporting import TabularListMixin
from inventory.api.serializers import ModelCleanMixin
from inventory.currency import ExchangeRate


class ExchangeRateSerializer(ModelCleanMixin, serializers.ModelSerializer):
    class Meta:
        model = ExchangeRate
        fields = ["id", "from_currency", "to_currency", "rate", "valid_on", "source", "created"]
        read_only_fields = ["created"]


class ExchangeRateViewSet(
    TabularListMixin, mixins.ListModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    queryset = ExchangeRate.objects.all()
    serializer_class = ExchangeRateSerializer
    write_role = ADMIN
    filterset_fields = ["from_currency", "to_currency"]
    ordering_fields = ["valid_on", "from_currency", "to_currency"]
