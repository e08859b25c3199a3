// A lineage DAG drawn by layers with dagre (vendor/dagre.min.js): the start at the top, every
// source on the bottom layer, each record on the layer of its longest path from a source.
// A walk of thousands of records still reads at life size: a layer holds at most as many boxes
// as fit across the frame, the rest folded by kind and source document into group boxes that
// open on click a page at a time. Pan and zoom stop where the smallest label is still 11 px; a
// minimap shows where the frame is when the graph outgrows it.

import { clip, colour, el, markLabel, svg } from "./dom.js";
import { PAGE, RecordGraph } from "./fold.js";
import { Minimap } from "./minimap.js";

const NODE_WIDTH = 200;
const NODE_HEIGHT = 54;
const MARK_HEIGHT = 18;
const NODE_GAP = 26;
const LAYER_GAP = 46;
const MARGIN = 20;
const SMALLEST_FONT = 12; // px at scale 1: style.css's smallest label in a box
const MIN_SCALE = 11 / SMALLEST_FONT; // zoomed out further, a label would render under 11 px
const MAX_SCALE = 2.5;
const QUICK_ORDER_ABOVE = 300; // boxes; beyond, one ordering pass instead of dagre's best of many
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

export class DagView {
  // records: [{context_id, kind, parent_ids, ...}]; marks: Map id -> [{reason, detail}];
  // start: the id drawn on top and never folded; onSelect(record, marks) when a box is chosen.
  constructor({ records, marks = new Map(), start = null, label, onSelect = () => {} }) {
    this.walk = new RecordGraph(records, marks);
    this.records = this.walk.records;
    this.marks = marks;
    this.start = start;
    this.label = label;
    this.onSelect = onSelect;
    this.pinned = new Set(); // records drawn in a box of their own, whatever their group
    this.opened = new Map(); // group key -> how many of its records (or groups) are drawn
    this.path = null; // {ids, boxes, edges} highlighted from marked hops up to the start
    this.selected = null;
    this.view = { x: 0, y: 0, k: 1 };
    this.frame = el("div", { className: "graph-frame", id: "graph", tabindex: "-1" });
    this.minimap = new Minimap((gx, gy) => {
      this.view.x = this.frame.clientWidth / 2 - gx * this.view.k;
      this.view.y = this.frame.clientHeight / 2 - gy * this.view.k;
      this.apply();
    });
    this.findings = el("ul", { className: "graph-findings", hidden: true });
    this.toolbar = el("div", { className: "graph-tools", role: "toolbar",
      "aria-label": "graph controls" });
    this.element = el("div", { className: "graph" }, this.toolbar,
      el("div", { className: "graph-stage" }, this.frame, this.minimap.canvas, this.findings));
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

  // Add records (the live view); the next draw places them.
  add(records) {
    this.walk.add(records);
  }

  // Boxes a layer may hold side by side at life size.
  columns() {
    const width = this.frame.clientWidth || 1000;
    return Math.max(3, Math.floor((width - 2 * MARGIN + NODE_GAP) / (NODE_WIDTH + NODE_GAP)));
  }

  // Records drawn in a box of their own, whatever their group: the start, and those chosen.
  pins(id) {
    return id === this.start || this.pinned.has(id);
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
    // Long edges take room beside the boxes too: fold harder until the layers fit across,
    // unless a reader opened groups (then the graph is as wide as they asked).
    let columns = this.columns();
    let plan;
    let g;
    for (;;) {
      plan = this.walk.plan(columns, (id) => this.pins(id), this.opened);
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
          const [first] = this.walk.find(find.value);
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

  groupBox(box, left, top) {
    const count = box.members.length;
    const marked = this.walk.markedIn(box.members);
    const documents = this.walk.documentsOf(box.members);
    const title = box.more ? `+${count.toLocaleString()} more ${box.kind}`
      : `${count.toLocaleString()} × ${box.kind}`;
    let detail;
    const source = box.level === 1 && this.records.get(box.source);
    if (box.level === 1) detail = `of ${this.walk.sourceName(box.source)}`;
    else if (box.kind === "document") detail = `${count.toLocaleString()} sources`;
    else if (documents.count) {
      detail = `from ${documents.several ? "several" : documents.count.toLocaleString()}` +
        ` document${documents.count === 1 && !documents.several ? "" : "s"}`;
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

  listFindings(text) {
    const found = this.walk.find(text);
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

  // The selected box, and the path (else the selected box's own edges) highlighted.
  decorate() {
    if (this.path) {
      Object.assign(this.path, this.walk.pathThrough(this.path.ids, this.drawn.owner));
    }
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

  // The minimap: every box, and the part of the graph in the frame.
  paintMinimap() {
    if (!this.size || !this.drawn) return;
    const { x, y, k } = this.view;
    const patches = [...this.positions].map(([id, placed]) => {
      const box = this.drawn.boxes.get(id);
      const marked = box.group ? this.walk.markedIn(box.members) : this.marks.has(id);
      return { x: placed.x - NODE_WIDTH / 2, y: placed.y - placed.height / 2, width: NODE_WIDTH,
        height: placed.height, paint: marked ? "#dc2626" : colour(box.kind),
        faded: Boolean(this.path && !this.path.boxes.has(id)) };
    });
    this.minimap.paint(this.size, patches, { x: -x / k, y: -y / k,
      width: this.frame.clientWidth / k, height: this.frame.clientHeight / k });
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
