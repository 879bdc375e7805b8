"""Stored inference plans take the shape under the API's names (docs/inference.md, "Choosing a
model"): `hidden` becomes `hidden_size`; a plan that left `attention_heads` out gets what the
old estimate used (hidden / head_dim), and one without `model_params` the N it was computed
with (12 × layers × hidden²), so every stored plan still computes the result it holds. The
stored result's shape takes the same names and says where it came from.
"""

from django.db import migrations

OLD_RESULT_NAMES = {"hidden": "hidden_size", "heads": "attention_heads"}


def upgraded_inputs(inputs: dict) -> dict:
    if "hidden" not in inputs:
        return inputs
    upgraded = dict(inputs)
    hidden = upgraded.pop("hidden")
    upgraded["hidden_size"] = hidden
    if upgraded.get("attention_heads") is None and upgraded.get("head_dim"):
        upgraded["attention_heads"] = max(1, int(hidden) // int(upgraded["head_dim"]))
    if upgraded.get("model_params") is None and upgraded.get("layers"):
        upgraded["model_params"] = 12.0 * int(upgraded["layers"]) * int(hidden) ** 2
    return upgraded


def upgraded_results(results: dict) -> dict:
    shape = results.get("shape")
    if not isinstance(shape, dict) or "hidden" not in shape:
        return results
    renamed = {OLD_RESULT_NAMES.get(key, key): value for key, value in shape.items()}
    entered = (results.get("provenance") or {}).get("shape") == "entered"
    return {
        **results,
        "shape": renamed,
        "shape_source": "entered" if entered else "inferred",
        "model": None,
    }


def forwards(apps, schema_editor):
    InferencePlan = apps.get_model("planner", "InferencePlan")
    for plan in InferencePlan.objects.all().iterator():
        inputs, results = upgraded_inputs(plan.inputs), upgraded_results(plan.results)
        if inputs != plan.inputs or results != plan.results:
            plan.inputs, plan.results = inputs, results
            plan.save(update_fields=["inputs", "results"])


def backwards(apps, schema_editor):
    """The old name back; a catalog model or the new shape fields stay (the old code refuses
    them, as it refuses any input it does not know)."""
    InferencePlan = apps.get_model("planner", "InferencePlan")
    for plan in InferencePlan.objects.all().iterator():
        if "hidden_size" in plan.inputs:
            inputs = dict(plan.inputs)
            inputs["hidden"] = inputs.pop("hidden_size")
            plan.inputs = inputs
            plan.save(update_fields=["inputs"])


class Migration(migrations.Migration):
    dependencies = [("planner", "0008_inference_plan")]

    operations = [migrations.RunPython(forwards, backwards)]
