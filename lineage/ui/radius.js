// A blast radius: its records counted by kind on each layer (the depth below the start) and
// drawn as a graph, the chosen kind's records a page at a time, and its ids as files.

import { api, clip, colour, el, fill, go, kindChip, link, plural, svg } from "./dom.js";
import { recordTable } from "./record.js";

const PAGE_SIZE = 100;
const BOX_WIDTH = 184;
const BOX_HEIGHT = 54;
const GAP = 22;
const LAYER_GAP = 46;

// Each record of layer d + 1 derives from one of layer d (depth is the shortest way down), so
// one arrow from each layer to the next says all the graph knows without drawing every edge.
export function layerGraph(layers, chosen, here) {
  const widest = Math.max(1, ...layers.map((layer) => Object.keys(layer.counts_by_kind).length));
  const width = Math.max(640, widest * (BOX_WIDTH + GAP) + 120);
  const height = layers.length * (BOX_HEIGHT + LAYER_GAP) + 10;
  const root = svg("svg", { class: "radius-graph", width, height, viewBox: `0 0 ${width} ` +
    `${height}`, role: "img", "aria-label": "blast radius by layer and kind" });
  root.append(svg("defs", {}, svg("marker", { id: "layer-arrow", viewBox: "0 0 10 10",
    refX: 9, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto" },
  svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#94a3b8" }))));
  layers.forEach((layer, index) => {
    const kinds = Object.entries(layer.counts_by_kind);
    const y = 4 + index * (BOX_HEIGHT + LAYER_GAP);
    const rowWidth = kinds.length * BOX_WIDTH + (kinds.length - 1) * GAP;
    const start = 100 + (width - 100 - rowWidth) / 2;
    root.append(svg("text", { class: "layer-label", x: 8, y: y + BOX_HEIGHT / 2 + 4 },
      index === 0 ? "start" : `depth ${layer.depth}`));
    if (index > 0) {
      root.append(svg("line", { class: "layer-edge", x1: width / 2 + 50, x2: width / 2 + 50,
        y1: y - LAYER_GAP + 4, y2: y - 4, "marker-end": "url(#layer-arrow)" }));
    }
    kinds.forEach(([kind, count], column) => {
      const x = start + column * (BOX_WIDTH + GAP);
      const box = svg("g", {
        class: "layer-box" + (kind === chosen ? " chosen" : ""), tabindex: "0", role: "button",
        transform: `translate(${x} ${y})`, "data-depth": String(layer.depth),
        "data-kind": kind, "data-count": String(count),
        "aria-label": `${count} ${kind} at depth ${layer.depth}: list the ${kind} records`,
        onclick: () => go({ ...here, kind }),
        onkeydown: (event) => {
          if (event.key === "Enter") go({ ...here, kind });
        },
      });
      box.style.setProperty("--kind", colour(kind));
      box.append(
        svg("rect", { class: "box", width: BOX_WIDTH, height: BOX_HEIGHT, rx: 8 }),
        svg("rect", { class: "band", width: 8, height: BOX_HEIGHT, rx: 4 }),
        svg("text", { class: "layer-count", x: 18, y: 24 }, count.toLocaleString()),
        svg("text", { class: "node-detail", x: 18, y: 42 }, clip(kind === chosen
          ? `${kind} · listed below` : `${kind} · click to list`, 26)),
      );
      root.append(box);
    });
  });
  return root;
}

export async function showRadius(view, start, params) {
  const kind = params.get("kind") || "answer";
  const offset = Number(params.get("offset") || 0);
  const query = new URLSearchParams({ ...start, kind, offset, limit: PAGE_SIZE });
  const radius = await api(`v1/impact/page?${query}`);
  const here = start.source_uri ? { source: start.source_uri } : { radius: start.context_id };
  const counts = radius.summary.counts_by_kind;
  const files = (fileKind) => ["csv", "json"].map((format) => el("a", {
    className: "button", download: "",
    href: "v1/impact/ids?" + new URLSearchParams({ ...start, kind: fileKind, format }),
    "data-download": `${fileKind}-${format}`,
  }, format.toUpperCase()));
  const last = Math.min(offset + radius.nodes.length, radius.matching);
  const began = performance.now();
  const graph = layerGraph(radius.layers, kind, here);
  graph.dataset.renderMs = (performance.now() - began).toFixed(1);
  const listed = kind === "any" ? "All" : kind;
  fill(view,
    el("h1", {}, "Blast radius of ", el("span", { className: "id" },
      start.source_uri || start.context_id)),
    el("p", { className: "muted" }, start.source_uri
      ? "Every revision recorded for this source URI and everything derived from them, "
      : "This record and everything derived from it, ", "by layer: depth is the shortest " +
      "number of derivations from the start. Click a box to list its kind."),
    el("div", { className: "counts", id: "counts" },
      el("span", { className: "total" }, plural(radius.summary.total, "record")),
      Object.entries(counts).map(([countKind, count]) => link(
        [kindChip(countKind), ` ${count.toLocaleString()}`],
        { ...here, kind: countKind }, countKind === kind ? "count current" : "count"))),
    radius.summary.truncated ? el("div", { className: "warning", role: "status" },
      "The walk stopped at its depth limit: more records lie beyond; the counts and files " +
      "are incomplete.") : null,
    el("div", { className: "graph radius", id: "radius-graph" }, graph),
    el("div", { className: "downloads" },
      el("span", {}, `Download ${kind === "any" ? "all" : kind} ids:`), files(kind),
      kind !== "any" ? [el("span", {}, "all ids:"), files("any")] : null),
    el("details", { className: "listing", id: "listing", open: true },
      el("summary", {}, kind === "answer" ? `Affected answers (${radius.matching.toLocaleString()})`
        : `${listed} records (${radius.matching.toLocaleString()})`),
      radius.matching
        ? [recordTable(radius.nodes, true), el("div", { className: "pager" },
          el("span", {}, `${(offset + 1).toLocaleString()}–${last.toLocaleString()} of ` +
            `${radius.matching.toLocaleString()}`),
          offset > 0 ? link("Previous", { ...here, kind,
            offset: Math.max(0, offset - PAGE_SIZE) }, "button") : null,
          radius.next_offset !== null ? link("Next", { ...here, kind,
            offset: radius.next_offset }, "button") : null)]
        : el("p", { className: "muted" }, `No ${kind} records derive from it.`)),
  );
}
