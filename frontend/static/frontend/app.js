// Small progressive enhancements; every page works without them.
(function () {
  // Move focus to an error summary so keyboard and screen-reader users hear what went wrong.
  const summary = document.querySelector(".error-summary");
  if (summary) { summary.focus(); }
})();
