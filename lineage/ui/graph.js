// A lineage DAG drawn by layers with dagre (vendor/dagre.min.js): the start at the top, every
// source on the bottom layer, each record on the layer of its longest path from a source,
// edges routed around the boxes. Pan by dragging, zoom with the wheel or the buttons; a kind
// with many records folds into one group box (marked records always stay drawn).

import { clip, colour, el, markLabel, svg } from "./dom.js";

const NODE_WIDTH = 210;
const NODE_HEIGHT = 60;
const GROUP_HEIGHT = 52;
const MARK_HEIGHT = 18;
const FOLD_AT = 24; // a kind with more records than this starts folded
const QUICK_ORDER_ABOVE = 300; // boxes; beyond, one ordering pass instead of dagre's best of many
const MIN_SCALE = 0.004; // a layer of a thousand boxes still fits the frame
const LEGIBLE = 0.35; // below this scale the boxes' text is left out (unreadable, slow)
const MAX_SCALE = 2.5;

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

export class DagView {
  // records: [{context_id, kind, parent_ids, ...}]; marks: Map id -> [{reason, detail}];
  // start: the id drawn on top and never folded; onSelect(record) when a box is chosen.
  constructor({ records, marks = new Map(), start = null, label, onSelect = () => {} }) {
    this.records = new Map(records.map((record) => [record.context_id, record]));
    this.marks = marks;
    this.start = start;
    this.label = label;
    this.onSelect = onSelect;
    this.counts = new Map();
    for (const record of this.records.values()) {
      this.counts.set(record.kind, (this.counts.get(record.kind) || 0) + 1);
    }
    this.folded = new Set([...this.counts].filter(([, n]) => n > FOLD_AT).map(([k]) => k));
    this.selected = null;
    this.view = { x: 0, y: 0, k: 1 };
    this.frame = el("div", { className: "graph-frame", id: "graph", tabindex: "-1" });
    this.toolbar = el("div", { className: "graph-tools", role: "toolbar",
      "aria-label": "graph controls" });
    this.element = el("div", { className: "graph" }, this.toolbar, this.frame);
    this.bindPanZoom();
    // The record panel opening narrows the frame: fit again so that nothing is cut off.
    let width = 0;
    new ResizeObserver(() => {
      if (!this.size || Math.abs(this.frame.clientWidth - width) < 2) return;
      width = this.frame.clientWidth;
      this.fit();
      if (this.selected) this.reveal(this.selected);
    }).observe(this.frame);
  }

  // Add records (the live view); keeps the current zoom unless nothing was drawn yet.
  add(records) {
    for (const record of records) {
      if (this.records.has(record.context_id)) continue;
      this.records.set(record.context_id, record);
      this.counts.set(record.kind, (this.counts.get(record.kind) || 0) + 1);
      if (this.counts.get(record.kind) === FOLD_AT + 1) this.folded.add(record.kind);
    }
  }

  // A hop is tainted when it is marked or derives from a tainted hop: the path a bad input
  // took up to the start.
  tainted() {
    const memo = new Map();
    const visit = (id) => {
      if (memo.has(id)) return memo.get(id);
      memo.set(id, false);
      const node = this.records.get(id);
      const bad = this.marks.has(id) || (node ? node.parent_ids.some((parent) =>
        this.records.has(parent) && visit(parent)) : false);
      memo.set(id, bad);
      return bad;
    };
    for (const id of this.records.keys()) visit(id);
    return memo;
  }

  shownAs(record) {
    const stays = record.context_id === this.start || this.marks.has(record.context_id);
    return this.folded.has(record.kind) && !stays ? `group:${record.kind}` : record.context_id;
  }

