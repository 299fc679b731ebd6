// posenc explore: builds the panels the server describes, asks the server on every control
// change and has Apache ECharts (vendored, static/vendor/) draw what it answers. Nothing is
// computed here: axes, ticks, log scales, colour scales and every number arrive from the
// server, which computes them with posenc.
"use strict";

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

// -- drawing (ECharts) ------------------------------------------------------------------------

const GRID = { left: 80, right: 24, top: 20, bottom: 56 };  // grows to hold labels and names
const INK = "#222", RULES = "#ddd";

function valueAxis(a) {
  // The server's range, tick values and tick labels (a log axis arrives as log10 values).
  const values = a.ticks.map(t => t[0]), labels = new Map(a.ticks);
  return {
    type: "value", name: a.label, nameLocation: "middle", nameGap: 30, min: a.low, max: a.high,
    nameTextStyle: { color: INK }, axisLine: { onZero: false, lineStyle: { color: "#888" } },
    axisTick: { customValues: values },
    axisLabel: { customValues: values, color: INK, hideOverlap: true,
                 formatter: v => (labels.has(v) ? labels.get(v) : String(v)) },
    splitLine: { show: true, lineStyle: { color: RULES } },
  };
}

function squareGrid(box) {  // one unit equally long on both axes: a square plot area
  const side = Math.min(box.clientWidth - 104, box.clientHeight - 76);
  return { ...GRID, left: "center", width: side, height: side };
}

function linesOption(chart, box) {
  const kinds = { line: "line", points: "scatter", bars: "bar" };
  return {
    animation: false,
    grid: chart.square ? squareGrid(box) : GRID,
    xAxis: valueAxis(chart.x),
    yAxis: valueAxis(chart.y),
    series: chart.series.map(s => ({
      name: s.name, type: kinds[s.mode] || "line", silent: true, clip: true,
      data: s.x.map((x, i) => [x, s.y[i]]),
      showSymbol: s.mode === "points", symbolSize: 7, connectNulls: false,
      lineStyle: { width: 2, color: s.colour }, itemStyle: { color: s.colour },
    })),
  };
}

function categoryAxis(a, values, cells, inverse) {
  // One category per drawn row or column; the server names the cells that carry its ticks.
  const labels = new Map(cells.map(([i, label]) => [String(values[i]), label]));
  const shown = (index, value) => labels.has(value);
  return {
    type: "category", data: values.map(String), inverse, name: a.label,
    nameLocation: "middle", nameGap: 30, nameTextStyle: { color: INK },
    axisTick: { interval: shown, alignWithLabel: true },
    axisLabel: { interval: shown, color: INK, formatter: v => labels.get(v) },
  };
}

function heatmapOption(chart) {
  const bytes = Uint8Array.from(atob(chart.cells), c => c.charCodeAt(0));
  const data = [];
  for (let row = 0, i = 0; row < chart.height; row++) {
    for (let col = 0; col < chart.width; col++, i++) data.push([col, row, bytes[i]]);
  }
  return {
    animation: false,
    grid: { ...GRID, right: 72 },
    xAxis: categoryAxis(chart.x, chart.columns, chart.x_cells, false),
    yAxis: categoryAxis(chart.y, chart.rows, chart.y_cells, true),
    visualMap: {  // the server's colour anchors (RdBu, as posenc demo) over the byte range 0 .. 255
      type: "continuous", min: 0, max: 255, dimension: 2, calculable: false,
      inRange: { color: chart.colours }, text: [String(chart.high), String(chart.low)],
      right: 0, top: "middle", itemHeight: 180, textStyle: { color: INK },
    },
    series: [{
      type: "heatmap", data, progressive: 0,
      emphasis: { itemStyle: { borderColor: "#000", borderWidth: 2 } },
    }],
  };
}

function drawChart(box, chart) {
  const instance = echarts.init(box, null, { renderer: "canvas" });
  instance.setOption(chart.kind === "heatmap" ? heatmapOption(chart) : linesOption(chart, box));
  box.observer = new ResizeObserver(() => {
    instance.resize();
    if (chart.square) instance.setOption({ grid: squareGrid(box) });
  });
  box.observer.observe(box);
  return instance;
}

function clearCharts(figures) {
  for (const box of figures.querySelectorAll(".chart")) {
    if (box.observer) box.observer.disconnect();
    const instance = echarts.getInstanceByDom(box);
    if (instance) instance.dispose();
  }
  figures.replaceChildren();
}

