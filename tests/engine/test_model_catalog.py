"""The model catalog (engine/model_catalog.py, engine/data/model_catalog.json): published shapes
by name, their counts checked against the published parameter counts, lookups by name."""

from __future__ import annotations

import copy
import json

import pytest

from engine.model_catalog import (
    CATALOG_PATH,
    SHAPE_FIELDS,
    UnknownModelError,
    find_model,
    load_catalog,
    parse_catalog,
)

CATALOG = load_catalog()
MODELS = {model.name: model for model in CATALOG.models}
DENSE = sorted(name for name, model in MODELS.items() if not model.is_moe)
MOE = sorted(name for name, model in MODELS.items() if model.is_moe)

# Meta's published config.json of Meta-Llama-3-70B: hidden_size 8192, intermediate_size 28672,
# num_attention_heads 64, num_hidden_layers 80, num_key_value_heads 8, vocab_size 128256.
LLAMA3_70B = {
    "layers": 80,
    "hidden_size": 8192,
    "attention_heads": 64,
    "kv_heads": 8,
    "head_dim": 128,
    "ffn_hidden_size": 28672,
    "vocab_size": 128256,
}


def test_the_issue_s_models_are_all_there():
    wanted = {
        "Llama-2-7B", "Llama-2-13B", "Llama-2-70B", "Llama-3-8B", "Llama-3-70B",
        "Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B", "Llama-3.2-1B", "Llama-3.2-3B",
        "Mistral-7B-v0.3", "Qwen2.5-7B", "Qwen2.5-72B", "GPT-3-175B", "Falcon-180B",
    }  # fmt: skip
    assert wanted <= set(MODELS)


def test_llama_3_70b_has_meta_s_shape_with_eight_kv_heads():
    model = find_model("Llama-3-70B")
    assert model.shape() == LLAMA3_70B
    assert model.mlp_kind == "gated" and model.tied_embeddings is False


@pytest.mark.parametrize("name", DENSE)
def test_each_shape_counts_its_published_parameters_within_one_percent(name):
    # Biases and norms are not in the shape's count; a wrong layer count, width or vocabulary
    # would move it by far more than 1 %.
    model = MODELS[name]
    counted = model.model_shape().params
    assert abs(counted - model.params) <= 0.01 * model.params, (counted, model.params)
    # The MoE count of a dense entry (one expert, every layer dense) is the dense count.
    assert model.total_params() == model.active_params() == counted
    assert model.moe_fields() == {}


@pytest.mark.parametrize("name", DENSE)
def test_each_shape_is_a_possible_attention(name):
    model = MODELS[name]
    assert model.attention_heads % model.kv_heads == 0
    assert model.attention_heads * model.head_dim == model.hidden_size
    assert model.source.strip()
    assert model.model_shape().errors() == {}


def test_llama_3_1_405b_params_from_its_shape_by_hand():
    # 126 × (Q, O: 2·16384² + K, V: 2·16384·1024 + SwiGLU: 3·16384·53248) + 2 × 128256·16384
    by_hand = 126 * (2 * 16384**2 + 2 * 16384 * 1024 + 3 * 16384 * 53248) + 2 * 128256 * 16384
    assert find_model("llama-3.1-405b").model_shape().params == by_hand


@pytest.mark.parametrize(
    "spelling", ["Llama-3-70B", "llama-3-70b", "LLAMA-3-70B", " Llama 3 70B ", "Meta-Llama-3-70B"]
)
def test_lookup_ignores_case_and_knows_aliases(spelling):
    assert find_model(spelling).name == "Llama-3-70B"


def test_an_unknown_name_lists_close_names():
    with pytest.raises(UnknownModelError) as refused:
        find_model("Llama3-70B")
    message = refused.value.errors["model"]
    assert "Llama3-70B" in message
    assert "Llama-3-70B" in message and "Llama-3.1-70B" in message


def test_a_name_like_nothing_lists_the_catalog():
    with pytest.raises(UnknownModelError) as refused:
        find_model("zzzz")
    assert "Known models:" in refused.value.errors["model"]
    assert "Falcon-180B" in refused.value.errors["model"]


def test_an_unsupported_model_is_refused_saying_why():
    document = _document()
    document["unsupported"] = [{"name": "Grok-1", "reason": "not checked yet"}]
    with pytest.raises(UnknownModelError) as refused:
        find_model("grok-1", parse_catalog(document))
    assert "not checked yet" in refused.value.errors["model"]


