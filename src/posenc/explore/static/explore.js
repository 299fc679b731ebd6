// posenc explore: builds the panels the server describes, asks the server on every control
// change and draws what it answers. Nothing is computed here: axes, ticks, log scales and every
// number arrive from the server, which computes them with posenc.
"use strict";

const W = 720, H = 380, PAD = { left: 64, right: 12, top: 12, bottom: 48 };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const c of children) if (c) node.append(c);
  return node;
}

function query(values) {
  return new URLSearchParams(values).toString();
}

async function getJSON(url, options) {
  const response = await fetch(url, options);
  let body;
  try { body = await response.json(); } catch (e) { body = { error: response.statusText }; }
  if (!response.ok || body.error) throw new Error(body.error || response.statusText);
  return body;
}

// -- drawing -------------------------------------------------------------------------------

function frame(canvas, chart) {
  const ctx = canvas.getContext("2d");
  const plot = { x0: PAD.left, y0: PAD.top, w: canvas.width - PAD.left - PAD.right,
                 h: canvas.height - PAD.top - PAD.bottom };
  if (chart.square) {  // one unit equally long on both axes
    const side = plot.w < plot.h ? plot.w : plot.h;
    plot.x0 += (plot.w - side) / 2; plot.w = side; plot.h = side;
  }
  const sx = v => plot.x0 + (v - chart.x.low) / (chart.x.high - chart.x.low) * plot.w;
  const sy = v => plot.y0 + plot.h - (v - chart.y.low) / (chart.y.high - chart.y.low) * plot.h;
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.font = "12px sans-serif"; ctx.fillStyle = "#222"; ctx.strokeStyle = "#ddd";
  ctx.textAlign = "center";
  for (const [t, label] of chart.x.ticks) {
    ctx.beginPath(); ctx.moveTo(sx(t), plot.y0); ctx.lineTo(sx(t), plot.y0 + plot.h); ctx.stroke();
    ctx.fillText(label, sx(t), plot.y0 + plot.h + 14);
  }
  ctx.textAlign = "right";
  for (const [t, label] of chart.y.ticks) {
    ctx.beginPath(); ctx.moveTo(plot.x0, sy(t)); ctx.lineTo(plot.x0 + plot.w, sy(t)); ctx.stroke();
    ctx.fillText(label, plot.x0 - 4, sy(t) + 4);
  }
  ctx.textAlign = "center";
  ctx.fillText(chart.x.label, plot.x0 + plot.w / 2, canvas.height - 8);
  ctx.save(); ctx.translate(12, plot.y0 + plot.h / 2); ctx.rotate(-Math.PI / 2);
  ctx.fillText(chart.y.label, 0, 0); ctx.restore();
  ctx.strokeStyle = "#888"; ctx.strokeRect(plot.x0, plot.y0, plot.w, plot.h);
  return { ctx, plot, sx, sy };
}

function drawLines(canvas, chart) {
  const { ctx, plot, sx, sy } = frame(canvas, chart);
  ctx.save(); ctx.beginPath(); ctx.rect(plot.x0, plot.y0, plot.w, plot.h); ctx.clip();
  for (const s of chart.series) {
    ctx.strokeStyle = s.colour; ctx.fillStyle = s.colour; ctx.lineWidth = 2;
    if (s.mode === "points") {
      s.x.forEach((x, i) => {
        if (x === null || s.y[i] === null) return;
        ctx.beginPath(); ctx.arc(sx(x), sy(s.y[i]), 3.5, 0, 2 * Math.PI); ctx.fill();
      });
      continue;
    }
    ctx.beginPath();
    let pen = false;
    s.x.forEach((x, i) => {
      if (x === null || s.y[i] === null) { pen = false; return; }
      if (pen) ctx.lineTo(sx(x), sy(s.y[i])); else ctx.moveTo(sx(x), sy(s.y[i]));
      pen = true;
    });
    ctx.stroke();
  }
  ctx.restore();
}

function hexColour(text) {
  return [1, 3, 5].map(i => parseInt(text.slice(i, i + 2), 16));
}

