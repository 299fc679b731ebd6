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
    xAxis: { ...valueAxis(chart.x),  // a vertical rule at the readout's position (canvas)
             axisPointer: { show: true, type: "line", snap: false, triggerTooltip: false,
                            label: { show: false }, lineStyle: { color: "#555", type: "dashed" } } },
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

function shortValue(v) {  // 6 significant digits: formatting, not computing
  return v === null || v === undefined ? "-" : String(Number(Number(v).toPrecision(6)));
}

function lineReadout(box, instance, chart) {
  // The values under the pointer (or the keyboard cursor: focus the figure, then the arrow
  // keys) on a chart of curves, in posenc's own element (the CSP rules out HTML tooltips).
  // A log axis's values arrive as log10 for drawing and as the values themselves (xv, yv).
  const readout = el("p", { class: "pointer readout", "aria-live": "polite",
                            text: "Point at the figure (or focus it and use the arrow keys) for the values." });
  const main = chart.series.find(s => s.mode !== "points" && s.x.length > 2) || chart.series[0];
  let cursor = 0;
  const say = index => {
    cursor = Math.min(main.x.length - 1, Math.max(0, index));
    const x = main.x[cursor];
    const parts = chart.series.map(s => {
      let best = -1;
      for (let i = 0; i < s.x.length; i++) {
        if (s.x[i] !== null && (best < 0 || Math.abs(s.x[i] - x) < Math.abs(s.x[best] - x))) best = i;
      }
      if (best < 0) return null;
      return `${s.name}: ${shortValue((s.yv || s.y)[best])}`;
    }).filter(Boolean);
    const xs = (main.xv || main.x)[cursor];
    readout.textContent = `${chart.x.label} = ${shortValue(xs)} · ${parts.join(" · ")}`;
    return x;
  };
  instance.getZr().on("mousemove", event => {
    const [x] = instance.convertFromPixel({ gridIndex: 0 }, [event.offsetX, event.offsetY]);
    let best = 0;
    for (let i = 0; i < main.x.length; i++) {
      if (main.x[i] !== null && Math.abs(main.x[i] - x) < Math.abs(main.x[best] - x)) best = i;
    }
    say(best);
  });
  box.addEventListener("keydown", event => {
    const moves = { ArrowLeft: -1, ArrowRight: 1, PageDown: -10, PageUp: 10, Home: -1e9, End: 1e9 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const x = say(cursor + moves[event.key]);
    instance.setOption({ xAxis: { axisPointer: { value: x, status: "show" } } });
  });
  return readout;
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
  const label = el("label", { for: id }, control.label, input);
  if (!control.stops || !control.stops.length) return label;
  // A slider over the server's stops (the number box keeps exact values): dragging it sets
  // the box and asks for the figure while the slider moves (throttled by the panel).
  const stops = control.stops;
  const slider = el("input", { id: `${id}-slider`, type: "range", class: "slider", min: "0",
                               max: String(stops.length - 1), step: "1",
                               "aria-label": `${control.label} (slider)` });
  const place = () => {  // the slider at the first stop not below the box's value
    const value = Number(input.value);
    let index = stops.findIndex(v => v >= value);
    if (index < 0) index = stops.length - 1;
    slider.value = String(index);
    slider.setAttribute("aria-valuetext", input.value);
  };
  place();
  slider.addEventListener("input", event => {
    input.value = String(stops[Number(slider.value)]);
    slider.setAttribute("aria-valuetext", input.value);
    event.stopPropagation();
    input.dispatchEvent(new CustomEvent("slide", { bubbles: true }));
  });
  slider.addEventListener("change", event => {  // released: one exact update
    event.stopPropagation();
    input.dispatchEvent(new Event("change", { bubbles: true }));
  });
  input.addEventListener("change", place);
  return el("div", { class: "control" }, label, slider);
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

function pointerSetup(box, instance, chart, valuesOf, readout) {
  // The heatmap: the exact value under the pointer (or the keyboard cursor) from the server.
  let cursor = { row: 0, col: 0 }, pending = null, lit = null;
  const ask = () => {
    const position = chart.rows[cursor.row], channel = chart.columns[cursor.col];
    const values = valuesOf();
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
  // A lab panel, or a step of the guided path (which draws a panel's figure: `panel.panel`,
  // with some controls exposed and the others at `fixed` values or their defaults).
  const api = panel.panel || panel.name, id = panel.panel ? `step-${panel.name}` : panel.name;
  const fixed = panel.fixed || {};
  const form = el("form", { class: "controls", "aria-label": `${panel.title} controls` },
                  ...panel.controls.map(c => controlInput({ name: id }, c)));
  const valuesOf = () => ({ ...fixed, ...Object.fromEntries(new FormData(form)) });
  const status = el("p", { class: "error", role: "alert" });
  const figures = el("div", { class: "figures" });
  const caption = el("p", { class: "caption" });
  const numbers = el("dl", { class: "numbers", "aria-label": "key numbers" });
  const tables = el("div", { class: "tables" });
  const teach = panel.panel ? [
    el("p", { class: "try" }, el("strong", { text: "Try this: " }), panel.try),
    el("p", { class: "notice" }, el("strong", { text: "Notice: " }), panel.notice),
    el("p", { class: "more" }, el("a", { href: panel.link.href, class: "tutorial",
                                         text: `Read more: ${panel.link.page} · ${panel.link.anchor}` })),
  ] : [];
  const section = el("section", { class: panel.panel ? "panel step" : "panel", id,
                                  "data-panel": api },
                     el(panel.panel ? "h3" : "h2", { text: panel.title }),
                     el("p", { class: "look", text: panel.look }),
                     form, status, figures, ...teach, caption, numbers, tables);
  let readout = null;
  const show = (r) => {
    status.textContent = "";
    clearCharts(figures);
    const all = Array.isArray(r.chart) ? r.chart : [r.chart];
    const charts = panel.figures ? all.filter((c, i) => panel.figures.includes(i)) : all;
    charts.forEach((chart, i) => {
      const box = el("div", { class: "chart", role: "img", tabindex: "0", "data-index": String(i),
                              "aria-label": `${panel.title}, figure ${i + 1}: ${r.caption}` });
      const note = chart.drawn ? el("figcaption", { class: "drawn", text: chart.drawn }) : null;
      figures.append(el("figure", {}, box, chart.kind === "lines" ? legend(chart) : null, note));
      const instance = drawChart(box, chart);
      if (chart.kind === "lines") figures.append(lineReadout(box, instance, chart));
      if (chart.y && chart.y.note) figures.append(roundingNote(instance, chart));
      if (chart.kind === "heatmap" && api === "heatmap") {
        readout = readout || el("p", { class: "pointer", "aria-live": "polite",
                                       text: "Point at the table (or focus it and use the arrow keys) for the exact value." });
        figures.append(readout);
        pointerSetup(box, instance, chart, valuesOf, readout);
      }
    });
    caption.textContent = r.caption;
    renderNumbers(numbers, r.numbers);
    renderTables(tables, panel.panel ? [] : r.tables);  // a step: its figure, no tables
    section.dataset.updates = String(Number(section.dataset.updates || 0) + 1);
  };
  // Every request has a sequence number: an answer that arrives after a newer request was
  // sent is dropped, so the figure never jumps back. An update slower than 150 ms dims the
  // old figure and says "computing" until the new one arrives.
  let serial = 0, busyTimer = null, inFlight = 0, again = false;
  const busy = el("p", { class: "busy-note", role: "status", "aria-live": "polite" });
  form.after(busy);
  const waiting = () => {  // the busy indicator, if the answer takes more than 150 ms
    clearTimeout(busyTimer);
    busyTimer = setTimeout(() => {
      section.classList.add("busy");
      busy.textContent = "computing…";
    }, 150);
  };
  const settle = () => {
    clearTimeout(busyTimer);
    section.classList.remove("busy");
    busy.textContent = "";
  };
  const update = async () => {
    const mine = ++serial;
    const values = valuesOf();
    waiting();
    inFlight++;
    try {
      const r = await getJSON(`/api/panel/${api}?${query(values)}`);
      if (mine === serial) { settle(); show(r); }
    } catch (e) {
      if (mine === serial) { settle(); status.textContent = e.message; }
    } finally {
      inFlight--;
      if (again && !inFlight) { again = false; update(); }
    }
  };
  const slide = () => {  // while dragging: one request at a time, then the latest value
    if (inFlight) again = true; else update();
  };
  form.addEventListener("change", update);
  form.addEventListener("slide", slide);
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
      waiting();
      try {
        const r = await getJSON(`/api/upload/${panel.name}?${query({ name: chosen.name })}`,
                                { method: "POST", body: chosen,
                                  headers: { "Content-Type": "application/octet-stream" } });
        if (mine === serial) { settle(); show(r); }
      } catch (e) {
        if (mine === serial) { settle(); status.textContent = `${chosen.name}: ${e.message}`; }
      }
    });
  }
  root.append(section);
  return update();
}

