"""API pagination: page numbers with a client-chosen page size up to a ceiling."""

from rest_framework.pagination import PageNumberPagination


class StandardPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 1000
