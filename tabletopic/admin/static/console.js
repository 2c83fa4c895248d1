// The console's charts: every element with class "chart" names a series prefix (data-prefix); its
// series come from /console/series (the node's in-memory ring) and are drawn with uPlot, refreshed
// every sampling interval. Elements replaced by an htmx refresh are drawn again.
(function () {
  "use strict";
  const COLORS = ["#2f6fdf", "#e0662f", "#2a9d5b", "#9b4dca", "#c23b5a", "#1f9fb0", "#8a7a20", "#555"];
  const plots = new WeakMap();

  function human(value, unit) {
    if (value === null || value === undefined) return "";
    const bytes = unit === "B" || unit === "B/s";
    const base = bytes ? 1024 : 1000;
    const names = bytes ? ["", "Ki", "Mi", "Gi", "Ti"] : ["", "k", "M", "G", "T"];
    let v = Math.abs(value), i = 0;
    while (v >= base && i < names.length - 1) { v /= base; i++; }
    const shown = (value < 0 ? -v : v).toFixed(v < 10 && i > 0 ? 1 : 0);
    const suffix = bytes ? names[i] + unit : names[i] + (unit ? " " + unit : "");
    return shown + (suffix ? " " + suffix.trim() : "");
  }

  function label(name, prefix) {
    const rest = name.slice(prefix.length).replace(/^\|/, "").replace(/_per_s$/, "/s");
    return rest ? rest.replace(/\|lag$/, "").replace(/\|(\d+)$/, "[$1]").replace(/\|(\d+)\|/, "[$1] ") : name.split("|").pop();
  }

  async function draw(el) {
    const prefix = el.dataset.prefix;
    const response = await fetch("/console/series?prefix=" + encodeURIComponent(prefix));
    const data = await response.json();
    const match = el.dataset.match;  // optional: only series whose name contains this
    const names = Object.keys(data).filter((k) => k !== "t" && (!match || k.includes(match)));
    const columns = [data.t, ...names.map((n) => data[n])];
    el.dataset.series = String(names.length);
    el.dataset.points = String(names.reduce((n, k) => n + data[k].filter((v) => v !== null).length, 0));
    const key = names.join("\n");
    const existing = plots.get(el);
    if (existing && existing.key === key) { existing.plot.setData(columns); return; }
    if (existing) existing.plot.destroy();
    const spark = el.classList.contains("spark");
    const unit = el.dataset.unit || "";
    const options = {
      width: Math.max(el.clientWidth, spark ? 140 : 320),
      height: spark ? 32 : 190,
      title: spark ? undefined : el.dataset.title,
      legend: { show: !spark },
      cursor: { show: !spark },
      scales: { x: { time: true } },
      axes: spark
        ? [{ show: false }, { show: false }]
        : [{}, { size: 70, values: (u, values) => values.map((v) => human(v, unit)) }],
      series: [{}, ...names.map((n, i) => ({
        label: label(n, prefix),
        stroke: COLORS[i % COLORS.length],
        width: spark ? 1 : 1.5,
        value: (u, v) => human(v, unit),
      }))],
    };
    plots.set(el, { key, plot: new uPlot(options, columns, el) });
  }

  function drawAll(root) {
    (root || document).querySelectorAll(".chart").forEach((el) => {
      draw(el).catch((error) => { el.dataset.error = String(error); });
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    drawAll(document);
    const interval = Number(document.body.dataset.intervalMs) || 5000;
    setInterval(() => drawAll(document), interval);
    document.body.addEventListener("htmx:afterSwap", (event) => drawAll(event.target));
  });
})();
