// A lineage DAG drawn by layers with dagre (vendor/dagre.min.js): the start at the top, every
// source on the bottom layer, each record on the layer of its longest path from a source.
// A walk of thousands of records still reads at life size: a layer holds at most as many boxes
// as fit across the frame, the rest folded by kind and source document into group boxes that
// open on click a page at a time. Pan and zoom stop where the smallest label is still 11 px; a
// minimap shows where the frame is when the graph outgrows it.

import { clip, colour, el, markLabel, svg } from "./dom.js";

const NODE_WIDTH = 200;
const NODE_HEIGHT = 54;
const MARK_HEIGHT = 18;
const NODE_GAP = 26;
const LAYER_GAP = 46;
const MARGIN = 20;
const PAGE = 12; // records, or documents' groups, that an opened group draws at a time
const SMALLEST_FONT = 12; // px at scale 1: style.css's smallest label in a box
const MIN_SCALE = 11 / SMALLEST_FONT; // zoomed out further, a label would render under 11 px
const MAX_SCALE = 2.5;
const QUICK_ORDER_ABOVE = 300; // boxes; beyond, one ordering pass instead of dagre's best of many
const MINIMAP_WIDTH = 200;
const MINIMAP_HEIGHT = 130;
const FINDINGS = 12; // matches listed under the find box

function arrowHead(id, paint) {
  return svg("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
    markerHeight: 7, orient: "auto-start-reverse" },
  svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: paint }));
}

// A smooth path through dagre's bend points (each bend a quadratic curve to the next midpoint).
function through(points) {
  let d = `M ${points[0].x} ${points[0].y}`;
  for (let i = 1; i < points.length - 1; i += 1) {
    const mx = (points[i].x + points[i + 1].x) / 2;
    const my = (points[i].y + points[i + 1].y) / 2;
    d += ` Q ${points[i].x} ${points[i].y} ${mx} ${my}`;
  }
  const last = points[points.length - 1];
  return d + ` L ${last.x} ${last.y}`;
}

export function nodeDetail(node) {
  if (node.kind === "document") return node.source_uri || node.transform_version || "";
  const made = node.produced_by || node.transform_version || node.transform || "";
  return [made, node.index_snapshot].filter(Boolean).join(" · ") || node.source_uri || "";
}

function groupBy(items, keyOf) {
  const groups = new Map();
  for (const item of items) {
    const key = keyOf(item);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(item);
  }
  return groups;
}

const SEVERAL = "*"; // a record derived from more than one document

export class DagView {
  // records: [{context_id, kind, parent_ids, ...}]; marks: Map id -> [{reason, detail}];
  // start: the id drawn on top and never folded; onSelect(record, marks) when a box is chosen.
  constructor({ records, marks = new Map(), start = null, label, onSelect = () => {} }) {
    this.records = new Map(records.map((record) => [record.context_id, record]));
    this.marks = marks;
    this.start = start;
    this.label = label;
    this.onSelect = onSelect;
    this.pinned = new Set(); // records drawn in a box of their own, whatever their group
    this.opened = new Map(); // group key -> how many of its records (or groups) are drawn
    this.path = null; // {ids, boxes, edges} highlighted from marked hops up to the start
    this.selected = null;
    this.stale = true;
    this.view = { x: 0, y: 0, k: 1 };
    this.frame = el("div", { className: "graph-frame", id: "graph", tabindex: "-1" });
    this.minimap = el("canvas", { className: "minimap", width: MINIMAP_WIDTH,
      height: MINIMAP_HEIGHT, "aria-label": "minimap: click to move the view", hidden: true });
    this.findings = el("ul", { className: "graph-findings", hidden: true });
    this.toolbar = el("div", { className: "graph-tools", role: "toolbar",
      "aria-label": "graph controls" });
    this.element = el("div", { className: "graph" }, this.toolbar,
      el("div", { className: "graph-stage" }, this.frame, this.minimap, this.findings));
    this.bindPanZoom();
    this.bindMinimap();
    // The record panel opening narrows the frame: fit again so that nothing is cut off.
    let width = 0;
    new ResizeObserver(() => {
      if (!this.size || Math.abs(this.frame.clientWidth - width) < 2) return;
      width = this.frame.clientWidth;
      this.fit();
      if (this.selected) this.reveal(this.selected);
    }).observe(this.frame);
  }

