"""The dashboard pages (fleet, analyses, usage, costs, planner): one module per section.

Each module exposes `urlpatterns`; frontend/urls.py includes them under the frontend namespace.
"""
