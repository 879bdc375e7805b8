// Small progressive enhancements; every page works without them.
(function () {
  // After a refused submit, focus (and show) the error summary: keyboard and screen-reader
  // users hear what went wrong, and its links lead to each field.
  const summary = document.querySelector(".error-summary");
  if (summary) {
    if (!summary.hasAttribute("tabindex")) { summary.setAttribute("tabindex", "-1"); }
    summary.focus();  // scrolls it into view when it is off screen
  }

  // On phones the navigation folds behind a Menu button (without JavaScript it stays open).
  const header = document.querySelector(".topbar");
  const toggle = header && header.querySelector(".nav-toggle");
  if (toggle) {
    header.classList.add("nav-collapsible");
    toggle.hidden = false;
    toggle.addEventListener("click", function () {
      const open = header.classList.toggle("nav-open");
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
    });
  }

  // Charts follow the page's theme: colours come from the CSS variables of app.css.
  const dark = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  function themeOf() {
    const css = getComputedStyle(document.documentElement);
    const value = function (name) { return css.getPropertyValue(name).trim(); };
    return { surface: value("--surface"), ink: value("--ink"), line: value("--line") };
  }
  function themeChart(div, theme) {
    const update = { paper_bgcolor: theme.surface, plot_bgcolor: theme.surface, "font.color": theme.ink,
      "legend.bgcolor": theme.surface, "title.font.color": theme.ink };
    Object.keys(div.layout || {}).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) {
        update[key + ".gridcolor"] = theme.line;
        update[key + ".linecolor"] = theme.line;
        update[key + ".zerolinecolor"] = theme.line;
      }
    });
    window.Plotly.relayout(div, update);
  }
  function themeCharts() {
    if (!window.Plotly) { return; }
    const theme = themeOf();
    document.querySelectorAll(".js-plotly-plot").forEach(function (div) { themeChart(div, theme); });
  }
  if (dark) {
    window.addEventListener("load", function () { if (dark.matches) { themeCharts(); } });
    if (dark.addEventListener) { dark.addEventListener("change", themeCharts); }
  }
})();
