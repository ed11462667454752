// MemoryHub dashboard helpers: highlight the current nav item; refresh fragments by polling
// (four times slower while the tab is hidden, at once when it comes back); draw Plotly figures
// built in Python (memoryhub/figures.py), follow a point's customdata URL on click, and offer the
// same drill-downs as a data table under each chart; keep a chart's zoom across refreshes
// (Plotly.react + uirevision); clamp long event content with a Show all / Show less button; and
// scroll to and highlight the row of "go to seq".
(function () {
  "use strict";
  const path = window.location.pathname;
  document.querySelectorAll(".mainnav a").forEach(function (a) {
    const href = a.getAttribute("href");
    if (href && href !== "/" && path.startsWith(href)) {
      a.classList.add("active");
      a.setAttribute("aria-current", "page");
    }
  });

  window.MemoryHub = window.MemoryHub || {};

  // --- charts -----------------------------------------------------------------------------
  function chartMessage(el, text, cls) {
    delete el.dataset.pending;
    el.innerHTML = "";
    const p = document.createElement("div");
    p.className = cls;
    p.textContent = text;
    el.appendChild(p);
  }

  // Charts are drawn one at a time, each in its own task, so the page is usable before the last one is
  // drawn; each shows its "Loading…" placeholder until then. A chart already drawn keeps
  // data-drawn while it is redrawn with new data; data-pending says that redraw has not landed
  // yet (until then its layout is the new figure's, before Plotly restores the user's zoom).
  window.MemoryHub.drawCharts = function (root, done) {
    const queue = Array.prototype.slice.call((root || document).querySelectorAll("[data-figure]"));
    queue.forEach(function (el) { if (el.dataset.drawn === "1") el.dataset.pending = "1"; });
    (function next() {
      const el = queue.shift();
      if (!el) {
        if (done) done();
        return;
      }
      drawChart(el);
      setTimeout(next, 16);
    })();
  };

  const PLOT_CONFIG = { displaylogo: false, responsive: true };

  // The chart's title is drawn as HTML above the plot, not inside it, so Plotly's mode bar (top
  // right, on hover) never covers it and a long title wraps instead of running under the bar.
  function liftTitle(el, layout) {
    const title = layout.title && (typeof layout.title === "string" ? layout.title : layout.title.text);
    if (!title) return layout;
    layout.title = { text: "" };
    let cap = el.previousElementSibling;
    if (!cap || !cap.classList.contains("chart-title")) {
      cap = document.createElement("div");
      cap.className = "chart-title";
      el.parentNode.insertBefore(cap, el);
    }
    cap.textContent = title.replace(/<[^>]+>/g, "");
    layout.margin = Object.assign({}, layout.margin || {}, { t: Math.max(28, ((layout.margin || {}).t || 40) - 16) });
    return layout;
  }

  function readFigure(el) {
    const fig = JSON.parse(el.dataset.figure);
    const layout = liftTitle(el, fig.layout || {});
    // A user's zoom and pan survive Plotly.react on refresh as long as uirevision stays the same.
    layout.uirevision = el.id || "chart";
    return { data: fig.data, layout: layout };
  }

  // Mode-bar buttons are mouse conveniences; keyboard users get the data table under the chart.
  function untabModebar(el) {
    el.querySelectorAll(".modebar a, .modebar button, .modebar [tabindex]").forEach(function (b) {
      b.setAttribute("tabindex", "-1");
    });
  }

  const TABLE_ROWS = 60;

  // A <details> table under each chart: every point with its value, and its drill-down link when the
  // chart has one, so the drill-down is reachable without a mouse.
  function dataTable(el, fig) {
    const holder = el.parentNode;
    let box = holder.querySelector(":scope > details.chart-data[data-for='" + el.id + "']");
    const wasOpen = box && box.open;
    if (box) box.remove();
    const rows = [];
    (fig.data || []).forEach(function (trace) {
      const xs = trace.x || [], ys = trace.y || [], cd = trace.customdata || [];
      for (let i = 0; i < xs.length; i++) {
        if (ys[i] === null || ys[i] === undefined) continue;
        const url = Array.isArray(cd[i]) ? cd[i][0] : cd[i];
        rows.push({ series: trace.name || "", x: xs[i], y: ys[i], url: typeof url === "string" ? url : "" });
      }
    });
    if (!rows.length) return;
    const shown = rows.length > TABLE_ROWS ? rows.slice(rows.length - TABLE_ROWS) : rows;
    box = document.createElement("details");
    box.className = "chart-data";
    box.dataset.for = el.id;
    box.open = !!wasOpen;
    const sum = document.createElement("summary");
    sum.textContent = "Data table" + (el.dataset.drilldown ? " with links" : "") +
      (rows.length > shown.length ? " (last " + shown.length + " of " + rows.length + " points)" : "");
    box.appendChild(sum);
    const wrap = document.createElement("div");
    wrap.className = "table-wrap";
    const table = document.createElement("table");
    table.className = "table";
    const head = table.createTHead().insertRow();
    ["Series", "At", "Value"].forEach(function (h) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = h;
      head.appendChild(th);
    });
    const body = table.createTBody();
    shown.forEach(function (r) {
      const tr = body.insertRow();
      tr.insertCell().textContent = r.series;
      const at = tr.insertCell();
      if (r.url) {
        const a = document.createElement("a");
        a.href = r.url;
        a.textContent = String(r.x);
        at.appendChild(a);
      } else {
        at.textContent = String(r.x);
      }
      const v = tr.insertCell();
      v.className = "num";
      v.textContent = typeof r.y === "number" ? r.y.toLocaleString() : String(r.y);
    });
    wrap.appendChild(table);
    box.appendChild(wrap);
    holder.insertBefore(box, el.nextSibling);
  }

  function afterDraw(el, fig) {
    el.dataset.drawn = "1";
    delete el.dataset.pending;
    // Plotly puts interactive layers inside: the chart is a labelled group, not an image.
    if (el.getAttribute("role") === "img") el.setAttribute("role", "group");
    untabModebar(el);
    dataTable(el, fig);
  }

  // Which axes the user zoomed or panned (Plotly reports "xaxis.range[0]"…), and which they reset:
  // a double-click emits plotly_doubleclick, then the reset's own ranges (or "autorange"), which
  // are no zoom. A refresh keeps exactly the zoomed ones.
  function trackZoom(el) {
    el.__zoomed = {};
    el.on("plotly_doubleclick", function () { el.__resetting = true; });
    el.on("plotly_relayout", function (change) {
      const reset = el.__resetting === true;
      el.__resetting = false;
      Object.keys(change || {}).forEach(function (key) {
        const m = /^([xy]axis\d*)\.(range|autorange)/.exec(key);
        if (m) el.__zoomed[m[1]] = !reset && m[2] === "range";
      });
    });
  }

  function drawChart(el) {
    if (!window.Plotly) {
      chartMessage(el, "Charts could not be loaded (plotly.min.js is missing).", "chart-error");
      return;
    }
    let fig;
    try {
      fig = readFigure(el);
    } catch (err) {
      chartMessage(el, "This chart's data could not be read.", "chart-error");
      return;
    }
    // Redrawn after a refresh: update in place, keeping what the user set (uirevision: legend
    // toggles and the like). Axis ranges are ours to keep: a window that ends "now" moves on every
    // refresh, and Plotly would either drop a zoom for the new range or, after a double-click
    // reset, keep the old window for good. So each redraw applies the new figure's ranges (a new
    // axis uirevision), except on the axes the user zoomed or panned, which keep theirs.
    if (el.dataset.drawn === "1" && el.classList.contains("js-plotly-plot")) {
      el.__draws = (el.__draws || 0) + 1;
      Object.keys(fig.layout).concat(["xaxis", "yaxis"]).forEach(function (axis) {
        if (!/^[xy]axis\d*$/.test(axis)) return;
        const current = el.layout && el.layout[axis];
        const kept = (el.__zoomed || {})[axis] && current && current.range;
        fig.layout[axis] = Object.assign(
          {}, fig.layout[axis], { uirevision: el.__draws },
          kept ? { range: current.range.slice(), autorange: false } : {}
        );
      });
      window.Plotly.react(el, fig.data, fig.layout, PLOT_CONFIG)
        .then(function () { afterDraw(el, fig); })
        .catch(function () { chartMessage(el, "This chart could not be drawn.", "chart-error"); });
      return;
    }
    el.innerHTML = "";
    window.Plotly.newPlot(el, fig.data, fig.layout, PLOT_CONFIG)
      .then(function () {
        afterDraw(el, fig);
        trackZoom(el);
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

  // Replace a refreshed fragment, but keep each drawn chart's element (and so its zoom and pan):
  // the new figure JSON moves onto the old element, which drawChart then updates with Plotly.react.
  function swapKeepingCharts(el, html) {
    const tpl = document.createElement("template");
    tpl.innerHTML = html;
    const kept = new Set();
    tpl.content.querySelectorAll("[data-figure][id]").forEach(function (fresh) {
      const old = el.querySelector("#" + CSS.escape(fresh.id));
      if (!old || old.dataset.drawn !== "1") return;
      old.dataset.figure = fresh.dataset.figure;
      fresh.replaceWith(old);
      kept.add(old);
    });
    el.querySelectorAll(".js-plotly-plot").forEach(function (c) {
      if (!kept.has(c) && window.Plotly) window.Plotly.purge(c);
    });
    el.replaceChildren(tpl.content);
  }

  // --- long content: clamp in place, expand/collapse with a button -------------------------------
  const CLAMP_PX = 120;

  function enhance(root) {
    (root || document).querySelectorAll("[data-expandable]:not([data-ready])").forEach(function (box) {
      box.dataset.ready = "1";
      const body = box.querySelector(".expandable-body");
      if (!body || body.scrollHeight <= CLAMP_PX * 1.3 || body.querySelector("mark")) return;
      box.classList.add("clamped");
      const btn = document.createElement("button");
      btn.type = "button";
      btn.className = "expand-toggle";
      btn.setAttribute("aria-expanded", "false");
      btn.textContent = "Show all";
      btn.addEventListener("click", function () {
        const open = box.classList.toggle("clamped") === false;
        btn.setAttribute("aria-expanded", open ? "true" : "false");
        btn.textContent = open ? "Show less" : "Show all";
      });
      box.appendChild(btn);
    });
  }

  // --- "go to seq": ?seq=N opens the page holding row N; scroll to it and highlight it -----------
  function goToSeq() {
    const seq = new URLSearchParams(window.location.search).get("seq");
    if (!seq || !/^[0-9]+$/.test(seq)) return;
    const row = document.getElementById("event-" + seq);
    if (!row) return;
    document.querySelectorAll("tr.target").forEach(function (r) { if (r !== row) r.classList.remove("target"); });
    row.classList.add("target");
    if (window.location.hash !== "#event-" + seq) {
      history.replaceState(null, "", window.location.pathname + window.location.search + "#event-" + seq);
    }
    row.scrollIntoView({ block: "center" });
    // Charts above the table are drawn after this and push the row down: keep it centred while
    // the page settles (3 s at most), unless the reader scrolls first.
    if (!window.ResizeObserver) return;
    let reading = false;
    const stop = function () { reading = true; };
    ["wheel", "touchstart", "keydown", "mousedown"].forEach(function (name) {
      window.addEventListener(name, stop, { once: true, passive: true });
    });
    const settle = new ResizeObserver(function () { if (!reading) row.scrollIntoView({ block: "center" }); });
    settle.observe(document.body);
    setTimeout(function () { settle.disconnect(); }, 3000);
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
        swapKeepingCharts(el, html);
        el.classList.remove("refresh-error");
        window.MemoryHub.drawCharts(el);
        enhance(el);
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

  // --- channel form: show only the fields the chosen kind uses ([data-kinds] on a field) ---------
  document.querySelectorAll("form#channel-form").forEach(function (form) {
    const kind = form.querySelector("select[name=kind]");
    if (!kind) return;
    function sync() {
      form.querySelectorAll(".field[data-kinds]").forEach(function (field) {
        field.hidden = field.getAttribute("data-kinds").split(" ").indexOf(kind.value) < 0;
      });
    }
    kind.addEventListener("change", sync);
    sync();
  });

  // --- copy buttons: [data-copy] names the element whose text (or data-copy-text) is copied ------
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    // http:// on a LAN host has no Clipboard API: copy through a selected, off-screen textarea.
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.left = "-9999px";
    document.body.appendChild(area);
    area.select();
    const ok = document.execCommand("copy");
    document.body.removeChild(area);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }
  document.addEventListener("click", function (ev) {
    const button = ev.target.closest("[data-copy]");
    if (!button) return;
    const source = document.querySelector(button.getAttribute("data-copy"));
    const text = button.getAttribute("data-copy-text") || (source ? source.textContent.trim() : "");
    const label = button.textContent;
    copyText(text).then(
      function () { button.textContent = "Copied"; },
      function () { button.textContent = "Select and copy"; }
    ).then(function () { setTimeout(function () { button.textContent = label; }, 1500); });
  });

  // A table that scrolls sideways (narrow screens) must be reachable by keyboard to be scrolled:
  // give it a tab stop while it overflows, and take it away when it no longer does.
  function focusableScrollers() {
    document.querySelectorAll(".table, .table-wrap, .table-scroll").forEach(function (el) {
      const scrolls = el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible";
      if (scrolls && !el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
        el.setAttribute("data-scroll-focus", "");
      } else if (!scrolls && el.hasAttribute("data-scroll-focus")) {
        el.removeAttribute("tabindex");
        el.removeAttribute("data-scroll-focus");
      }
    });
  }
  window.addEventListener("resize", focusableScrollers);

  document.addEventListener("DOMContentLoaded", function () {
    enhance(document);
    focusableScrollers();
    goToSeq();
    // Charts change the page's height as they draw: scroll to the row again once they are in.
    window.MemoryHub.drawCharts(document, function () { setTimeout(goToSeq, 50); });
    document.querySelectorAll("[data-refresh-url]").forEach(schedule);
  });
})();