  // Add records (the live view); the next draw places them.
  add(records) {
    for (const record of records) {
      if (this.records.has(record.context_id)) continue;
      this.records.set(record.context_id, record);
      this.stale = true;
    }
  }

  // --- what each record is: its layer, its document, whether a marked hop fed it ---------------

  prepare() {
    if (!this.stale) return;
    this.stale = false;
    const layer = new Map();
    const source = new Map();
    const tainted = new Map();
    // Iterative depth-first order (parents first): a walk can be thousands of records deep.
    for (const id of this.records.keys()) {
      if (layer.has(id)) continue;
      const stack = [[id, false]];
      while (stack.length) {
        const [at, parentsDone] = stack.pop();
        if (layer.has(at)) continue;
        const record = this.records.get(at);
        const parents = record.parent_ids.filter((p) => this.records.has(p) && p !== at);
        if (!parentsDone) {
          stack.push([at, true]);
          for (const parent of parents) if (!layer.has(parent)) stack.push([parent, false]);
          continue;
        }
        let rank = 0;
        let from = record.kind === "document" ? at : null;
        let bad = this.marks.has(at);
        for (const parent of parents) {
          rank = Math.max(rank, (layer.get(parent) ?? -1) + 1);
          const theirs = source.get(parent) ?? null;
          if (record.kind !== "document" && theirs !== null) {
            from = from === null || from === theirs ? theirs : SEVERAL;
          }
          bad = bad || tainted.get(parent) || false;
        }
        layer.set(at, rank);
        source.set(at, from);
        tainted.set(at, bad);
      }
    }
    this.layer = layer;
    this.source = source;
    this.tainted = tainted;
    const kinds = new Map();
    for (const record of this.records.values()) {
      kinds.set(record.kind, (kinds.get(record.kind) || 0) + 1);
    }
    this.kinds = kinds;
  }

  // Boxes a layer may hold side by side at life size.
  columns() {
    const width = this.frame.clientWidth || 1000;
    return Math.max(3, Math.floor((width - 2 * MARGIN + NODE_GAP) / (NODE_WIDTH + NODE_GAP)));
  }

  // --- folding: which records share a box ----------------------------------------------------

  // The boxes and edges drawn. Each layer draws its records one by one when they fit across the
  // frame, else folds them by kind and source document, else by kind; an opened group draws a
  // page of its records (or, folded by kind, of its documents' groups) and folds the rest.
  plan(columns) {
    const boxes = new Map();
    const owner = new Map();
    const single = (record) => {
      boxes.set(record.context_id, { id: record.context_id, group: false, kind: record.kind,
        record, members: [record] });
      owner.set(record.context_id, record.context_id);
    };
    const folded = (key, members, level, more = 0) => {
      boxes.set(key, { id: key, group: true, kind: members[0].kind, level, members, more,
        source: level === 1 ? this.source.get(members[0].context_id) : null });
      for (const record of members) owner.set(record.context_id, key);
    };
    const bySource = (record) => `${record.kind}|${this.source.get(record.context_id) ?? ""}`;
    const place = (members, level, parentKey) => {
      const groups = [...groupBy(members, level === 2 ? (r) => r.kind : bySource)];
      for (const [name, list] of groups) {
        const key = `${parentKey}|${name}`;
        if (list.length === 1) single(list[0]);
        else if (!this.opened.has(key)) folded(key, list, level);
        else if (level === 2 && groupBy(list, bySource).size > 1) {
          const shown = this.opened.get(key);
          const sources = [...groupBy(list, bySource).values()]
            .sort((a, b) => this.markedIn(b) - this.markedIn(a) || b.length - a.length);
          place(sources.slice(0, shown).flat(), 1, key);
          const rest = sources.slice(shown).flat();
          if (rest.length) folded(key, rest, 2, sources.length - shown);
        } else {
          const shown = this.opened.get(key);
          const ordered = [...list].sort((a, b) => this.markedIn([b]) - this.markedIn([a]));
          ordered.slice(0, shown).forEach(single);
          const rest = ordered.slice(shown);
          if (rest.length === 1) single(rest[0]);
          else if (rest.length) folded(key, rest, level, rest.length);
        }
      }
    };
    const byLayer = groupBy([...this.records.values()], (r) => this.layer.get(r.context_id));
    for (const [rank, records] of [...byLayer].sort((a, b) => b[0] - a[0])) {
      const free = records.filter((r) => !this.pins(r.context_id));
      records.filter((r) => this.pins(r.context_id)).forEach(single);
      const room = columns - (records.length - free.length);
      let level = 0;
      if (free.length > room) level = groupBy(free, bySource).size <= room ? 1 : 2;
      if (level === 0) free.forEach(single);
      else place(free, level, `layer${rank}`);
    }
    const edges = new Map();
    for (const record of this.records.values()) {
      const child = owner.get(record.context_id);
      for (const parentId of record.parent_ids) {
        if (!this.records.has(parentId)) continue;
        const parent = owner.get(parentId);
        if (parent === child) continue;
        const key = `${parent}\n${child}`;
        if (!edges.has(key)) edges.set(key, { key, parent, child, count: 0, tainted: false });
        const edge = edges.get(key);
        edge.count += 1;
        edge.tainted = edge.tainted || this.tainted.get(parentId);
      }
    }
    return { boxes, owner, edges: [...edges.values()] };
  }