function drawHeatmap(canvas, chart) {
  const { ctx, plot } = frame(canvas, {
    ...chart,
    x: { ...chart.x, low: chart.x.low - 0.5, high: chart.x.high + 0.5 },
    y: { ...chart.y, low: chart.y.high + 0.5, high: chart.y.low - 0.5 },
  });
  const bytes = Uint8Array.from(atob(chart.cells), c => c.charCodeAt(0));
  const anchors = chart.colours.map(hexColour), last = anchors.length - 1;
  const palette = [];
  for (let v = 0; v < 256; v++) {  // linear interpolation between the server's anchors
    const at = v * last / 255, i = at < last ? at | 0 : last - 1, f = at - i;
    palette.push(anchors[i].map((c, j) => c + (anchors[i + 1][j] - c) * f));
  }
  const image = ctx.createImageData(chart.width, chart.height);
  bytes.forEach((b, i) => {
    const [r, g, bl] = palette[b];
    image.data.set([r, g, bl, 255], 4 * i);
  });
  const off = document.createElement("canvas");
  off.width = chart.width; off.height = chart.height;
  off.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, plot.x0, plot.y0, plot.w, plot.h);
  canvas.plot = plot;
}

function legend(chart) {
  const box = el("p", { class: "legend" });
  for (const s of chart.series || []) {
    const swatch = el("span", { class: "swatch", "aria-hidden": "true" });
    swatch.style.background = s.colour;
    box.append(el("span", {}, swatch, s.name));
  }
  return box;
}

// -- panels --------------------------------------------------------------------------------

function controlInput(panel, control) {
  const id = `${panel.name}-${control.name}`;
  let input;
  if (control.kind === "choice") {
    input = el("select", { id, name: control.name });
    for (const choice of control.choices) input.append(el("option", { value: choice, text: choice }));
  } else {
    input = el("input", { id, name: control.name, type: control.kind === "text" ? "text" : "number" });
    if (control.low !== null) input.min = control.low;
    if (control.high !== null) input.max = control.high;
    input.step = control.step === null ? "any" : control.step;
  }
  input.value = control.default;
  return el("label", { for: id }, control.label, input);
}

function renderNumbers(list, numbers) {
  list.replaceChildren();
  for (const n of numbers) {
    list.append(el("dt", { text: n.label }), el("dd", { "data-key": n.key, text: n.value }));
  }
}

function renderTables(box, tables) {
  box.replaceChildren();
  for (const t of tables) {
    const head = el("tr", {}, ...t.columns.map(c => el("th", { scope: "col", text: c })));
    const rows = t.rows.map(r => el("tr", {}, ...r.map(c => el("td", { text: c }))));
    box.append(el("table", {}, el("caption", { text: t.caption }), el("thead", {}, head),
                  el("tbody", {}, ...rows)));
  }
}

function pointerSetup(panel, canvas, form, readout) {
  // The heatmap: the exact value under the pointer (or the keyboard cursor) from the server.
  let cursor = { row: 0, col: 0 }, pending = null;
  const ask = () => {
    const chart = canvas.chart;
    if (!chart || chart.kind !== "heatmap") return;
    const position = chart.rows[cursor.row], channel = chart.columns[cursor.col];
    const values = Object.fromEntries(new FormData(form));
    clearTimeout(pending);
    pending = setTimeout(async () => {
      try {
        const r = await getJSON(`/api/value?${query({ ...values, position, channel })}`);
        readout.textContent = `PE[${r.position}, ${r.channel}] = ${r.value}`;
      } catch (e) { readout.textContent = e.message; }
    }, 60);
  };
  canvas.addEventListener("pointermove", event => {
    const chart = canvas.chart, plot = canvas.plot;
    if (!chart || chart.kind !== "heatmap" || !plot) return;
    const box = canvas.getBoundingClientRect(), scale = canvas.width / box.width;
    const x = (event.clientX - box.left) * scale - plot.x0, y = (event.clientY - box.top) * scale - plot.y0;
    if (x < 0 || y < 0 || x >= plot.w || y >= plot.h) return;
    cursor = { row: (y / plot.h * chart.height) | 0, col: (x / plot.w * chart.width) | 0 };
    ask();
  });
  canvas.addEventListener("keydown", event => {
    const chart = canvas.chart;
    if (!chart || chart.kind !== "heatmap") return;
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    const move = moves[event.key];
    if (!move) return;
    event.preventDefault();
    cursor.row = Math.min(chart.height - 1, Math.max(0, cursor.row + move[0]));
    cursor.col = Math.min(chart.width - 1, Math.max(0, cursor.col + move[1]));
    ask();
  });
}