function guidedPath(steps, limit) {
  // One step shown at a time, in the tutorial's order; a step is built (and asks for its
  // figure) when first shown, so that its charts are drawn at their real size.
  const list = document.getElementById("steps"), holder = document.getElementById("step");
  const path = document.getElementById("path");
  const built = new Map();
  const buttons = steps.map((step, i) => {
    const button = el("button", { type: "button", "data-step": step.name,
                                  text: `${i + 1}. ${step.title}` });
    list.append(el("li", {}, button));
    button.addEventListener("click", () => show(i));
    return button;
  });
  const back = el("button", { type: "button", id: "step-back", text: "← Previous step" });
  const next = el("button", { type: "button", id: "step-next", text: "Next step →" });
  holder.after(el("p", { class: "step-nav" }, back, next));
  let current = 0;
  back.addEventListener("click", () => show(current - 1));
  next.addEventListener("click", () => show(current + 1));
  async function show(index) {
    current = Math.min(steps.length - 1, Math.max(0, index));
    const step = steps[current];
    buttons.forEach((b, i) => b.setAttribute("aria-current", i === current ? "step" : "false"));
    back.disabled = current === 0;
    next.disabled = current === steps.length - 1;
    for (const section of holder.children) section.hidden = section.id !== `step-${step.name}`;
    if (!built.has(step.name)) {
      const box = el("div", {});
      built.set(step.name, buildPanel(step, box, limit));
      holder.append(...box.children);
    }
    await built.get(step.name);
    path.dataset.step = step.name;
  }
  return show(0);
}

async function main() {
  const root = document.getElementById("panels"), nav = document.getElementById("contents");
  try {
    const { panels, upload_limit: limit } = await getJSON("/api/panels");
    const { steps } = await getJSON("/api/path");
    panels.forEach((p, i) => nav.append(el("a", { href: `#${p.name}`, text: `${i + 1}. ${p.title}` })));
    await Promise.all([guidedPath(steps, limit), ...panels.map(p => buildPanel(p, root, limit))]);
    document.body.dataset.ready = "yes";
  } catch (e) {
    root.append(el("p", { class: "error", role: "alert", text: e.message }));
  }
}

main();