  // The boxes and edges drawn: records one by one, folded kinds one box each.
  plan() {
    const boxes = new Map();
    const tainted = this.tainted();
    for (const record of this.records.values()) {
      const id = this.shownAs(record);
      if (!boxes.has(id)) {
        boxes.set(id, id.startsWith("group:")
          ? { id, group: true, kind: record.kind, members: [], tainted: false }
          : { id, group: false, kind: record.kind, record });
      }
      const box = boxes.get(id);
      if (box.group) {
        box.members.push(record.context_id);
        box.tainted = box.tainted || tainted.get(record.context_id);
      } else {
        box.tainted = tainted.get(record.context_id);
      }
    }
    const edges = new Map();
    for (const record of this.records.values()) {
      const child = this.shownAs(record);
      for (const parentId of record.parent_ids) {
        const parentRecord = this.records.get(parentId);
        if (!parentRecord) continue;
        const parent = this.shownAs(parentRecord);
        if (parent === child) continue;
        const key = `${parent}\n${child}`;
        if (!edges.has(key)) edges.set(key, { parent, child, count: 0 });
        edges.get(key).count += 1;
      }
    }
    return { boxes, edges: [...edges.values()] };
  }

  height(box) {
    if (box.group) return GROUP_HEIGHT;
    return NODE_HEIGHT + (this.marks.get(box.id) || []).length * MARK_HEIGHT;
  }