function roundingNote(instance, chart) {
  // A quantity constant up to rounding: drawn flat, the rounding said in words, and the exact
  // variation one click away (the server sends both axes).
  const note = el("p", { class: "note", text: chart.y.note + " " });
  if (!chart.y.zoom) return note;
  const button = el("button", { type: "button", class: "zoom", "aria-pressed": "false",
                                text: "Zoom to the rounding" });
  button.addEventListener("click", () => {
    const zoomed = button.getAttribute("aria-pressed") !== "true";
    button.setAttribute("aria-pressed", String(zoomed));
    button.textContent = zoomed ? "Back to the honest scale" : "Zoom to the rounding";
    instance.setOption({ yAxis: valueAxis(zoomed ? chart.y.zoom : chart.y) });
  });
  note.append(button);
  return note;
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
  // Rounded to 6 significant digits; the exact value on hover (title) and when copied.
  list.replaceChildren();
  for (const n of numbers) {
    const value = el("dd", { "data-key": n.key, "data-exact": n.value, title: n.value,
                             text: n.shown });
    list.append(el("dt", { text: n.label }), value);
  }
}

document.addEventListener("copy", event => {
  // Copying a rounded number copies its exact value.
  const selection = document.getSelection();
  const node = selection && selection.anchorNode && selection.anchorNode.parentElement;
  const number = node && node.closest("dd[data-exact]");
  if (!number || !selection.toString().trim() || number.dataset.exact === number.textContent) return;
  event.clipboardData.setData("text/plain", number.dataset.exact);
  event.preventDefault();
});

function renderTables(box, tables) {
  box.replaceChildren();
  for (const t of tables) {
    const head = el("tr", {}, ...t.columns.map(c => el("th", { scope: "col", text: c })));
    const rows = t.rows.map(r => el("tr", {}, ...r.map(c => el("td", { text: c }))));
    box.append(el("table", {}, el("caption", { text: t.caption }), el("thead", {}, head),
                  el("tbody", {}, ...rows)));
  }
}

function pointerSetup(box, instance, chart, form, readout) {
  // The heatmap: the exact value under the pointer (or the keyboard cursor) from the server.
  let cursor = { row: 0, col: 0 }, pending = null, lit = null;
  const ask = () => {
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
  instance.on("mousemove", { seriesType: "heatmap" }, params => {
    cursor = { row: params.data[1], col: params.data[0] };
    ask();
  });
  box.addEventListener("keydown", event => {
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    const move = moves[event.key];
    if (!move) return;
    event.preventDefault();
    cursor.row = Math.min(chart.height - 1, Math.max(0, cursor.row + move[0]));
    cursor.col = Math.min(chart.width - 1, Math.max(0, cursor.col + move[1]));
    if (lit !== null) instance.dispatchAction({ type: "downplay", seriesIndex: 0, dataIndex: lit });
    lit = cursor.row * chart.width + cursor.col;  // the cell's index in the series' data
    instance.dispatchAction({ type: "highlight", seriesIndex: 0, dataIndex: lit });
    ask();
  });
}

function buildPanel(panel, root, limit) {
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
    clearCharts(figures);
    const charts = Array.isArray(r.chart) ? r.chart : [r.chart];
    charts.forEach((chart, i) => {
      const box = el("div", { class: "chart", role: "img", tabindex: "0",
                              "aria-label": `${panel.title}, figure ${i + 1}: ${r.caption}` });
      const note = chart.drawn ? el("figcaption", { class: "drawn", text: chart.drawn }) : null;
      figures.append(el("figure", {}, box, chart.kind === "lines" ? legend(chart) : null, note));
      const instance = drawChart(box, chart);
      if (chart.y && chart.y.note) figures.append(roundingNote(instance, chart));
      if (chart.kind === "heatmap" && panel.name === "heatmap") {
        readout = readout || el("p", { class: "pointer", "aria-live": "polite",
                                       text: "Point at the table (or focus it and use the arrow keys) for the exact value." });
        figures.append(readout);
        pointerSetup(box, instance, chart, form, readout);
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
    form.after(el("p", {}, el("label", { for: id }, `Or upload a file (${accept}, at most ${limit.text}): `, file)));
    file.addEventListener("change", async () => {
      const chosen = file.files[0];
      if (!chosen) return;
      const mine = ++serial;
      if (chosen.size > limit.bytes) {  // the server would refuse it unread
        status.textContent = `${chosen.name}: the file holds ${chosen.size} bytes; uploads are limited to ${limit.text}`;
        return;
      }
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
    const { panels, upload_limit: limit } = await getJSON("/api/panels");
    panels.forEach((p, i) => nav.append(el("a", { href: `#${p.name}`, text: `${i + 1}. ${p.title}` })));
    await Promise.all(panels.map(p => buildPanel(p, root, limit)));
    document.body.dataset.ready = "yes";
  } catch (e) {
    root.append(el("p", { class: "error", role: "alert", text: e.message }));
  }
}

main();
