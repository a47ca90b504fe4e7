// Charts of the hub's short history (hub/ui/history.py) with the vendored uPlot.
// Each element `.chart[data-src]` gets a line chart of the series its `data-fields` name
// (per device class), redrawn every 15 s (the sampling interval: time moves on even when nothing
// changes) and whenever the page's live block was refreshed (live.js: something the page shows
// changed, so the chart's fresh sample shows it at once). No inline script or style: the CSP
// allows none.
(function () {
  "use strict";
  var COLOURS = ["#1f77b4", "#9467bd", "#2ca02c", "#d62728", "#ff7f0e", "#17becf", "#8c564b"];

  function columns(data, fields) {
    var picked = data.series.filter(function (s) { return fields.indexOf(s.field) >= 0; });
    return {
      names: picked.map(function (s) { return s["class"] + " " + s.field; }),
      rows: [data.times].concat(picked.map(function (s) { return s.values; })),
    };
  }

  // At least the last five minutes: uPlot spreads a lone sample over a day or more.
  function span(u, times) {
    if (!times.length) { return; }
    var last = times[times.length - 1];
    u.setScale("x", { min: Math.min(times[0], last - 300), max: last + 5 });
  }

  function draw(el) {
    var fields = (el.dataset.fields || "").split(",");
    fetch(el.dataset.src, { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.json(); })
      .then(function (data) {
        var c = columns(data, fields);
        if (el.uplot) { el.uplot.setData(c.rows); span(el.uplot, c.rows[0]); return; }
        el.textContent = "";
        var series = [{}].concat(c.names.map(function (name, i) {
          var quota = name.slice(-6) === " quota";
          return { label: name, stroke: COLOURS[i % COLOURS.length], width: 2, dash: quota ? [6, 4] : undefined };
        }));
        el.uplot = new uPlot({
          title: el.dataset.title || "",
          width: Math.max(400, Math.min(1000, el.clientWidth || 800)),
          height: 240,
          series: series,
          axes: [{}, { label: "GPUs" }],
          scales: { y: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } },
        }, c.rows, el);
        span(el.uplot, c.rows[0]);
        el.dataset.series = String(c.names.length);
        el.dataset.samples = String(data.times.length);
      })
      .catch(function (e) {
        if (!el.uplot) { el.textContent = "no history yet (" + e.message + ")"; }
      });
  }

  function drawAll() {
    document.querySelectorAll(".chart[data-src]").forEach(draw);
  }
  document.addEventListener("DOMContentLoaded", function () {
    drawAll();
    setInterval(drawAll, 15000);
    document.body.addEventListener("htmx:afterSettle", drawAll);
  });
})();
