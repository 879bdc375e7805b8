// Planner pages: show the fields that apply in the new-plan form, and the what-if panel
// (whatif.js), which sends the option with the slider values to the training estimate and
// shows days, card-hours, energy and cost.
(function () {
  // --- new-plan form: fixed degrees only with "Fixed degrees", cards or deadlines by mode ---
  function toggle(form, radioName, rules) {
    const radios = form.querySelectorAll('input[name="' + radioName + '"]');
    function apply() {
      const checked = form.querySelector('input[name="' + radioName + '"]:checked');
      const value = checked ? checked.value : "";
      rules.forEach(function (rule) {
        const box = form.querySelector(rule.selector);
        if (box) { box.hidden = rule.when !== value; }
      });
    }
    radios.forEach(function (radio) { radio.addEventListener("change", apply); });
    apply();
  }
  const planForm = document.querySelector("form.plan-form");
  if (planForm) {
    toggle(planForm, "parallelism", [{ selector: "[data-fixed-degrees]", when: "fixed" }]);
    const cardsBox = planForm.querySelector("#id_cards") && planForm.querySelector("#id_cards").closest(".field");
    const deadlineBox = planForm.querySelector("#id_deadline_days") && planForm.querySelector("#id_deadline_days").closest(".field");
    if (cardsBox && deadlineBox) {
      cardsBox.dataset.sizeCards = ""; deadlineBox.dataset.sizeDeadline = "";
      toggle(planForm, "size_mode", [
        { selector: "[data-size-cards]", when: "cards" },
        { selector: "[data-size-deadline]", when: "deadline" },
      ]);
    }
  }

  // --- what-if panel ---
  const panel = document.querySelector("form[data-whatif]");
  const dataNode = document.getElementById("whatif-data");
  if (!panel || !dataNode) { return; }
  const config = JSON.parse(dataNode.textContent);
  const out = function (name) { return panel.querySelector('[data-result="' + name + '"]'); };
  const number = function (digits) {
    return new Intl.NumberFormat("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  };

  // Checked here so a half-typed count never reaches the server (a 400 is a console error);
  // the range is the API's (the one limits table), so its 400 still names any other value.
  function payload() {
    const body = Object.assign({}, config.base);
    config.sliders.forEach(function (slider) {
      body[slider.name] = Number(panel.querySelector('input[name="' + slider.name + '"]').value);
    });
    body.cards = Number(panel.querySelector('input[name="cards"]').value);
    if (!Number.isInteger(body.cards) || body.cards < 1) {
      return { errors: { cards: "Must be a whole number of at least 1." } };
    }
    if (config.dp_degree && body.cards % config.dp_degree !== 0) {
      return { errors: { cards: "Must be a multiple of the plan's fixed DP degree (" + config.dp_degree + ")." } };
    }
    return body;
  }

  function show(result, note) {
    if (!result.feasible) {
      ["days", "card_hours", "energy", "cost"].forEach(function (name) { out(name).textContent = "—"; });
      note.textContent = "Does not fit: " + result.reason;
      return;
    }
    out("days").textContent = number(1).format(result.days);
    out("card_hours").textContent = number(0).format(result.card_hours);
    out("energy").textContent = number(0).format(result.energy_mwh.facility);
    out("cost").textContent = result.cost.total === null ? "—" : number(0).format(result.cost.total);
    note.textContent = "What-if estimate: " + (result.parallelism.tp || "?") + " × " +
      (result.parallelism.pp || "?") + " × " + (result.parallelism.dp || "?") + " split, effective utilization " +
      number(1).format(100 * result.factors.effective_utilization) + " %.";
  }

  window.fleetwiseWhatIf(panel, config.endpoint, payload, show);
})();
