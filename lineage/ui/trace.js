// A trace: its spans on a timeline, the trace's records on the same time axis below them
// (each at the moment it was recorded, beside the span that noted producing it), then the list.

import { api, colour, el, enc, fill, link, plural, svg } from "./dom.js";
import { recordTable } from "./record.js";

const ROW = 26;
const LABEL = 300;
const AXIS = 28;
const PRODUCED = "ctx.produced_ids";

function flatten(spans, depth = 0, rows = []) {
  for (const span of spans) {
    rows.push({ span, depth });
    flatten(span.children, depth + 1, rows);
  }
  return rows;
}

function millis(text) {
  return new Date(text).getTime();
}

function offset(ms) {
  return ms >= 1000 ? `+${(ms / 1000).toFixed(ms >= 10000 ? 0 : 1)} s` : `+${Math.round(ms)} ms`;
}

export function timeline(spans, records, width) {
  const rows = flatten(spans);
  const producedIn = new Map();
  for (const { span } of rows) {
    for (const id of span.attributes[PRODUCED] || []) producedIn.set(id, span);
  }
  const times = [
    ...rows.flatMap(({ span }) => [millis(span.start_time), millis(span.end_time)]),
    ...records.map((record) => millis(record.created_at)),
  ];
  const first = Math.min(...times);
  const span = Math.max(1, Math.max(...times) - first);
  const plot = width - LABEL - 16;
  const at = (ms) => LABEL + ((ms - first) / span) * plot;
  const height = AXIS + (rows.length + records.length) * ROW + (rows.length ? 18 : 0) + 8;
  const root = svg("svg", { class: "timeline", width, height, role: "img",
    "aria-label": `timeline of ${plural(rows.length, "span")} and ` +
      `${plural(records.length, "record")}` });
  const axis = svg("g", { class: "axis" });
  for (let i = 0; i <= 5; i += 1) {
    const x = LABEL + (plot * i) / 5;
    axis.append(svg("line", { x1: x, x2: x, y1: AXIS - 6, y2: height, class: "tick" }),
      svg("text", { x, y: AXIS - 10, "text-anchor": i === 0 ? "start" : i === 5 ? "end"
        : "middle" }, offset((span * i) / 5)));
  }
  root.append(axis);
  rows.forEach(({ span: s, depth }, index) => {
    const y = AXIS + index * ROW;
    const left = at(millis(s.start_time));
    const right = Math.max(left + 2, at(millis(s.end_time)));
    root.append(svg("g", { class: "span-row" + (s.status_code === "ERROR" ? " error" : ""),
      "data-span-id": s.span_id, "data-name": s.name },
    svg("title", {}, `${s.name}: ${s.duration_ms.toFixed(1)} ms` +
      (s.service_name ? ` (${s.service_name})` : "") +
      (s.status_message ? ` — ${s.status_message}` : "")),
    svg("text", { class: "span-name", x: 8 + depth * 14, y: y + 17 }, s.name),
    svg("rect", { class: "span-bar", x: left, y: y + 5, width: right - left, height: ROW - 10,
      rx: 3 }),
    svg("text", { class: "span-ms", x: Math.min(right + 6, width - 60), y: y + 17 },
      `${s.duration_ms.toFixed(1)} ms`)));
  });
  const top = AXIS + rows.length * ROW + (rows.length ? 18 : 0);
  if (rows.length) {
    root.append(svg("text", { class: "lane-title", x: 8, y: top - 5 }, "records"));
  }
  records.forEach((record, index) => {
    const y = top + index * ROW;
    const x = at(millis(record.created_at));
    const made = producedIn.get(record.context_id);
    const row = svg("g", { class: "record-row", "data-id": record.context_id },
      svg("title", {}, `${record.kind} ${record.context_id} at ${record.created_at}` +
        (made ? `, produced in span ${made.name}` : "")),
      svg("text", { class: "record-label", x: 8, y: y + 17 }, record.kind, " ",
        svg("tspan", { class: "record-id" }, record.context_id.slice(0, 28))),
      made ? svg("line", { class: "made-in", x1: at(millis(made.start_time)), x2:
        at(millis(made.end_time)), y1: y + 13, y2: y + 13 }) : null,
      svg("path", { class: "record-dot", d: `M ${x} ${y + 5} l 8 8 l -8 8 l -8 -8 z`,
        fill: colour(record.kind) }));
    root.append(row);
  });
  return root;
}

export async function showTrace(view, traceId) {
  const trace = await api(`v1/traces/${enc(traceId)}`);
  const holder = el("div", { className: "timeline-frame", id: "timeline" });
  const spanCount = flatten(trace.spans).length;
  fill(view,
    el("h1", {}, "Trace ", el("span", { className: "id" }, traceId)),
    el("p", { className: "muted" }, `${plural(spanCount, "span")} and ` +
      `${plural(trace.records.length, "record")} on one time axis: a bar is a span, a ` +
      "diamond the moment a record was committed (a line marks the span that noted " +
      "producing it). Walk back from an answer to see where it came from."),
    trace.spans_truncated ? el("div", { className: "warning", role: "status" },
      "Only the first spans of this trace are kept (max_spans_per_trace).") : null,
    spanCount ? null : el("div", { className: "warning", role: "status" }, "No spans " +
      "recorded for this trace: the otel extra's LineageSpanProcessor sends them."),
    holder,
    el("h2", {}, "Records"),
    recordTable(trace.records, false),
  );
  holder.append(timeline(trace.spans, trace.records, Math.max(640, holder.clientWidth - 2)));
}
