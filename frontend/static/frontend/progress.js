// Progress of a background job (analysis, plan, import): polls the job's API URL until it ends.
// Markup: <div class="job-progress" data-poll-url="/api/v1/analyses/5/" data-done-url="/analyses/5/">
//           <progress max="100" value="0"></progress> <span class="job-progress-text"></span></div>
// The API answers {"status": "queued|running|succeeded|failed", "progress": 0-100, "error": "..."}.
(function () {
  const LABELS = { queued: "Queued", running: "Running", succeeded: "Done", failed: "Failed" };

  function track(box) {
    const bar = box.querySelector("progress");
    const text = box.querySelector(".job-progress-text");
    const pollUrl = box.dataset.pollUrl;
    const doneUrl = box.dataset.doneUrl;
    const intervalMs = Number(box.dataset.intervalMs || 800);

    function show(job) {
      const percent = Math.max(0, Math.min(100, Number(job.progress || 0)));
      bar.value = job.status === "succeeded" ? 100 : percent;
      bar.setAttribute("aria-valuenow", String(bar.value));
      let label = (LABELS[job.status] || job.status) + " · " + bar.value + " %";
      if (job.status === "failed" && job.error) { label = "Failed: " + job.error; }
      text.textContent = label;
      box.dataset.status = job.status;
    }

    function poll() {
      fetch(pollUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) { throw new Error("HTTP " + response.status); }
          return response.json();
        })
        .then(function (job) {
          show(job);
          if (job.status === "succeeded") {
            box.dispatchEvent(new CustomEvent("job:done", { detail: job, bubbles: true }));
            if (doneUrl) { window.location.assign(doneUrl); }
          } else if (job.status === "failed") {
            box.dispatchEvent(new CustomEvent("job:failed", { detail: job, bubbles: true }));
          } else {
            window.setTimeout(poll, intervalMs);
          }
        })
        .catch(function (error) {
          text.textContent = "Could not read progress (" + error.message + "); retrying…";
          window.setTimeout(poll, intervalMs * 3);
        });
    }
    poll();
  }

  document.querySelectorAll(".job-progress[data-poll-url]").forEach(track);
})();
