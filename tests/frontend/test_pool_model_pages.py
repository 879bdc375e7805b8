"""Pools that name their catalog model, on the pages (issue #32): the pool page names the model
with its total and active parameters, and the analysis pages show which parameter counts each
pool's MFU (or, for a serving pool, MBU) used, next to the figure."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from django.utils.html import escape

from accounting.models import ServingLoad
from engine.model_catalog import find_model
from tests.support.builders import add_h100_pool, alpha_cluster
from tests.support.inline import finished_analysis

pytestmark = pytest.mark.django_db

V3 = "DeepSeek-V3"
QWEN = "Qwen3-235B-A22B"


def _page(client, user, url: str) -> str:
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def _details(html: str) -> str:
    return html[html.index('id="details-heading"') :]


def test_the_pool_page_names_a_mixture_with_its_total_and_active_parameters(client, viewer):
    pool = add_h100_pool(alpha_cluster(), "v3", nodes=8, model_name=V3)
    html = _details(_page(client, viewer, f"/inventory/pools/{pool.pk}/"))
    # DeepSeek-V3: 671B total parameters, 37B activated per token (DeepSeek-AI, "DeepSeek-V3
    # Technical Report", arXiv:2412.19437, abstract): the catalog's published counts.
    assert escape("DeepSeek-V3 (671 B total · 37 B active)") in html
    assert "active parameters" in html


def test_a_dense_named_pool_shows_one_count_and_an_unnamed_pool_says_none(client, viewer):
    cluster = alpha_cluster()
    dense = add_h100_pool(cluster, "llama", model_name="Llama-3.1-70B")
    unnamed = add_h100_pool(cluster, "plain")
    html = _details(_page(client, viewer, f"/inventory/pools/{dense.pk}/"))
    params = find_model("Llama-3.1-70B").params
    assert f"Llama-3.1-70B ({params / 1e9:,.4g} B)" in html
    assert "total ·" not in html
    assert "none named" in _details(_page(client, viewer, f"/inventory/pools/{unnamed.pk}/"))


def test_a_name_the_catalog_no_longer_holds_says_so(client, viewer):
    pool = add_h100_pool(alpha_cluster(), "gone")
    type(pool).objects.filter(pk=pool.pk).update(model_name="Retired-Model-7B")  # no clean()
    html = _details(_page(client, viewer, f"/inventory/pools/{pool.pk}/"))
    assert "Retired-Model-7B (no longer in the model catalog" in html


def test_the_analysis_pages_show_the_training_counts_next_to_mfu(client, viewer):
    cluster = alpha_cluster()
    pool = add_h100_pool(cluster, "v3", nodes=8, model_name=V3)
    analysis = finished_analysis("cluster", cluster.pk)
    row = next(r for r in analysis.results["pools"] if r["pool"] == "v3")
    params = row["training_params"]
    assert params.startswith("active 37.6 B of 671 B, catalog DeepSeek-V3")
    # The pools table: in the MFU cell of the pool's row; the unnamed pool's row has none.
    html = _page(client, viewer, f"/analyses/{analysis.pk}/")
    table = html[html.index('id="pools-heading"') :]
    start = table.index('<th scope="row">v3</th>')
    assert escape(params) in table[start : table.index("</tr>", start)]
    start = table.index('<th scope="row">h100</th>')
    assert "params-provenance" not in table[start : table.index("</tr>", start)]
    # The pool's waterfall table: on the MFU step.
    html = _page(client, viewer, f"/analyses/{analysis.pk}/?scope=pool-{pool.pk}")
    factor_table = html[html.index('class="factor-table"') :]
    factor_table = factor_table[: factor_table.index("</table>")]
    mfu_step = next(tr for tr in factor_table.split("<tr") if escape(params) in tr)
    assert "MFU" in mfu_step
    # The whole analysis's waterfall is no pool's: no counts there.
    html = _page(client, viewer, f"/analyses/{analysis.pk}/")
    assert 'class="hint params-provenance"' not in html[: html.index('id="pools-heading"')]
    # The pool's drill-down page.
    html = _page(client, viewer, f"/analyses/{analysis.pk}/pools/{pool.pk}/")
    assert escape(params) in html


def test_a_serving_pool_shows_its_serving_counts_next_to_mbu(client, viewer):
    cluster = alpha_cluster()
    pool = add_h100_pool(cluster, "qwen", purpose="inference")
    end = timezone.now()
    ServingLoad.objects.create(
        pool=pool,
        period_start=end - dt.timedelta(days=400),
        period_end=end,
        served_tokens_per_s=1000.0,
        weight_precision="fp8",
        kv_precision="fp8",
        input_tokens=1000,
        output_tokens=300,
        model_name=QWEN,
        model_params=235e9,
    )
    analysis = finished_analysis("cluster", cluster.pk)
    row = next(r for r in analysis.results["pools"] if r["pool"] == "qwen")
    params = row["serving_params"]
    assert params.startswith("active ") and f"of 235 B, catalog {QWEN}" in params
    html = _page(client, viewer, f"/analyses/{analysis.pk}/")
    table = html[html.index('id="pools-heading"') :]
    start = table.index('<th scope="row">qwen</th>')
    cells = table[start : table.index("</tr>", start)]
    assert "MBU" in cells and escape(params) in cells
