// MemoryHub dashboard helpers: highlight the current nav item; refresh fragments by polling
// (slower when the tab is hidden). Charts are drawn by Plotly from figures built in Python.
(function () {
  "use strict";
  const path = window.location.pathname;
  document.querySelectorAll(".mainnav a").forEach(function (a) {
    const href = a.getAttribute("href");
    if (href && href !== "/" && path.startsWith(href)) a.classList.add("active");
  });

  // <div data-refresh-url="/fragment/" data-refresh-seconds="15"> is re-fetched and replaced.
  function schedule(el) {
    const base = parseInt(el.dataset.refreshSeconds || "15", 10) * 1000;
    const delay = document.hidden ? base * 4 : base;
    setTimeout(function () {
      fetch(el.dataset.refreshUrl, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
        .then(function (html) { el.innerHTML = html; el.classList.remove("refresh-error"); })
        .catch(function () { el.classList.add("refresh-error"); })
        .finally(function () { schedule(el); });
    }, delay);
  }
  document.querySelectorAll("[data-refresh-url]").forEach(schedule);

  // Plotly figures: <div class="chart" data-figure='{"data":..., "layout":...}'>
  window.MemoryHub = window.MemoryHub || {};
  window.MemoryHub.drawCharts = function (root) {
    if (!window.Plotly) return;
    (root || document).querySelectorAll("[data-figure]").forEach(function (el) {
      const fig = JSON.parse(el.dataset.figure);
      window.Plotly.newPlot(el, fig.data, fig.layout || {}, { displaylogo: false, responsive: true });
      if (el.dataset.drilldown) {
        el.on("plotly_click", function (ev) {
          const p = ev.points && ev.points[0];
          if (p && p.customdata) window.location.href = Array.isArray(p.customdata) ? p.customdata[0] : p.customdata;
        });
      }
    });
  };
  document.addEventListener("DOMContentLoaded", function () { window.MemoryHub.drawCharts(document); });
})();