function buildPanel(panel, root) {
  const form = el("form", { class: "controls", "aria-label": `${panel.title} controls` },
                  ...panel.controls.map(c => controlInput(panel, c)));
  const status = el("p", { class: "error", role: "alert" });
  const figures = el("div", { class: "figures" });
  const caption = el("p", { class: "caption" });
  const numbers = el("dl", { class: "numbers", "aria-label": "key numbers" });
  const tables = el("div", { class: "tables" });
  const section = el("section", { class: "panel", id: panel.name, "data-panel": panel.name },
                     el("h2", { text: panel.title }), el("p", { class: "look", text: panel.look }),
                     form, status, figures, caption, numbers, tables);
  let readout = null;
  const show = (r) => {
    status.textContent = "";
    figures.replaceChildren();
    const charts = Array.isArray(r.chart) ? r.chart : [r.chart];
    charts.forEach((chart, i) => {
      const canvas = el("canvas", { width: W, height: H, role: "img", tabindex: "0",
                                    "aria-label": `${panel.title}, figure ${i + 1}: ${r.caption}` });
      canvas.chart = chart;
      if (chart.kind === "heatmap") drawHeatmap(canvas, chart); else drawLines(canvas, chart);
      figures.append(el("figure", {}, canvas, chart.kind === "lines" ? legend(chart) : null));
      if (chart.kind === "heatmap" && panel.name === "heatmap") {
        readout = readout || el("p", { class: "pointer", "aria-live": "polite",
                                       text: "Point at the table (or focus it and use the arrow keys) for the exact value." });
        figures.append(readout);
        pointerSetup(panel, canvas, form, readout);
      }
    });
    caption.textContent = r.caption;
    renderNumbers(numbers, r.numbers);
    renderTables(tables, r.tables);
    section.dataset.updates = String(Number(section.dataset.updates || 0) + 1);
  };
  let serial = 0;
  const update = async () => {
    const mine = ++serial;
    const values = Object.fromEntries(new FormData(form));
    try {
      const r = await getJSON(`/api/panel/${panel.name}?${query(values)}`);
      if (mine === serial) show(r);
    } catch (e) {
      if (mine === serial) status.textContent = e.message;
    }
  };
  form.addEventListener("change", update);
  form.addEventListener("submit", event => { event.preventDefault(); update(); });
  if (panel.upload) {
    const id = `${panel.name}-file`;
    const accept = panel.upload === "config" ? ".json" : ".npy,.npz,.safetensors";
    const file = el("input", { id, type: "file", accept });
    form.after(el("p", {}, el("label", { for: id }, `Or upload a file (${accept}, at most 16 MiB): `, file)));
    file.addEventListener("change", async () => {
      const chosen = file.files[0];
      if (!chosen) return;
      const mine = ++serial;
      try {
        const r = await getJSON(`/api/upload/${panel.name}?${query({ name: chosen.name })}`,
                                { method: "POST", body: chosen,
                                  headers: { "Content-Type": "application/octet-stream" } });
        if (mine === serial) show(r);
      } catch (e) {
        if (mine === serial) status.textContent = `${chosen.name}: ${e.message}`;
      }
    });
  }
  root.append(section);
  return update();
}

async function main() {
  const root = document.getElementById("panels"), nav = document.getElementById("contents");
  try {
    const { panels } = await getJSON("/api/panels");
    panels.forEach((p, i) => nav.append(el("a", { href: `#${p.name}`, text: `${i + 1}. ${p.title}` })));
    await Promise.all(panels.map(p => buildPanel(p, root)));
    document.body.dataset.ready = "yes";
  } catch (e) {
    root.append(el("p", { class: "error", role: "alert", text: e.message }));
  }
}

main();
