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

  // Legends read words, not metric names: "produced_records_per_s" -> "produced records/s".
  const WORDS = { freshness_seconds: "freshness", lag_records: "lag", rows_per_s: "rows/s", wal_bytes: "WAL" };

  function words(text) {
    if (WORDS[text]) return WORDS[text];
    return text.replace(/_per_s$/, "/s").replace(/_/g, " ");
  }

  function label(name, prefix, fallback) {
    const rest = name.slice(prefix.length).replace(/^\|/, "");
    if (!rest) return fallback || words(name.split("|").pop());
    return words(rest.replace(/\|lag$/, "").replace(/\|(\d+)$/, "[$1]").replace(/\|(\d+)\|/, "[$1] ").replace(/\|/g, " "));
  }

  // The least span of time a chart shows. uPlot widens a lone instant to a thousand days (a day in
  // its milliseconds, our times being seconds), so a node's first sample (or a restarted node's)
  // made an axis of years: while all the samples lie within a minute, the axis is that minute and
  // they fill in from its right. A range the reader zooms to is left as it is.
  const MIN_SPAN_S = 60;

  function timeRange(u, min, max) {
    const times = u.data[0];
    if (!times || !times.length) {
      const now = Date.now() / 1000;
      return [now - MIN_SPAN_S, now];
    }
    const first = times[0], last = times[times.length - 1];
    const whole = min <= first && max >= last;
    return whole && last - first < MIN_SPAN_S ? [last - MIN_SPAN_S, last] : [min, max];
  }

  // One line a tick: the time of day, with seconds while the axis spans under ten minutes, and the
  // date in front once it spans a day. uPlot's own ticks put the date of the first one on a second
  // line, where it ran into the next minute's label on a narrow chart.
  const TICK_SPACE_PX = 90;

  function ticks(u, splits) {
    const span = u.scales.x.max - u.scales.x.min;
    const shown = span < 600 ? { hour: "numeric", minute: "2-digit", second: "2-digit" } : { hour: "numeric", minute: "2-digit" };
    return splits.map((s) => {
      const at = new Date(s * 1000);
      const time = at.toLocaleTimeString([], shown);
      return span >= 86400 ? at.toLocaleDateString() + " " + time : time;
    });
  }

  // What a chart shows, for a reader of the page (and its tests): the seconds its time axis spans.
  function noteSpan(u, key) {
    if (key === "x") u.root.parentElement.dataset.spanSeconds = String(Math.round(u.scales.x.max - u.scales.x.min));
  }

  function clock(seconds) {
    return new Date(seconds * 1000).toLocaleTimeString();
  }

  // Until the cursor is on a chart, its legend shows the latest values (uPlot's default is "--").
  function showLatest(u) {
    if (u.cursor.idx !== null && u.cursor.idx !== undefined) return;
    const last = u.data[0].length - 1;
    if (last >= 0) u.setLegend({ idx: last });
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
    if (existing && existing.key === key) { existing.plot.setData(columns); showLatest(existing.plot); return; }
    if (existing) existing.plot.destroy();
    const spark = el.classList.contains("spark");
    const unit = el.dataset.unit || "";
    const options = {
      width: Math.max(el.clientWidth, spark ? 140 : 320),
      height: spark ? 32 : 190,
      title: spark ? undefined : el.dataset.title,
      legend: { show: !spark },
      cursor: { show: !spark },
      scales: { x: { time: true, range: timeRange } },
      axes: spark
        ? [{ show: false }, { show: false }]
        : [{ space: TICK_SPACE_PX, values: ticks }, { size: 70, values: (u, values) => values.map((v) => human(v, unit)) }],
      hooks: spark ? { setScale: [noteSpan] } : { setCursor: [showLatest], ready: [showLatest], setScale: [noteSpan] },
      series: [{ label: "time", value: (u, v) => (v === null || v === undefined ? "" : clock(v)) }, ...names.map((n, i) => ({
        label: label(n, prefix, el.dataset.label),
        stroke: COLORS[i % COLORS.length],
        width: spark ? 1 : 1.5,
        value: (u, v) => human(v, unit),
      }))],
    };
    const plot = new uPlot(options, columns, el);
    plots.set(el, { key, plot });
    if (!spark) showLatest(plot);
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