# Published totals and active counts (each entry's source): DeepSeek-V3 671B / 37B (arXiv:
# 2412.19437 §4.2), Mixtral-8x7B 46.7B / 12.9B (arXiv:2401.04088), Mixtral-8x22B 141B / 39B,
# Qwen3-235B-A22B 235B / 22B and Qwen3-30B-A3B 30.5B / 3.3B (arXiv:2505.09388), gpt-oss-120b
# 116.83B / 5.13B and gpt-oss-20b 20.91B / 3.61B (OpenAI model card), DBRX 132B / 36B.
PUBLISHED = {
    "DeepSeek-V3": (671e9, 37e9),
    "DeepSeek-R1": (671e9, 37e9),
    "Mixtral-8x7B": (46.7e9, 12.9e9),
    "Mixtral-8x22B": (141e9, 39e9),
    "Qwen3-235B-A22B": (235e9, 22e9),
    "Qwen3-30B-A3B": (30.5e9, 3.3e9),
    "gpt-oss-120b": (116.83e9, 5.13e9),
    "gpt-oss-20b": (20.91e9, 3.61e9),
    "DBRX": (132e9, 36e9),
}


def test_the_issue_s_mixture_of_experts_models_are_all_there():
    assert set(PUBLISHED) == set(MOE)


@pytest.mark.parametrize("name", MOE)
def test_each_moe_shape_counts_its_published_total_and_active_parameters(name):
    model = MODELS[name]
    total, active = PUBLISHED[name]
    assert (model.params, model.published_active_params) == (total, active)
    # Totals are published to 3-4 digits (1 %); active counts mostly to two (2.5 %).
    assert model.total_params() == pytest.approx(total, rel=0.01)
    counted = model.active_params()
    if model.active_params_counts == "without_input_embedding":
        counted -= model.vocab_size * model.hidden_size
    assert counted == pytest.approx(active, rel=0.025)
    assert model.active_params() < 0.35 * model.total_params()


def test_a_caller_that_does_not_model_experts_refuses_them_saying_why():
    with pytest.raises(UnknownModelError) as refused:
        find_model("mixtral-8x7b", allow_moe=False)
    assert "mixture-of-experts" in refused.value.errors["model"]
    assert find_model("mixtral-8x7b").is_moe


def test_deepseek_v3_has_mla_and_one_shared_expert():
    model = find_model("deepseek-ai/DeepSeek-V3", allow_moe=True)
    shape = model.moe_shape()
    assert (shape.attention, shape.kv_lora_rank, shape.qk_rope_head_dim) == ("mla", 512, 64)
    assert (shape.experts, shape.experts_per_token, shape.shared_experts) == (256, 8, 1)
    assert (shape.dense_layer_count, shape.moe_layer_count, shape.expert_ffn) == (3, 58, 2048)
    assert model.moe_fields()["attention"] == "mla"
    assert find_model("DeepSeek-R1", allow_moe=True).moe_shape() == shape


def test_mixtral_8x7b_is_found_and_every_layer_is_sparse():
    shape = find_model("mixtral 8x7b", allow_moe=True).moe_shape()
    assert (shape.moe_layer_count, shape.expert_ffn, shape.kv_heads) == (32, 14336, 8)


def _document() -> dict:
    return json.loads(CATALOG_PATH.read_text(encoding="utf-8"))


def _moe(document: dict) -> dict:
    """DeepSeek-V3's entry of a document."""
    return next(entry for entry in document["models"] if entry["name"] == "DeepSeek-V3")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d["models"][0].update(kv_heads=0), "kv_heads"),
        (lambda d: d["models"][0].update(layers=80.5), "layers"),
        (lambda d: d["models"][0].update(mlp_kind="swiglu"), "mlp_kind"),
        (lambda d: d["models"][0].update(source=" "), "source"),
        (lambda d: d["models"][1].update(name="llama-2-7b"), "twice"),
        (lambda d: d.update(schema=2), "schema"),
        (lambda d: _moe(d).update(experts_per_token=300), "experts_per_token"),
        (lambda d: _moe(d).update(experts=0), "experts"),
        (lambda d: _moe(d).update(attention="mha"), "attention"),
        (lambda d: _moe(d).update(kv_lora_rank=0), "kv_lora_rank"),
        (lambda d: _moe(d).update(dense_layers=62), "dense_layers"),
        (lambda d: _moe(d).pop("active_params"), "active_params"),
        (lambda d: _moe(d).update(active_params_counts="some"), "active_params_counts"),
        (lambda d: _moe(d).update(experts=1, shared_experts=0), "experts"),
    ],
)
def test_a_broken_data_file_is_refused(change, problem):
    document = copy.deepcopy(_document())
    change(document)
    with pytest.raises(ValueError, match=problem):
        parse_catalog(document)


def test_every_entry_gives_every_shape_field():
    for entry in _document()["models"]:
        assert set(SHAPE_FIELDS) <= set(entry), entry["name"]
