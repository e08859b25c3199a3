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
  const began = performance.now();
  graph.draw();
  graph.fit();
  // Until the browser has laid out and painted the graph: what a reader waits for.
  requestAnimationFrame(() => setTimeout(() => {
    graph.frame.dataset.paintedMs = (performance.now() - began).toFixed(1);
  }));
}

const LISTED = 12; // records of a mark group listed under it; the find box reaches the rest

// The marks grouped by what is suspect, then by the kind and depth of the hops: one row per
// reason however many records carry it, each group a button that highlights its path.
function suspiciousSummary(hops, graph) {
  if (!hops.length) {
    return el("div", { className: "verdict clean", id: "suspicious" },
      el("strong", {}, "No suspicious hops. "),
      "Within this walk every transform ran at one version, every document is its source's " +
      "newest revision, and no claim is judged hallucinated or unsupported: look at the " +
      "model steps (produced_by).");
  }
  const hopIds = new Set(hops.map((hop) => hop.context_id));
  const byReason = new Map();
  for (const hop of hops) {
    if (!byReason.has(hop.reason)) byReason.set(hop.reason, new Map());
    const groups = byReason.get(hop.reason);
    const where = `${hop.kind}\n${hop.depth}`;
    if (!groups.has(where)) groups.set(where, []);
    groups.get(where).push(hop);
  }
  const shown = el("div", { className: "mark-detail", id: "mark-detail", hidden: true });
  const rows = [...byReason].sort((a, b) => size(b[1]) - size(a[1])).map(([reason, groups]) =>
    el("li", { "data-reason": reason }, markPill(reason), " ",
      el("span", { className: "muted" }, plural(size(groups), "hop"), ": "),
      [...groups.values()].sort((a, b) => b.length - a.length).map((group) => {
        const [{ kind, depth }] = group;
        const button = el("button", {
          type: "button", className: "mark-group", "data-reason": reason, "data-kind": kind,
          "data-depth": String(depth), "data-count": String(group.length),
          title: "highlight the path from these hops up to the answer, and list them",
          onclick: () => {
            for (const other of document.querySelectorAll("#suspicious .mark-group")) {
              other.classList.toggle("chosen", other === button);
            }
            graph.showPath(group.map((hop) => hop.context_id));
            listGroup(shown, reason, group, graph);
          },
        }, kindChip(kind), ` depth ${depth} `, el("strong", {}, `× ${group.length}`));
        return button;
      })));
  return el("div", { className: "verdict suspect", id: "suspicious" },
    el("strong", {}, `${plural(hops.length, "suspicious mark")} on ${plural(hopIds.size, "hop")}`),
    el("span", { className: "muted" }, " · by reason, then kind and depth: choose a group to " +
      "highlight its path up to the answer"),
    el("ul", { className: "mark-groups" }, rows),
    shown);
}

function size(groups) {
  return [...groups.values()].reduce((n, group) => n + group.length, 0);
}

// A chosen mark group's records: their ids, to focus one, and the first one's reason in full.
function listGroup(holder, reason, group, graph) {
  holder.hidden = false;
  fill(holder,
    el("p", {}, markPill(reason), ` ${plural(group.length, group[0].kind + " record")} at ` +
      `depth ${group[0].depth}: `, el("span", { className: "muted" }, group[0].detail,
      group.length > 1 ? " (the first; each says why)" : "")),
    el("p", { className: "mark-ids" }, group.slice(0, LISTED).map((hop) => el("button", {
      type: "button", className: "id linkish", "data-id": hop.context_id, title: hop.detail,
      onclick: () => graph.focus(hop.context_id) }, hop.context_id)),
    group.length > LISTED ? el("span", { className: "muted" }, `and ${(group.length - LISTED)
      .toLocaleString()} more: open their group in the graph, or find one by id`) : null));
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
      "towards the answer. A layer with more records than fit across is folded by kind and " +
      "source document into group boxes (⚠ counts their marked records): click one to open " +
      "it a page at a time. Drag to pan, scroll or use + and − to zoom (never below legible " +
      "labels; the minimap shows the rest), find a record by id to draw it and its path up " +
      "to the answer. Marks are computed by the service (sql/suspicious_hops.sql):"),
    el("dl", { className: "legend-marks" }, Object.entries(MARKS).map(([reason, mark]) => [
      el("dt", { "data-reason": reason }, markPill(reason)),
      el("dd", {}, mark.explains),
    ])));
}