  pins(id) {
    return id === this.start || this.pinned.has(id);
  }

  markedIn(records) {
    return records.reduce((n, record) => n + (this.marks.has(record.context_id) ? 1 : 0), 0);
  }

  height(box) {
    if (box.group) return NODE_HEIGHT;
    return NODE_HEIGHT + (this.marks.get(box.id) || []).length * MARK_HEIGHT;
  }

  layout(plan) {
    const g = new dagre.graphlib.Graph();
    // Edges run from what was derived to what it was derived from, so that the sources are
    // dagre's sinks: longest-path ranking puts every sink on the last layer and each record
    // on the layer of its longest path from a source.
    g.setGraph({ rankdir: "TB", ranker: "longest-path", nodesep: NODE_GAP, ranksep: LAYER_GAP,
      edgesep: 12, marginx: MARGIN, marginy: MARGIN });
    g.setDefaultEdgeLabel(() => ({}));
    for (const box of plan.boxes.values()) {
      g.setNode(box.id, { width: NODE_WIDTH, height: this.height(box) });
    }
    for (const edge of plan.edges) g.setEdge(edge.child, edge.parent);
    // dagre's best-of-many ordering sweeps cost most of a big layout (1,000 boxes: 13 s to 5 s)
    dagre.layout(g, { disableOptimalOrderHeuristic: plan.boxes.size > QUICK_ORDER_ABOVE });
    return g;
  }

  // --- drawing ---------------------------------------------------------------------------

