import django_filters

from planner.models import Analysis


class AnalysisFilterSet(django_filters.FilterSet):
    class Meta:
        model = Analysis
        fields = ["scope", "status", "object_id", "stale"]
