/* lossdoctor HTML report: draws the charts from the JSON block #ld-data with uPlot.
 * Every string from a log reaches the page through textContent (never innerHTML). */
(function () {
  "use strict";
  var state = { charts: 0, heatmaps: 0, errors: [] };
  window.__lossdoctor = state;
  window.addEventListener("error", function (e) { state.errors.push(String(e.message)); });

  var data = JSON.parse(document.getElementById("ld-data").textContent);
  var L = data.labels;
  var SEV = { critical: "#d62728", warning: "#e08600", info: "#1f77b4" };
  var RANK_COLORS = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var plots = [];
  var syncKey = uPlot.sync("ld").key;
  var zooming = false;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  /* union of the ranks' x values, each rank's y aligned to it (null where not logged) */
  function align(series) {
    var xs = [];
    var seen = new Set();
    series.forEach(function (s) { s.x.forEach(function (x) { if (!seen.has(x)) { seen.add(x); xs.push(x); } }); });
    xs.sort(function (a, b) { return a - b; });
    var pos = new Map();
    xs.forEach(function (x, i) { pos.set(x, i); });
    var ys = series.map(function (s) {
      var y = new Array(xs.length).fill(null);
      s.x.forEach(function (x, i) { y[pos.get(x)] = s.y[i]; });
      return y;
    });
    return [xs, ys];
  }

  /* TensorBoard-style debiased exponential moving average */
  function ema(ys, w) {
    var out = new Array(ys.length).fill(null);
    var last = 0, n = 0;
    for (var i = 0; i < ys.length; i++) {
      var v = ys[i];
      if (v == null || !isFinite(v)) continue;
      last = last * w + (1 - w) * v;
      n++;
      out[i] = w === 0 ? v : last / (1 - Math.pow(w, n));
    }
    return out;
  }

  function pinsPlugin() {
    return { hooks: { draw: function (u) {
      var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height, dpr = devicePixelRatio || 1;
      ctx.save();
      var placed = [];  // pins closer than a pin's width stack downwards instead of overlapping
      data.findings.forEach(function (f) {
        if (f.step == null || f.step < u.scales.x.min || f.step > u.scales.x.max) return;
        var x = Math.round(u.valToPos(f.step, "x", true));
        var row = 0;
        while (placed.some(function (p) { return p[1] === row && Math.abs(p[0] - x) < 18 * dpr; })) row++;
        placed.push([x, row]);
        var cy = top + (9 + 18 * row) * dpr;
        var c = SEV[f.severity] || SEV.info;
        ctx.strokeStyle = c; ctx.lineWidth = 1.5 * dpr; ctx.setLineDash([5 * dpr, 4 * dpr]);
        ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
        ctx.setLineDash([]); ctx.fillStyle = c;
        ctx.beginPath(); ctx.arc(x, cy, 8 * dpr, 0, 2 * Math.PI); ctx.fill();
        ctx.fillStyle = "#fff"; ctx.font = "bold " + (11 * dpr) + "px sans-serif";
        ctx.textAlign = "center"; ctx.textBaseline = "middle";
        ctx.fillText(String(f.i), x, cy + 0.5 * dpr);
      });
      ctx.restore();
    } } };
  }

  /* runs of consecutive steps: [[first, last], ...], steps closer than `gap` join one run */
  function runsOf(steps, gap) {
    var sorted = steps.slice().sort(function (a, b) { return a - b; });
    var out = [];
    sorted.forEach(function (s) {
      var last = out[out.length - 1];
      if (last && s - last[1] <= gap) last[1] = s; else out.push([s, s]);
    });
    return out;
  }

  function typicalGap(xs) {
    if (xs.length < 2) return 1;
    var d = [];
    for (var i = 1; i < xs.length && d.length < 2000; i++) d.push(xs[i] - xs[i - 1]);
    d.sort(function (a, b) { return a - b; });
    return Math.max(1, d[Math.floor(d.length / 2)]) * 1.5;
  }

  /* markers: non-finite values (a red band over each run, a triangle at its start) and skipped
     steps (ticks at the bottom) */
  function marksPlugin(nonfinite, onSkipped, skipped, gap) {
    var runs = runsOf(nonfinite, gap);
    var skippedRuns = runsOf(onSkipped, gap);
    return { hooks: { draw: function (u) {
      var ctx = u.ctx, dpr = devicePixelRatio || 1, top = u.bbox.top, bot = u.bbox.top + u.bbox.height;
      ctx.save();
      ctx.fillStyle = "rgba(127,140,141,0.12)";  // non-finite on steps the scaler skipped: grey
      skippedRuns.forEach(function (r) {
        if (r[1] < u.scales.x.min || r[0] > u.scales.x.max) return;
        var x0 = u.valToPos(Math.max(r[0], u.scales.x.min), "x", true);
        var x1 = u.valToPos(Math.min(r[1], u.scales.x.max), "x", true);
        ctx.fillRect(x0 - 2 * dpr, top, Math.max(4 * dpr, x1 - x0 + 4 * dpr), u.bbox.height);
      });
      runs.forEach(function (r) {
        if (r[1] < u.scales.x.min || r[0] > u.scales.x.max) return;
        var x0 = u.valToPos(Math.max(r[0], u.scales.x.min), "x", true);
        var x1 = u.valToPos(Math.min(r[1], u.scales.x.max), "x", true);
        ctx.fillStyle = "rgba(214,39,40,0.10)";
        ctx.fillRect(x0 - 2 * dpr, top, Math.max(4 * dpr, x1 - x0 + 4 * dpr), u.bbox.height);
        if (r[0] >= u.scales.x.min) {
          ctx.fillStyle = "#d62728";
          ctx.beginPath(); ctx.moveTo(x0 - 5 * dpr, top + 20 * dpr); ctx.lineTo(x0 + 5 * dpr, top + 20 * dpr);
          ctx.lineTo(x0, top + 28 * dpr); ctx.closePath(); ctx.fill();
        }
      });
      ctx.strokeStyle = "rgba(214,39,40,0.8)"; ctx.lineWidth = 1.5 * dpr;
      (skipped || []).forEach(function (s) {
        if (s < u.scales.x.min || s > u.scales.x.max) return;
        var x = u.valToPos(s, "x", true);
        ctx.beginPath(); ctx.moveTo(x, bot); ctx.lineTo(x, bot - 10 * dpr); ctx.stroke();
      });
      ctx.restore();
    } } };
  }

  function hlinePlugin(value, label, color) {
    color = color || "#2e9d4c";
    return { hooks: { draw: function (u) {
      if (value == null || value < u.scales.y.min || value > u.scales.y.max) return;
      var ctx = u.ctx, dpr = devicePixelRatio || 1, y = u.valToPos(value, "y", true);
      ctx.save();
      ctx.strokeStyle = color; ctx.lineWidth = 1.5 * dpr; ctx.setLineDash([8 * dpr, 4 * dpr]);
      ctx.beginPath(); ctx.moveTo(u.bbox.left, y); ctx.lineTo(u.bbox.left + u.bbox.width, y); ctx.stroke();
      ctx.fillStyle = color; ctx.font = (11 * dpr) + "px sans-serif"; ctx.textAlign = "right";
      ctx.fillText(label + " " + value, u.bbox.left + u.bbox.width - 4 * dpr, y - 4 * dpr);
      ctx.restore();
    } } };
  }

  function syncZoom(u) {
    if (zooming) return;
    zooming = true;
    var min = u.scales.x.min, max = u.scales.x.max;
    plots.forEach(function (p) { if (p !== u) p.setScale("x", { min: min, max: max }); });
    zooming = false;
  }

  function width(div) { return Math.max(300, div.clientWidth || 600); }

  function makeChart(c, parent) {
    var box = el("div", "chart");
    box.dataset.signal = c.name;
    var h = el("h3");
    h.appendChild(el("span", null, c.label));
    box.appendChild(h);
    var plotDiv = el("div", "plot");
    box.appendChild(plotDiv);
    parent.appendChild(box);

    var al = align(c.series);
    var xs = al[0], ys = al[1];
    var nonfinite = [], onSkipped = [];
    c.series.forEach(function (s) {
      nonfinite = nonfinite.concat(s.nonfinite);
      onSkipped = onSkipped.concat(s.nonfinite_skipped || []);
    });
    var skipped = [];
    (c.skipped || []).forEach(function (s) { skipped = skipped.concat(s); });
    if (xs.length === 0) {  // only non-finite values: keep an axis so the markers show
      xs = nonfinite.concat(onSkipped).sort(function (a, b) { return a - b; });
      ys = c.series.map(function () { return new Array(xs.length).fill(null); });
    }
    var multi = c.series.length > 1;
    var series = [{ label: L.step }];
    var arrays = [xs];
    c.series.forEach(function (s, i) {
      var color = RANK_COLORS[i % RANK_COLORS.length];
      var label = s.label != null ? s.label : multi ? L.rank_series + " " + (s.rank == null ? i : s.rank) : c.label;
      var isLoss = c.name === "loss";
      series.push({ label: isLoss && !multi ? L.raw : label, stroke: isLoss && !multi ? "rgba(31,119,180,0.35)" : color,
                    width: 1, spanGaps: true, points: { show: xs.length < 60 } });
      arrays.push(ys[i]);
    });
    var smoothIdx = -1, smoothing = xs.length > 50 ? 0.6 : 0;
    if (c.name === "loss" && !multi) {
      smoothIdx = arrays.length;
      series.push({ label: L.smoothed, stroke: "#1f77b4", width: 2, spanGaps: true, points: { show: false } });
      arrays.push(ema(ys[0], smoothing));
      var ctl = el("label", "ctl");
      ctl.appendChild(el("span", null, L.smoothing));
      var slider = el("input");
      slider.type = "range"; slider.min = "0"; slider.max = "0.99"; slider.step = "0.01";
      slider.value = String(smoothing);
      var val = el("span", null, String(smoothing));
      ctl.appendChild(slider); ctl.appendChild(val);
      h.appendChild(ctl);
    }
    var reset = el("button", null, L.reset_zoom);
    h.appendChild(reset);

    var yScale = c.log
      ? { distr: 3, log: c.name === "scale" ? 2 : 10,
          range: function (u, min, max) { return min == null || max == null ? [0.1, 10] : uPlot.rangeLog(min, max, c.name === "scale" ? 2 : 10, true); } }
      : { range: function (u, min, max) { return min == null || max == null ? [0, 1] : uPlot.rangeNum(min, max, 0.1, true); } };
    var plugins = [pinsPlugin(), marksPlugin(nonfinite, onSkipped, skipped, typicalGap(xs))];
    if (c.name === "grad_norm" && data.clip != null) plugins.push(hlinePlugin(data.clip, L.clip));
    if (c.name === "grad_norm" && data.suggested_clip != null && data.suggested_clip !== data.clip)
      plugins.push(hlinePlugin(data.suggested_clip, L.suggested_clip, "#8a5cf6"));
    if (c.name === "update_ratio") plugins.push(hlinePlugin(1e-3, L.healthy_ratio, "#7f8c8d"));
    var opts = {
      width: width(plotDiv), height: c.main ? 220 : 150,
      scales: { x: { time: false }, y: yScale },
      series: series,
      axes: [{ space: 60, incrs: STEP_INCRS },
             { size: 64, space: 28,
               values: function (u, vals) { return (c.log ? thin(vals, c.name === "scale" ? 2 : 10) : vals).map(fmt); } }],
      cursor: { sync: { key: syncKey }, drag: { x: true, y: false } },
      legend: { live: true },
      plugins: plugins,
      hooks: { setScale: [function (u, key) { if (key === "x") syncZoom(u); }] }
    };
    var u = new uPlot(opts, arrays, plotDiv);
    plots.push(u);
    if (smoothIdx > 0) {
      slider.addEventListener("input", function () {
        var w = parseFloat(slider.value);
        val.textContent = slider.value;
        arrays[smoothIdx] = ema(ys[0], w);
        u.setData(arrays, false);
      });
    }
    reset.addEventListener("click", function () { zoomAll(null); });
    return u;
  }

  /* steps are integers: tick increments 1, 2, 5, 10, 20, 50... */
  var STEP_INCRS = [];
  for (var m = 1; m <= 1e12; m *= 10) STEP_INCRS.push(m, 2 * m, 5 * m);

  /* log axes: label decades only, and past 6 decades every k-th one, so labels never overlap */
  function thin(vals, base) {
    var lb = Math.log(base || 10);
    var exps = vals.map(function (v) {
      if (v == null || v <= 0) return null;
      var e = Math.log(v) / lb;
      return Math.abs(e - Math.round(e)) < 1e-6 ? Math.round(e) : null;
    });
    var n = exps.filter(function (e) { return e !== null; }).length;
    var k = Math.max(1, Math.ceil(n / 6));
    if (base === 2 && k > 1) k = Math.pow(2, Math.ceil(Math.log2(k)));  // 2^0, 2^4, 2^8...
    return vals.map(function (v, i) { return exps[i] !== null && exps[i] % k === 0 ? v : null; });
  }

  function fmt(v) {
    if (v == null) return "";
    var a = Math.abs(v);
    if (Number.isInteger(v) && a < 1e6) return String(v);  // 65536, not 6.6e+4
    if (a !== 0 && (a >= 1e4 || a < 1e-3)) return v.toExponential(1);
    return String(+v.toPrecision(4));
  }

  function zoomAll(step) {
    zooming = true;
    plots.forEach(function (u) {
      var xs = u.data[0];
      if (!xs.length) return;
      var lo = xs[0], hi = xs[xs.length - 1];
      if (step == null) { u.setScale("x", { min: lo, max: hi }); return; }
      var span = Math.max(10, (hi - lo) * 0.05);
      u.setScale("x", { min: Math.max(lo, step - span), max: Math.min(hi, step + span) });
    });
    zooming = false;
  }

  /* per-layer heatmap: rows are modules, columns sampled steps, colour log10(value) */
  var STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function colour(t) {
    t = Math.max(0, Math.min(1, t)) * (STOPS.length - 1);
    var i = Math.min(STOPS.length - 2, Math.floor(t)), f = t - i, a = STOPS[i], b = STOPS[i + 1];
    return [a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f, a[2] + (b[2] - a[2]) * f];
  }

  function makeHeatmap(hm, parent, tip) {
    var box = el("div", "chart heat");
    box.dataset.signal = "layers:" + hm.stat;
    box.appendChild(el("h3", null, hm.stat));
    var nCols = hm.steps.length, nRows = hm.modules.length;
    var canvas = el("canvas");
    canvas.width = nCols; canvas.height = nRows;
    var cssH = Math.min(420, Math.max(60, nRows * 14));
    canvas.style.height = cssH + "px";
    var row = el("div", "heatrow");
    if (nRows <= 40) {  // module names beside the rows when they fit
      var names = el("div", "heatnames");
      names.style.height = cssH + "px";
      hm.modules.forEach(function (m) {
        var n = el("div", null, m);
        n.style.height = (cssH / nRows) + "px"; n.style.lineHeight = (cssH / nRows) + "px";
        n.title = m;
        names.appendChild(n);
      });
      row.appendChild(names);
    }
    row.appendChild(canvas);
    box.appendChild(row);
    box.appendChild(el("div", "heataxis", L.step + " " + hm.steps[0] + " … " + hm.steps[nCols - 1]));
    parent.appendChild(box);
    var lo = Infinity, hi = -Infinity;
    hm.log10.forEach(function (row) { row.forEach(function (v) { if (v != null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }); });
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    var ctx = canvas.getContext("2d");
    var img = ctx.createImageData(nCols, nRows);
    for (var r = 0; r < nRows; r++) {
      var bad = new Set(hm.nonfinite[r] || []);
      for (var c = 0; c < nCols; c++) {
        var v = hm.log10[r][c], k = (r * nCols + c) * 4, rgb;
        if (bad.has(c)) rgb = [214, 39, 40];
        else if (v == null) rgb = [230, 230, 230];
        else rgb = colour(hi > lo ? (v - lo) / (hi - lo) : 0.5);
        img.data[k] = rgb[0]; img.data[k + 1] = rgb[1]; img.data[k + 2] = rgb[2]; img.data[k + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    canvas.addEventListener("mousemove", function (e) {
      var rect = canvas.getBoundingClientRect();
      var c = Math.floor((e.clientX - rect.left) / rect.width * nCols);
      var r = Math.floor((e.clientY - rect.top) / rect.height * nRows);
      if (c < 0 || r < 0 || c >= nCols || r >= nRows) { tip.style.display = "none"; return; }
      var v = hm.log10[r][c];
      var bad = (hm.nonfinite[r] || []).indexOf(c) >= 0;
      tip.textContent = hm.modules[r] + " · " + L.step + " " + hm.steps[c] + " · " + hm.stat + " = " +
        (bad ? L.nonfinite : v == null ? "-" : fmt(Math.pow(10, v)));
      tip.style.left = (e.clientX + 12) + "px"; tip.style.top = (e.clientY + 12) + "px";
      tip.style.display = "block";
    });
    canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  }

  var main = document.getElementById("ld-charts");
  var tip = el("div", "tip");
  document.body.appendChild(tip);
  if (!data.charts.length) main.appendChild(el("div", "empty", L.no_chart));
  var other = null;
  data.charts.forEach(function (c) {
    if (!c.main && !other) {
      other = el("div");
      other.appendChild(el("h2", null, L.other));
      main.appendChild(other);
    }
    try {
      makeChart(c, c.main ? main : other);
    } catch (e) {  // one chart that cannot draw must not take the others with it
      state.errors.push(c.name + ": " + e);
      if (window.console) console.error("lossdoctor chart " + c.name + ": " + e);
    }
  });
  if (data.heatmaps.length) {
    var hs = el("div");
    hs.appendChild(el("h2", null, L.layers));
    hs.appendChild(el("p", "hint", L.layers_hint));
    main.appendChild(hs);
    data.heatmaps.forEach(function (hm) { makeHeatmap(hm, hs, tip); state.heatmaps++; });
  }
  state.charts = plots.length;

  document.querySelectorAll(".finding[data-step]").forEach(function (card) {
    card.addEventListener("click", function () {
      document.querySelectorAll(".finding.active").forEach(function (c) { c.classList.remove("active"); });
      card.classList.add("active");
      zoomAll(parseInt(card.dataset.step, 10));
    });
  });

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      plots.forEach(function (u) { u.setSize({ width: width(u.root.parentNode), height: u.height }); });
    }, 100);
  });
  document.documentElement.dataset.ldReady = "1";
})();