  draw() {
    const began = performance.now();
    this.prepare();
    // Long edges take room beside the boxes too: fold harder until the layers fit across,
    // unless a reader opened groups (then the graph is as wide as they asked).
    let columns = this.columns();
    let plan;
    let g;
    for (;;) {
      plan = this.plan(columns);
      g = this.layout(plan);
      const fits = g.graph().width <= (this.frame.clientWidth || 1000);
      if (fits || this.opened.size || columns <= 3) break;
      columns -= 1;
    }
    this.drawn = plan;
    const size = g.graph();
    this.size = { width: size.width, height: size.height };
    const root = svg("svg", { role: "img", "aria-label": this.label, class: "graph-svg" });
    root.append(svg("defs", {},
      arrowHead("arrow", "#94a3b8"), arrowHead("arrow-tainted", "#dc2626"),
      arrowHead("arrow-selected", "#1d4ed8")));
    const viewport = svg("g", { class: "viewport" });
    const edgeLayer = svg("g", { class: "edges" });
    const nodeLayer = svg("g", { class: "nodes" });
    viewport.append(edgeLayer, nodeLayer);
    root.append(viewport);
    this.positions = new Map();
    for (const edge of plan.edges) {
      const points = [...g.edge(edge.child, edge.parent).points].reverse(); // parent to child
      const width = edge.count > 1 ? Math.min(7, 1.6 + Math.log2(edge.count) * 0.7) : null;
      edgeLayer.append(svg("path", {
        d: through(points), class: edge.tainted ? "edge tainted" : "edge",
        "data-child": edge.child, "data-parent": edge.parent, "data-count": edge.count,
        style: width ? `stroke-width: ${width.toFixed(1)}px` : null,
        "marker-end": `url(#${edge.tainted ? "arrow-tainted" : "arrow"})`,
      }, svg("title", {}, edge.count > 1
        ? `${edge.count.toLocaleString()} links from ${this.boxName(plan.boxes.get(edge.parent))}` +
          ` to ${this.boxName(plan.boxes.get(edge.child))}`
        : `${edge.child} was derived from ${edge.parent}`)));
    }
    for (const box of plan.boxes.values()) {
      const placed = g.node(box.id);
      const left = placed.x - NODE_WIDTH / 2;
      const top = placed.y - placed.height / 2;
      this.positions.set(box.id, placed);
      nodeLayer.append(box.group ? this.groupBox(box, left, top)
        : this.nodeBox(box.record, left, top, placed.height));
    }
    this.viewport = viewport;
    this.svg = root;
    this.frame.replaceChildren(root);
    this.drawTools(plan);
    this.decorate();
    this.renderMs = performance.now() - began;
    root.dataset.renderMs = this.renderMs.toFixed(1);
    root.dataset.boxes = String(plan.boxes.size);
    root.dataset.records = String(this.records.size);
    return this.element;
  }

  boxName(box) {
    if (!box.group) return box.id;
    return `${box.members.length.toLocaleString()} ${box.kind} records`;
  }

  drawTools(plan) {
    const folded = [...plan.boxes.values()].filter((box) => box.group).length;
    const find = el("input", { type: "search", className: "graph-find", id: "graph-find",
      placeholder: "find a record: id, kind, source, maker", "aria-label": "find a record",
      autocomplete: "off", spellcheck: "false",
      oninput: () => this.listFindings(find.value),
      onkeydown: (event) => {
        if (event.key === "Enter") {
          event.preventDefault();
          const [first] = this.find(find.value);
          if (first) this.focus(first.context_id);
        } else if (event.key === "Escape") {
          find.value = "";
          this.listFindings("");
        }
      },
    });
    this.toolbar.replaceChildren(
      el("button", { type: "button", className: "quiet", "data-zoom": "in",
        "aria-label": "zoom in", onclick: () => this.zoomBy(1.25) }, "+"),
      el("button", { type: "button", className: "quiet", "data-zoom": "out",
        "aria-label": "zoom out", onclick: () => this.zoomBy(0.8) }, "−"),
      el("button", { type: "button", className: "quiet", "data-zoom": "fit",
        onclick: () => this.fit() }, "Fit"),
      el("button", { type: "button", className: "quiet", "data-fold": "reset",
        title: "fold every opened group again and clear the highlighted path",
        disabled: !this.opened.size && !this.pinned.size && !this.path,
        onclick: () => this.reset() }, "Fold back"),
      find,
      el("span", { className: "muted", id: "graph-count" },
        `${this.records.size.toLocaleString()} records in ` +
        `${plan.boxes.size.toLocaleString()} boxes` +
        (folded ? ` · ${folded.toLocaleString()} folded groups: click one to open it` : "")),
    );
  }

