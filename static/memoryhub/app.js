// MemoryHub dashboard helpers: highlight the current nav item; refresh fragments by polling
// (four times slower while the tab is hidden, at once when it comes back); draw Plotly figures
// built in Python (memoryhub/figures.py) and follow a point's customdata URL on click.
(function () {
  "use strict";
  const path = window.location.pathname;
  document.querySelectorAll(".mainnav a").forEach(function (a) {
    const href = a.getAttribute("href");
    if (href && href !== "/" && path.startsWith(href)) a.classList.add("active");
  });

  window.MemoryHub = window.MemoryHub || {};

  // --- charts -----------------------------------------------------------------------------
  function chartMessage(el, text, cls) {
    el.innerHTML = "";
    const p = document.createElement("div");
    p.className = cls;
    p.textContent = text;
    el.appendChild(p);
  }

  // Charts are drawn one at a time, each in its own task, so the page is usable before the last one is
  // drawn; each shows its "Loading…" placeholder until then.
  window.MemoryHub.drawCharts = function (root) {
    const queue = Array.prototype.slice.call((root || document).querySelectorAll("[data-figure]"));
    (function next() {
      const el = queue.shift();
      if (!el) return;
      drawChart(el);
      setTimeout(next, 16);
    })();
  };

  function drawChart(el) {
    if (!window.Plotly) {
      chartMessage(el, "Charts could not be loaded (plotly.min.js is missing).", "chart-error");
      return;
    }
    let fig;
    try {
      fig = JSON.parse(el.dataset.figure);
    } catch (err) {
      chartMessage(el, "This chart's data could not be read.", "chart-error");
      return;
    }
    el.innerHTML = "";
    window.Plotly.newPlot(el, fig.data, fig.layout || {}, { displaylogo: false, responsive: true })
      .then(function () {
        el.dataset.drawn = "1";
        if (el.dataset.drilldown) {
          el.on("plotly_click", function (ev) {
            const p = ev.points && ev.points[0];
            const url = p && (Array.isArray(p.customdata) ? p.customdata[0] : p.customdata);
            if (url) window.location.href = url;
          });
        }
      })
      .catch(function () { chartMessage(el, "This chart could not be drawn.", "chart-error"); });
  }

  function purgeCharts(root) {
    if (!window.Plotly) return;
    root.querySelectorAll(".js-plotly-plot").forEach(function (el) { window.Plotly.purge(el); });
  }

  // --- fragment polling -------------------------------------------------------------------
  // <div data-refresh-url="/fragment/" data-refresh-seconds="15"> is re-fetched and replaced.
  const timers = new Map();

  function refresh(el) {
    if (el.dataset.busy) return;
    el.dataset.busy = "1";
    el.classList.add("refreshing");
    fetch(el.dataset.refreshUrl, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (r) {
        if (r.redirected && r.url.indexOf("/accounts/login/") !== -1) throw new Error("logged out");
        if (!r.ok) throw new Error(r.status);
        return r.text();
      })
      .then(function (html) {
        purgeCharts(el);
        el.innerHTML = html;
        el.classList.remove("refresh-error");
        window.MemoryHub.drawCharts(el);
      })
      .catch(function () { el.classList.add("refresh-error"); })
      .finally(function () {
        delete el.dataset.busy;
        el.classList.remove("refreshing");
        schedule(el);
      });
  }

  function schedule(el) {
    const base = parseInt(el.dataset.refreshSeconds || "15", 10) * 1000;
    const delay = document.hidden ? base * 4 : base;
    clearTimeout(timers.get(el));
    timers.set(el, setTimeout(function () { refresh(el); }, delay));
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) {
      document.querySelectorAll("[data-refresh-url]").forEach(function (el) {
        clearTimeout(timers.get(el));
        refresh(el);
      });
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    window.MemoryHub.drawCharts(document);
    document.querySelectorAll("[data-refresh-url]").forEach(schedule);
  });
})();
