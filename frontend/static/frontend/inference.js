// Inference tab: the what-if panel (whatif.js) sends the recommended card model with the
// slider values (traffic, context length) to the inference estimate and shows cards, TPOT,
// tokens/s and cost per million tokens in its currency, with the serving engine it used.
(function () {
  const panel = document.querySelector("form[data-inference-whatif]");
  const dataNode = document.getElementById("inference-whatif-data");
  if (!panel || !dataNode) { return; }
  const config = JSON.parse(dataNode.textContent);
  const out = function (name) { return panel.querySelector('[data-result="' + name + '"]'); };
  const number = function (digits) {
    return new Intl.NumberFormat("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  };

  function payload() {
    const body = Object.assign({}, config.base);
    config.sliders.forEach(function (slider) {
      body[slider.name] = Number(panel.querySelector('input[name="' + slider.name + '"]').value);
    });
    return body;
  }

  function show(result, note) {
    if (!result.feasible) {
      ["cards", "tpot_ms", "ttft_p95_ms", "tokens_per_s", "cost"].forEach(function (name) { out(name).textContent = "—"; });
      note.textContent = "Cannot serve: " + result.reason;
      return;
    }
    out("cards").textContent = result.cards + " (" + result.replicas + " × TP" + result.tp + ")";
    out("tpot_ms").textContent = number(1).format(result.tpot_ms);
    // null: at this load the queue for a batch slot does not settle (docs/inference.md, 2a)
    out("ttft_p95_ms").textContent = result.ttft_p95_ms === null ? "—" : number(1).format(result.ttft_p95_ms);
    out("tokens_per_s").textContent = number(0).format(result.tokens_per_s);
    out("cost").textContent = result.cost_per_million_tokens === null ? "—" :
      number(3).format(result.cost_per_million_tokens) + " " + result.currency + " / M tokens";
    note.textContent = "What-if estimate on " + result.accelerator + " with " +
      result.engine_label + ": batch " + result.batch +
      " per replica, MBU " + number(2).format(result.mbu) + ".";
  }

  window.fleetwiseWhatIf(panel, config.endpoint, payload, show);
})();