  nodeBox(node, left, top, height) {
    const marks = this.marks.get(node.context_id) || [];
    const group = svg("g", {
      class: "node" + (marks.length ? " marked" : ""),
      transform: `translate(${left} ${top})`, tabindex: "0", role: "button",
      "data-id": node.context_id, "data-kind": node.kind,
      "aria-label": `${node.kind} ${node.context_id}` +
        (marks.length ? `, marked: ${marks.map((m) => markLabel(m.reason)).join(", ")}` : ""),
      onclick: () => this.select(node.context_id),
      onkeydown: (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          this.select(node.context_id);
        }
      },
    });
    group.style.setProperty("--kind", colour(node.kind));
    group.append(
      svg("title", {}, `${node.kind} ${node.context_id}`),
      svg("rect", { class: "box", width: NODE_WIDTH, height, rx: 8 }),
      svg("rect", { class: "band", width: NODE_WIDTH, height: 18, rx: 8 }),
      svg("rect", { class: "band", y: 10, width: NODE_WIDTH, height: 8 }),
      svg("text", { class: "kind-label", x: 10, y: 14 }, node.kind),
      svg("text", { class: "node-id", x: 10, y: 35 }, clip(node.context_id, 22)),
      svg("text", { class: "node-detail", x: 10, y: 49 }, clip(nodeDetail(node), 30)),
    );
    if (marks.length) {
      group.append(svg("text", { class: "mark-count", x: NODE_WIDTH - 10, y: 14,
        "text-anchor": "end" }, `⚠ ${marks.length}`));
    }
    marks.forEach((mark, index) => {
      const y = NODE_HEIGHT + index * MARK_HEIGHT;
      group.append(
        svg("rect", { class: "mark-band", x: 6, y: y - 4, width: NODE_WIDTH - 12,
          height: MARK_HEIGHT - 3, rx: 4 }),
        svg("text", { class: "mark-text", x: 12, y: y + 8, "data-reason": mark.reason },
          `⚠ ${markLabel(mark.reason)}`),
      );
    });
    return group;
  }

  // A document's name that fits a box: the last part of its source URI, else its id.
  sourceName(source) {
    if (source === SEVERAL) return "several documents";
    const document = this.records.get(source);
    const uri = (document && document.source_uri) || "";
    return uri.replace(/\/+$/, "").split("/").pop() || source || "no document";
  }

  groupBox(box, left, top) {
    const count = box.members.length;
    const marked = this.markedIn(box.members);
    const documents = new Set(box.members.map((r) => this.source.get(r.context_id)));
    documents.delete(null);
    const title = box.more ? `+${count.toLocaleString()} more ${box.kind}`
      : `${count.toLocaleString()} × ${box.kind}`;
    let detail;
    const source = box.level === 1 && this.records.get(box.source);
    if (box.level === 1) detail = `of ${this.sourceName(box.source)}`;
    else if (box.kind === "document") detail = `${count.toLocaleString()} sources`;
    else if (documents.size) {
      detail = `from ${documents.has(SEVERAL) ? "several" : documents.size.toLocaleString()}` +
        ` document${documents.size === 1 && !documents.has(SEVERAL) ? "" : "s"}`;
    } else detail = "derived from no document";
    const opens = box.more ? (box.level === 2 ? `${box.more} more documents' groups`
      : `${Math.min(PAGE, count)} more`) : box.level === 2 ? "by document" : `${Math.min(PAGE,
      count)} records`;
    const group = svg("g", {
      class: "node group" + (marked ? " marked" : "") + (box.more ? " more" : ""),
      transform: `translate(${left} ${top})`, tabindex: "0", role: "button",
      "data-kind": box.kind, "data-count": String(count), "data-id": box.id,
      "data-level": String(box.level), "data-marked": String(marked),
      "aria-label": `${title} folded, ${detail}` + (marked ? `, ${marked} marked` : "") +
        `: press to open ${opens}`,
      onclick: () => this.open(box.id),
      onkeydown: (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          this.open(box.id);
        }
      },
    });
    group.style.setProperty("--kind", colour(box.kind));
    group.append(
      svg("title", {}, `${title} ${detail}` +
        (source ? ` (${source.source_uri || source.context_id})` : "") +
        (marked ? `, ${marked.toLocaleString()} marked` : "") +
        ` · click to open ${opens}`),
      svg("rect", { class: "box stack", x: 5, y: 5, width: NODE_WIDTH - 5,
        height: NODE_HEIGHT - 5, rx: 8 }),
      svg("rect", { class: "box", width: NODE_WIDTH - 5, height: NODE_HEIGHT - 5, rx: 8 }),
      svg("rect", { class: "band", width: 8, height: NODE_HEIGHT - 5, rx: 4 }),
      svg("text", { class: "node-id group-title", x: 16, y: marked ? 18 : 21 }, clip(title, 22)),
      svg("text", { class: "node-detail", x: 16, y: marked ? 32 : 38 }, clip(detail, 28)),
    );
    if (marked) {
      group.append(svg("text", { class: "group-marks", x: 16, y: 45 },
        `⚠ ${marked.toLocaleString()} marked`));
    }
    return group;
  }

  // --- opening groups, finding and focusing records --------------------------------------

  // Open a group a page further: its next records, or its next documents' groups, centred.
  open(key) {
    const box = this.drawn.boxes.get(key);
    this.opened.set(key, (this.opened.get(key) || 0) + PAGE);
    this.draw();
    this.fit();
    const out = box ? [...new Set(box.members.map((r) => this.drawn.owner.get(r.context_id)))]
      .map((id) => this.positions.get(id)) : [];
    const { k } = this.view;
    const width = this.frame.clientWidth;
    if (out.length && this.size.width * k > width) {
      const centre = (Math.min(...out.map((p) => p.x)) + Math.max(...out.map((p) => p.x))) / 2;
      this.view.x = Math.min(0, Math.max(width - this.size.width * k, width / 2 - centre * k));
      this.apply();
    }
  }

  reset() {
    this.opened.clear();
    this.pinned.clear();
    this.path = null;
    this.selected = null;
    this.draw();
    this.fit();
  }

  find(text) {
    const wanted = text.trim().toLowerCase();
    if (!wanted) return [];
    const found = [];
    for (const record of this.records.values()) {
      const fields = [record.context_id, record.kind, record.source_uri, record.produced_by,
        record.transform_version, record.index_snapshot];
      if (fields.some((value) => value && value.toLowerCase().includes(wanted))) {
        found.push(record);
      }
    }
    // An exact id first, then ids that start with the text, then the rest.
    const score = (r) => (r.context_id.toLowerCase() === wanted ? 0
      : r.context_id.toLowerCase().startsWith(wanted) ? 1 : 2);
    return found.sort((a, b) => score(a) - score(b));
  }

  listFindings(text) {
    const found = this.find(text);
    this.findings.hidden = !text.trim();
    this.findings.replaceChildren(
      el("li", { className: "muted" }, found.length
        ? `${found.length.toLocaleString()} match${found.length === 1 ? "" : "es"}` +
          (found.length > FINDINGS ? `, the first ${FINDINGS}:` : ":") : "no record matches"),
      ...found.slice(0, FINDINGS).map((record) => el("li", {}, el("button", {
        type: "button", className: "linkish id", "data-id": record.context_id,
        onclick: () => this.focus(record.context_id),
      }, record.context_id), el("span", { className: "muted" }, ` ${record.kind}` +
        (this.marks.has(record.context_id) ? " ⚠" : "")))),
    );
  }

  // A record found: its box of its own, the path from it up to the start, the record panel.
  focus(contextId) {
    this.findings.hidden = true;
    this.select(contextId);
  }

  // Highlight every path from these records (marked hops, say) up to the start, drawing each in
  // a box of its own when they are few.
  showPath(ids) {
    if (ids.length <= PAGE) ids.forEach((id) => this.pinned.add(id));
    this.path = { ids };
    this.selected = null;
    this.draw();
    this.fit();
    const first = this.drawn.owner.get(ids[0]);
    if (first) this.reveal(first);
  }

  // The records on a path from ids up to the start are ids and everything in the walk derived
  // from them: the boxes and the edges that hold those.
  pathThrough(ids) {
    const from = new Set(ids);
    const reached = new Map();
    for (const id of this.records.keys()) {
      const stack = [id];
      while (stack.length) {
        const at = stack[stack.length - 1];
        if (reached.has(at)) {
          stack.pop();
        } else if (from.has(at)) {
          reached.set(at, true);
          stack.pop();
        } else {
          const parents = this.records.get(at).parent_ids.filter((p) => this.records.has(p));
          const pending = parents.filter((p) => !reached.has(p));
          if (pending.length) stack.push(...pending);
          else {
            reached.set(at, parents.some((p) => reached.get(p)));
            stack.pop();
          }
        }
      }
    }
    const boxes = new Set();
    const edges = new Set();
    const owner = this.drawn.owner;
    for (const record of this.records.values()) {
      if (!reached.get(record.context_id)) continue;
      boxes.add(owner.get(record.context_id));
      for (const parent of record.parent_ids) {
        if (reached.get(parent)) edges.add(`${owner.get(parent)}\n${owner.get(record.context_id)}`);
      }
    }
    return { boxes, edges };
  }

  // The selected box, and the path (else the selected box's own edges) highlighted.
  decorate() {
    if (this.path) Object.assign(this.path, this.pathThrough(this.path.ids));
    const path = this.path;
    this.svg.classList.toggle("path-shown", Boolean(path));
    this.svg.dataset.pathBoxes = path ? String(path.boxes.size) : "0";
    for (const box of this.svg.querySelectorAll(".node")) {
      box.classList.toggle("selected", box.dataset.id === this.selected);
      box.classList.toggle("on-path", Boolean(path && path.boxes.has(box.dataset.id)));
    }
    for (const edge of this.svg.querySelectorAll(".edge")) {
      const on = path ? path.edges.has(`${edge.dataset.parent}\n${edge.dataset.child}`)
        : Boolean(this.selected) && (edge.dataset.child === this.selected ||
          edge.dataset.parent === this.selected);
      edge.classList.toggle("on-path", on);
      edge.classList.toggle("faded", (Boolean(path) || Boolean(this.selected)) && !on);
      const tainted = edge.classList.contains("tainted");
      edge.setAttribute("marker-end",
        `url(#${on ? "arrow-selected" : tainted ? "arrow-tainted" : "arrow"})`);
    }
    this.paintMinimap();
  }

  // --- pan and zoom ----------------------------------------------------------------------

  apply() {
    const { x, y, k } = this.view;
    if (this.viewport) this.viewport.setAttribute("transform", `translate(${x} ${y}) scale(${k})`);
    this.frame.dataset.scale = k.toFixed(3);
    this.paintMinimap();
  }

  // The whole graph in view at life size when it fits, else as much as legible labels allow,
  // the start's top centred; the frame as tall as that needs, within the window.
  fit() {
    if (!this.size) return;
    const width = this.frame.clientWidth || 800;
    const tallest = Math.max(360, window.innerHeight * 0.8);
    const k = Math.max(MIN_SCALE, Math.min(1, width / this.size.width,
      tallest / this.size.height));
    this.frame.style.height = `${Math.max(240, Math.min(tallest, this.size.height * k))}px`;
    const height = this.frame.clientHeight;
    let x = (width - this.size.width * k) / 2;
    const start = this.start && this.positions.get(this.start);
    if (x < 0 && start) {
      x = Math.min(0, Math.max(width - this.size.width * k, width / 2 - start.x * k));
    }
    this.view = { k, x, y: Math.max(0, (height - this.size.height * k) / 2) };
    this.apply();
  }

  zoomBy(factor, cx = this.frame.clientWidth / 2, cy = this.frame.clientHeight / 2) {
    const k = Math.min(MAX_SCALE, Math.max(MIN_SCALE, this.view.k * factor));
    const applied = k / this.view.k;
    this.view.x = cx - (cx - this.view.x) * applied;
    this.view.y = cy - (cy - this.view.y) * applied;
    this.view.k = k;
    this.apply();
  }

  bindPanZoom() {
    let drag = null;
    this.frame.addEventListener("wheel", (event) => {
      event.preventDefault();
      const bounds = this.frame.getBoundingClientRect();
      this.zoomBy(Math.exp(-event.deltaY * 0.0015), event.clientX - bounds.left,
        event.clientY - bounds.top);
    }, { passive: false });
    this.frame.addEventListener("pointerdown", (event) => {
      if (event.button !== 0 || event.target.closest(".node")) return;
      drag = { x: event.clientX, y: event.clientY, vx: this.view.x, vy: this.view.y };
      this.frame.setPointerCapture(event.pointerId);
      this.frame.classList.add("panning");
    });
    this.frame.addEventListener("pointermove", (event) => {
      if (!drag) return;
      this.view.x = drag.vx + event.clientX - drag.x;
      this.view.y = drag.vy + event.clientY - drag.y;
      this.apply();
    });
    const stop = () => {
      drag = null;
      this.frame.classList.remove("panning");
    };
    this.frame.addEventListener("pointerup", stop);
    this.frame.addEventListener("pointercancel", stop);
  }

  // --- the minimap: every box, the frame's part of the graph outlined ---------------------

  minimapScale() {
    return Math.min(MINIMAP_WIDTH / this.size.width, MINIMAP_HEIGHT / this.size.height);
  }

  paintMinimap() {
    if (!this.size || !this.drawn) return;
    const { k } = this.view;
    const outgrown = this.size.width * k > this.frame.clientWidth + 1 ||
      this.size.height * k > this.frame.clientHeight + 1;
    this.minimap.hidden = !outgrown;
    if (!outgrown) return;
    const context = this.minimap.getContext("2d");
    const s = this.minimapScale();
    context.clearRect(0, 0, MINIMAP_WIDTH, MINIMAP_HEIGHT);
    for (const [id, placed] of this.positions) {
      const box = this.drawn.boxes.get(id);
      const marked = box.group ? this.markedIn(box.members) : this.marks.has(id);
      context.fillStyle = marked ? "#dc2626" : colour(box.kind);
      context.globalAlpha = this.path && !this.path.boxes.has(id) ? 0.3 : 0.9;
      context.fillRect((placed.x - NODE_WIDTH / 2) * s, (placed.y - placed.height / 2) * s,
        Math.max(2, NODE_WIDTH * s), Math.max(2, placed.height * s));
    }
    context.globalAlpha = 1;
    context.strokeStyle = "#1d4ed8";
    context.lineWidth = 2;
    context.strokeRect(-this.view.x / k * s, -this.view.y / k * s,
      this.frame.clientWidth / k * s, this.frame.clientHeight / k * s);
  }

  bindMinimap() {
    let dragging = false;
    const moveTo = (event) => {
      const bounds = this.minimap.getBoundingClientRect();
      const s = this.minimapScale();
      const gx = (event.clientX - bounds.left) / s;
      const gy = (event.clientY - bounds.top) / s;
      this.view.x = this.frame.clientWidth / 2 - gx * this.view.k;
      this.view.y = this.frame.clientHeight / 2 - gy * this.view.k;
      this.apply();
    };
    this.minimap.addEventListener("pointerdown", (event) => {
      dragging = true;
      this.minimap.setPointerCapture(event.pointerId);
      moveTo(event);
    });
    this.minimap.addEventListener("pointermove", (event) => {
      if (dragging) moveTo(event);
    });
    this.minimap.addEventListener("pointerup", () => {
      dragging = false;
    });
  }

  // Bring a box into the frame, centred, when it is outside.
  reveal(id) {
    const placed = this.positions.get(id);
    if (!placed) return;
    const { k } = this.view;
    const x = placed.x * k + this.view.x;
    const y = placed.y * k + this.view.y;
    const width = this.frame.clientWidth;
    const height = this.frame.clientHeight;
    if (x > 40 && x < width - 40 && y > 30 && y < height - 30) return;
    this.view.x = width / 2 - placed.x * k;
    this.view.y = height / 2 - placed.y * k;
    this.apply();
  }

  // --- choosing a record ---------------------------------------------------------------

  // A record chosen: in a box of its own (out of its group), the path from it up to the start
  // highlighted, brought into view, shown in the record panel.
  select(contextId) {
    const record = this.records.get(contextId);
    if (!record) return;
    this.selected = contextId;
    this.path = contextId === this.start ? null : { ids: [contextId] };
    if (this.drawn.owner.get(contextId) !== contextId) {
      this.pinned.add(contextId);
      this.draw();
      this.fit();
    } else {
      this.decorate();
    }
    this.reveal(contextId);
    this.onSelect(record, this.marks.get(contextId) || []);
  }
}
