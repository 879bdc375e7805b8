// Page tools: copy buttons, time range (chart zoom → ?start=&end=) and drill-down clicks.
// Every page works without them: presets and drill-down targets are plain links too.
(function () {
  "use strict";
  const DAY_MS = 86400000;

  function isoDay(ms) { return new Date(ms).toISOString().slice(0, 10); }

  // "2024-07-03 12:00:00.5" → ms since the epoch, read as UTC (the pages' days are dates).
  function parseMs(text) { return Date.parse(String(text).replace(" ", "T").slice(0, 23) + "Z"); }

  document.querySelectorAll("[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      const field = document.querySelector(button.getAttribute("data-copy"));
      field.select();
      const done = function () { button.textContent = "Copied"; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(field.value).then(done, function () {});
      } else if (document.execCommand("copy")) {
        done();
      }
    });
  });

  const range = document.querySelector("[data-time-range]");

  function dateAxes(plot) {
    const layout = plot._fullLayout || {};
    return Object.keys(layout).filter(function (name) {
      return /^xaxis\d*$/.test(name) && layout[name].type === "date";
    });
  }

  // The page's period on every date axis, so a preset changes every chart's range.
  function showPeriod(plot) {
    if (!range || !range.dataset.start) { return; }
    const update = {};
    dateAxes(plot).forEach(function (axis) {
      update[axis + ".range"] = [range.dataset.start, range.dataset.end];
    });
    if (Object.keys(update).length) {
      plot._fwSettingRange = true;
      window.Plotly.relayout(plot, update).then(function () { plot._fwSettingRange = false; });
    }
  }

  // A zoom (drag) on a date axis reloads the page for that period, days rounded outwards.
  function onZoom(plot, event) {
    if (plot._fwSettingRange || !range) { return; }
    const axis = dateAxes(plot).find(function (name) {
      return event[name + ".range[0]"] !== undefined || event[name + ".range"] !== undefined;
    });
    if (!axis) { return; }
    const pair = event[axis + ".range"] || [event[axis + ".range[0]"], event[axis + ".range[1]"]];
    const startMs = parseMs(pair[0]);
    const endMs = parseMs(pair[1]);
    if (isNaN(startMs) || isNaN(endMs)) { return; }
    const start = isoDay(startMs);
    let endDay = Date.parse(isoDay(endMs) + "T00:00:00Z");
    if (endDay < endMs || endDay <= Date.parse(start + "T00:00:00Z")) { endDay += DAY_MS; }
    const url = new URL(window.location.href);
    url.searchParams.set("start", start);
    url.searchParams.set("end", isoDay(endDay));
    url.searchParams.delete("page");
    window.location.assign(url.toString());
  }

  // The drill-down target of a mark: its customdata, or the last URL-like item of it.
  function markUrl(point) {
    const data = point.customdata;
    const items = Array.isArray(data) ? data.slice().reverse() : [data];
    return items.find(function (item) {
      return typeof item === "string" && (item.charAt(0) === "/" || item.charAt(0) === "?");
    });
  }

  // The target keeps this page's period (and, on the same page, its other filters).
  function drillTarget(link) {
    const here = new URL(window.location.href);
    const target = new URL(link, here);
    here.searchParams.forEach(function (value, key) {
      const carried = key === "start" || key === "end" || target.pathname === here.pathname;
      if (carried && key !== "page" && !target.searchParams.has(key)) {
        target.searchParams.set(key, value);
      }
    });
    return target.toString();
  }

  function wire(plot) {
    if (typeof plot.on !== "function" || plot._fwWired) { return; }
    plot._fwWired = true;
    showPeriod(plot);
    plot.on("plotly_relayout", function (event) { onZoom(plot, event); });
    plot.on("plotly_click", function (event) {
      const link = event.points && event.points.length ? markUrl(event.points[0]) : null;
      if (link) { window.location.assign(drillTarget(link)); }
    });
  }

  function wireAll() { document.querySelectorAll(".plotly-graph-div").forEach(wire); }
  wireAll();
  window.addEventListener("load", wireAll);
  window.fleetwisePageTools = { wire: wire, drillTarget: drillTarget };
})();