  layout(plan) {
    const g = new dagre.graphlib.Graph();
    // Edges run from what was derived to what it was derived from, so that the sources are
    // dagre's sinks: longest-path ranking puts every sink on the last layer and each record
    // on the layer of its longest path from a source.
    g.setGraph({ rankdir: "TB", ranker: "longest-path", nodesep: 28, ranksep: 50,
      edgesep: 14, marginx: 24, marginy: 24 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const box of plan.boxes.values()) {
      g.setNode(box.id, { width: NODE_WIDTH, height: this.height(box) });
    }
    for (const edge of plan.edges) g.setEdge(edge.child, edge.parent);
    // dagre's best-of-many ordering sweeps cost most of a big layout (1,000 boxes: 13 s to 5 s)
    dagre.layout(g, { disableOptimalOrderHeuristic: plan.boxes.size > QUICK_ORDER_ABOVE });
    return g;
  }

  draw() {
    const began = performance.now();
    const plan = this.plan();
    const g = this.layout(plan);
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
      const bad = plan.boxes.get(edge.parent).tainted;
      edgeLayer.append(svg("path", {
        d: through(points), class: bad ? "edge tainted" : "edge",
        "data-child": edge.child, "data-parent": edge.parent,
        "marker-end": `url(#${bad ? "arrow-tainted" : "arrow"})`,
      }, svg("title", {}, edge.count > 1
        ? `${edge.count} records of ${edge.child} derive from ${edge.parent}`
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
    this.renderMs = performance.now() - began;
    root.dataset.renderMs = this.renderMs.toFixed(1);
    root.dataset.boxes = String(plan.boxes.size);
    if (this.selected) this.highlight(this.selected);
    return this.element;
  }

  drawTools(plan) {
    const kinds = [...this.counts].sort((a, b) => b[1] - a[1]);
    const foldable = kinds.filter(([, count]) => count > 1);
    this.toolbar.replaceChildren(
      el("button", { type: "button", className: "quiet", "data-zoom": "in",
        "aria-label": "zoom in", onclick: () => this.zoomBy(1.25) }, "+"),
      el("button", { type: "button", className: "quiet", "data-zoom": "out",
        "aria-label": "zoom out", onclick: () => this.zoomBy(0.8) }, "−"),
      el("button", { type: "button", className: "quiet", "data-zoom": "fit",
        onclick: () => this.fit() }, "Fit"),
      el("button", { type: "button", className: "quiet", "data-fold": "none",
        title: "draw every record, however many", onclick: () => this.unfoldAll() }, "Draw all"),
      el("span", { className: "muted" }, `${plan.boxes.size.toLocaleString()} boxes` +
        (foldable.length ? " · fold a kind:" : "")),
      ...foldable.map(([kind, count]) => {
        const folded = this.folded.has(kind);
        const chip = el("button", {
          type: "button", className: "fold-toggle" + (folded ? " folded" : ""),
          "data-kind": kind, "aria-pressed": folded ? "true" : "false",
          title: folded ? `draw the ${count} ${kind} records one by one`
            : `fold the ${kind} records into one box`,
          onclick: () => this.toggle(kind),
        }, `${kind} ${count.toLocaleString()}`);
        chip.style.setProperty("--kind", colour(kind));
        return chip;
      }),
    );
  }

  unfoldAll() {
    this.folded.clear();
    this.draw();
    this.fit();
  }

  toggle(kind) {
    if (this.folded.has(kind)) this.folded.delete(kind);
    else this.folded.add(kind);
    this.draw();
    this.fit();
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
      svg("text", { class: "kind-label", x: 10, y: 13 }, node.kind),
      svg("text", { class: "node-id", x: 10, y: 35 }, clip(node.context_id, 24)),
      svg("text", { class: "node-detail", x: 10, y: 51 }, clip(nodeDetail(node), 34)),
    );
    if (marks.length) {
      group.append(svg("text", { class: "mark-count", x: NODE_WIDTH - 10, y: 13,
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

  groupBox(box, left, top) {
    const count = box.members.length;
    const group = svg("g", {
      class: "node group", transform: `translate(${left} ${top})`, tabindex: "0",
      role: "button", "data-kind": box.kind, "data-count": String(count), "data-id": box.id,
      "aria-label": `${count} ${box.kind} records folded: press to draw them`,
      onclick: () => this.toggle(box.kind),
      onkeydown: (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          this.toggle(box.kind);
        }
      },
    });
    group.style.setProperty("--kind", colour(box.kind));
    group.append(
      svg("title", {}, `${count} ${box.kind} records, folded`),
      svg("rect", { class: "box stack", x: 6, y: 6, width: NODE_WIDTH, height: GROUP_HEIGHT,
        rx: 8 }),
      svg("rect", { class: "box", width: NODE_WIDTH, height: GROUP_HEIGHT, rx: 8 }),
      svg("rect", { class: "band", width: 8, height: GROUP_HEIGHT, rx: 4 }),
      svg("text", { class: "node-id", x: 18, y: 23 }, `${count.toLocaleString()} × ${box.kind}`),
      svg("text", { class: "node-detail", x: 18, y: 41 }, "folded · click to draw each"),
    );
    return group;
  }

  // --- pan and zoom ----------------------------------------------------------------------

  apply() {
    const { x, y, k } = this.view;
    if (this.viewport) this.viewport.setAttribute("transform", `translate(${x} ${y}) scale(${k})`);
    this.frame.dataset.scale = k.toFixed(3);
    this.frame.classList.toggle("overview", k < LEGIBLE);
  }

  // The whole graph in view, at most life size; the frame as tall as that needs, within the
  // window.
  fit() {
    const width = this.frame.clientWidth || 800;
    const tallest = Math.max(320, window.innerHeight * 0.8);
    const k = Math.max(MIN_SCALE, Math.min(1, width / this.size.width,
      tallest / this.size.height));
    this.frame.style.height = `${Math.max(240, Math.min(tallest, this.size.height * k))}px`;
    const height = this.frame.clientHeight;
    this.view = { k, x: (width - this.size.width * k) / 2,
      y: Math.max(0, (height - this.size.height * k) / 2) };
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

  highlight(id) {
    for (const box of this.svg.querySelectorAll(".node")) {
      box.classList.toggle("selected", box.dataset.id === id);
    }
    for (const edge of this.svg.querySelectorAll(".edge")) {
      const touches = edge.dataset.child === id || edge.dataset.parent === id;
      edge.classList.toggle("selected", touches);
      edge.classList.toggle("faded", !touches);
      const tainted = edge.classList.contains("tainted");
      edge.setAttribute("marker-end",
        `url(#${touches ? "arrow-selected" : tainted ? "arrow-tainted" : "arrow"})`);
    }
  }

  select(contextId) {
    const record = this.records.get(contextId);
    if (!record) return;
    if (this.shownAs(record) !== contextId) {
      this.folded.delete(record.kind);
      this.draw();
      this.fit();
    }
    this.selected = contextId;
    this.highlight(contextId);
    this.reveal(contextId);
    this.onSelect(record, this.marks.get(contextId) || []);
  }
}
