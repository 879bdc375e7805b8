// Usage import page: when the import fails, reload to show its bad lines and the retry button.
(function () {
  document.addEventListener("job:failed", function () { window.location.reload(); });
})();
