// Queue a pool's totals recompute on the Celery worker and poll until its result arrives.
(function () {
  function csrfToken() {
    const match = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }
  async function poll(url, output) {
    for (let attempt = 0; attempt < 120; attempt++) {
      const response = await fetch(url, { credentials: "same-origin" });
      const body = await response.json();
      if (body.status === "SUCCESS") {
        output.textContent = "Worker: " + body.result.cards + " cards, " + body.result.peak_pflops + " PFLOPS";
        return;
      }
      if (body.status === "FAILURE") { output.textContent = "Worker failed: " + JSON.stringify(body.result); return; }
      output.textContent = "Worker: " + body.status.toLowerCase() + "…";
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    output.textContent = "No worker answered in 60 s. Is the Celery worker running?";
  }
  document.querySelectorAll("button.recompute").forEach(function (button) {
    button.addEventListener("click", async function () {
      const output = document.getElementById("task-" + button.dataset.pool);
      output.textContent = "Queued…";
      const response = await fetch("/api/v1/pools/" + button.dataset.pool + "/recompute-totals/", {
        method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrfToken() },
      });
      if (!response.ok) { output.textContent = "Refused (" + response.status + ")"; return; }
      const body = await response.json();
      poll("/api/v1/tasks/" + body.task_id + "/", output);
    });
  });
})();
