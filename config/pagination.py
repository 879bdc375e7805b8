"""API pagination: page numbers with a client-chosen page size up to a ceiling.

A CSV or XLSX asked for without ``page``/``page_size`` is the whole filtered table (a
spreadsheet wants every row, not page 1); with them it is that page.
"""

from rest_framework.pagination import PageNumberPagination

from core.tabular.columns import wants_whole_table


class StandardPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 1000

    def paginate_queryset(self, queryset, request, view=None):
        if wants_whole_table(request):
            return None
        return super().paginate_queryset(queryset, request, view)
