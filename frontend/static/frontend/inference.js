// Inference tab: the what-if panel POSTs the recommended card model with the slider values
// (traffic, context length) to the inference estimate and shows cards, TPOT, tokens/s and
// cost per million tokens in an aria-live region.
(function () {
  const panel = document.querySelector("form[data-inference-whatif]");
  const dataNode = document.getElementById("inference-whatif-data");
  if (!panel || !dataNode) { return; }
  const config = JSON.parse(dataNode.textContent);
  const csrf = panel.querySelector('input[name="csrfmiddlewaretoken"]').value;
  const note = panel.querySelector("[data-whatif-note]");
  const out = function (name) { return panel.querySelector('[data-result="' + name + '"]'); };
  const number = function (digits) {
    return new Intl.NumberFormat("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  };
  let timer = null;
  let sequence = 0;

  function payload() {
    const body = Object.assign({}, config.base);
    config.sliders.forEach(function (slider) {
      body[slider.name] = Number(panel.querySelector('input[name="' + slider.name + '"]').value);
    });
    return body;
  }

  function show(result) {
    if (!result.feasible) {
      ["cards", "tpot_ms", "tokens_per_s", "cost"].forEach(function (name) { out(name).textContent = "—"; });
      note.textContent = "Cannot serve: " + result.reason;
      return;
    }
    out("cards").textContent = result.cards + " (" + result.replicas + " × TP" + result.tp + ")";
    out("tpot_ms").textContent = number(1).format(result.tpot_ms);
    out("tokens_per_s").textContent = number(0).format(result.tokens_per_s);
    out("cost").textContent = result.cost_per_million_tokens === null ? "—" : number(3).format(result.cost_per_million_tokens);
    note.textContent = "What-if estimate on " + result.accelerator + ": batch " + result.batch +
      " per replica, MBU " + number(2).format(result.mbu) + ".";
  }

  function estimate() {
    const mine = ++sequence;
    note.textContent = "Recomputing…";
    fetch(config.endpoint, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(payload()),
    })
      .then(function (response) {
        return response.json().then(function (json) { return { ok: response.ok, json: json }; });
      })
      .then(function (answer) {
        if (mine !== sequence) { return; } // a newer request is on its way
        if (answer.ok) { show(answer.json); } else { note.textContent = "Not computed: " + JSON.stringify(answer.json); }
      })
      .catch(function (error) { note.textContent = "Could not recompute (" + error.message + ")."; });
  }

  panel.addEventListener("input", function (event) {
    const output = panel.querySelector('[data-output="' + event.target.name + '"]');
    if (output) { output.textContent = event.target.value; }
    window.clearTimeout(timer);
    timer = window.setTimeout(estimate, 250);
  });
  panel.addEventListener("submit", function (event) { event.preventDefault(); estimate(); });
})();
