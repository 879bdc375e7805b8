// What-if panels (planner, inference): as a slider moves, POST the panel's payload to an
// estimate endpoint (session auth + CSRF token, debounced), keep only the newest answer and
// hand it to the page's show(); the note says what happened (an aria-live region).
// A refused value (the page's own check or the API's 400) blanks the numbers, which no
// longer match the inputs, and puts each field's message in words next to that field.
window.fleetwiseWhatIf = function (panel, endpoint, payload, show) {
  const csrf = panel.querySelector('input[name="csrfmiddlewaretoken"]').value;
  const note = panel.querySelector("[data-whatif-note]");
  let timer = null;
  let sequence = 0;

  function labelOf(name) {
    const input = panel.querySelector('[name="' + name + '"]');
    const label = input && panel.querySelector('label[for="' + input.id + '"]');
    const words = label ? label.firstChild.textContent : name.replace(/_/g, " ");
    return words.replace(/[:\s]+$/, "");
  }

  function clearErrors() {
    panel.querySelectorAll("[data-field-error]").forEach(function (node) { node.remove(); });
    panel.querySelectorAll('[aria-invalid="true"]').forEach(function (input) {
      input.removeAttribute("aria-invalid");
      input.removeAttribute("aria-describedby");
    });
  }

  // errors: {field: message or [messages]} as DRF answers; "detail" and non-field keys too.
  function refuse(errors) {
    clearErrors();
    panel.querySelectorAll("[data-result]").forEach(function (node) { node.textContent = "—"; });
    const sentences = [];
    Object.keys(errors).forEach(function (name) {
      const message = [].concat(errors[name]).join(" ");
      const input = panel.querySelector('[name="' + name + '"]');
      if (input) {
        const node = document.createElement("ul"); // the forms' error style (app.css)
        const item = document.createElement("li");
        node.className = "errorlist";
        node.id = "whatif-error-" + name;
        node.dataset.fieldError = name;
        item.textContent = message;
        node.appendChild(item);
        input.insertAdjacentElement("afterend", node);
        input.setAttribute("aria-invalid", "true");
        input.setAttribute("aria-describedby", node.id);
      }
      const known = name !== "detail" && name !== "non_field_errors";
      sentences.push(known ? labelOf(name) + ": " + message : message);
    });
    note.textContent = "Not computed. " + sentences.join(" ");
  }

  function estimate() {
    const body = payload(note); // {errors: {...}}: the page refused the input itself
    if (body === null) { return; }
    if (body.errors) { refuse(body.errors); return; }
    const mine = ++sequence;
    note.textContent = "Recomputing…";
    fetch(endpoint, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(body),
    })
      .then(function (response) {
        return response.json().then(function (json) { return { ok: response.ok, json: json }; });
      })
      .then(function (answer) {
        if (mine !== sequence) { return; } // a newer request is on its way
        if (answer.ok) { clearErrors(); show(answer.json, note); } else { refuse(answer.json); }
      })
      .catch(function (error) {
        refuse({ detail: "Could not recompute (" + error.message + ")." });
      });
  }

  panel.addEventListener("input", function (event) {
    const output = panel.querySelector('[data-output="' + event.target.name + '"]');
    if (output) { output.textContent = event.target.value; }
    window.clearTimeout(timer);
    timer = window.setTimeout(estimate, 250);
  });
  panel.addEventListener("submit", function (event) { event.preventDefault(); estimate(); });
};
