// The walk-back: an answer's lineage drawn by layers, the service's suspicious marks on it.

import { KIND_COLOURS, MARKS, api, el, enc, fill, kindChip, link, markPill, plural }
  from "./dom.js";
import { DagView } from "./graph.js";
import { showRecord } from "./record.js";

export async function showWalk(view, contextId, maxDepth) {
  fill(view, el("p", { className: "muted" }, `Walking back from ${contextId}…`));
  const depth = maxDepth ? `?max_depth=${enc(maxDepth)}` : "";
  const [walk, suspicious] = await Promise.all([
    api(`v1/contexts/${enc(contextId)}/lineage${depth}`),
    api(`v1/contexts/${enc(contextId)}/suspicious${depth}`),
  ]);
  const marks = new Map();
  for (const hop of suspicious.hops) {
    if (!marks.has(hop.context_id)) marks.set(hop.context_id, []);
    marks.get(hop.context_id).push(hop);
  }
  const start = walk.nodes.find((node) => node.context_id === contextId);
  const deepest = Math.max(...walk.nodes.map((node) => node.depth));
  const graph = new DagView({ records: walk.nodes, marks, start: contextId,
    label: `walk-back graph of ${contextId}`, onSelect: showRecord });
  fill(view,
    el("h1", {}, "Walk-back from ", el("span", { className: "id" }, contextId), " ",
      kindChip(start.kind)),
    el("p", { className: "muted" }, `${plural(walk.nodes.length, "record")}, ` +
      `${plural(deepest, "level")} down to the sources`,
      start.trace_id ? [" · trace ", link(start.trace_id, { trace: start.trace_id }, "id")]
        : null),
    suspiciousSummary(suspicious.hops, graph),
    walk.truncated ? el("div", { className: "warning", role: "status" },
      "The walk stopped at its depth limit: more ancestors lie beyond, and so may more " +
      "suspicious hops. ", link("Walk deeper", { walk: contextId, max_depth: 100 })) : null,
    graph.element,
    legend(),
  );
  graph.draw();
  graph.fit();
}

function suspiciousSummary(hops, graph) {
  if (!hops.length) {
    return el("div", { className: "verdict clean", id: "suspicious" },
      el("strong", {}, "No suspicious hops. "),
      "Within this walk every transform ran at one version, every document is its source's " +
      "newest revision, and no claim is judged hallucinated or unsupported: look at the " +
      "model steps (produced_by).");
  }
  const hopIds = new Set(hops.map((hop) => hop.context_id));
  return el("div", { className: "verdict suspect", id: "suspicious" },
    el("strong", {}, `${plural(hops.length, "suspicious mark")} on ${plural(hopIds.size, "hop")}`),
    el("ul", {}, hops.map((hop) => el("li", {},
      markPill(hop.reason), " ",
      el("button", { type: "button", className: "id linkish",
        onclick: () => graph.select(hop.context_id) }, hop.context_id),
      el("span", { className: "muted" }, ` ${hop.kind}, depth ${hop.depth}: `),
      hop.detail))));
}

function legend() {
  return el("section", { className: "legend", "aria-label": "legend" },
    el("h2", {}, "Legend"),
    el("div", { className: "legend-kinds" },
      Object.keys(KIND_COLOURS).filter((kind) => !["verdict", "tombstone"].includes(kind))
        .map((kind) => kindChip(kind))),
    el("p", { className: "muted" }, "The start is on top and every source on the bottom " +
      "layer; each record sits on the layer of its longest path from a source. Arrows point " +
      "from a source to what was derived from it; red arrows carry a marked hop's content on " +
      "towards the answer. Drag to pan, scroll or use + and − to zoom; a kind with many " +
      "records is folded into one box (marked records always stay drawn). Marks are " +
      "computed by the service (sql/suspicious_hops.sql):"),
    el("dl", { className: "legend-marks" }, Object.entries(MARKS).map(([reason, mark]) => [
      el("dt", { "data-reason": reason }, markPill(reason)),
      el("dd", {}, mark.explains),
    ])));
}
