"""A pool's catalog model as its pages name it, with its published parameter counts, in the
Planner page's words: "DeepSeek-V3 (671 B total · 37 B active)", "Llama-3-70B (70.55 B)"."""

from __future__ import annotations

from django import template

from engine.model_catalog import UnknownModelError, find_model
from frontend.forms_planner_moe import catalog_label

register = template.Library()


@register.filter
def pool_model(model_name: str | None) -> str:
    """The named model with its total (and, for a mixture of experts, active) parameters; a
    name the catalog no longer holds says so ("" when none is named)."""
    if not model_name:
        return ""
    try:
        model = find_model(model_name, allow_moe=True)
    except UnknownModelError:  # renamed or dropped since: analyses score it as if unnamed
        return f"{model_name} (no longer in the model catalog: scored as if unnamed)"
    return catalog_label(model)
