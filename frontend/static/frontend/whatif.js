// What-if panels (planner, inference): as a slider moves, POST the panel's payload to an
// estimate endpoint (session auth + CSRF token, debounced), keep only the newest answer and
// hand it to the page's show(); the note says what happened (an aria-live region).
window.fleetwiseWhatIf = function (panel, endpoint, payload, show) {
  const csrf = panel.querySelector('input[name="csrfmiddlewaretoken"]').value;
  const note = panel.querySelector("[data-whatif-note]");
  let timer = null;
  let sequence = 0;

  function estimate() {
    const body = payload(note); // null: the page refused the input and said why in the note
    if (body === null) { return; }
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
        if (answer.ok) { show(answer.json, note); } else { note.textContent = "Not computed: " + JSON.stringify(answer.json); }
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
};
