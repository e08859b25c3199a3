"use strict";
// The lineage explorer. Everything it shows comes from the API; the suspicious marks are the
// service's (sql/suspicious_hops.sql): this file only draws them and never decides one.

const SVG = "http://www.w3.org/2000/svg";
const NODE_WIDTH = 210;
const NODE_HEIGHT = 60;
const MARK_HEIGHT = 18;
const COLUMN_GAP = 28;
const ROW_GAP = 60;
const ROW_LIMIT = 12; // nodes drawn per depth before the rest fold into a "+N more" box
const PAGE_SIZE = 100;

const KIND_COLOURS = {
  answer: "#15803d", claim: "#be185d", summary: "#b45309", reasoning: "#a16207",
  plan: "#92400e", retrieval: "#6d28d9", rerank: "#7e22ce", chunk: "#0f766e",
  embedding: "#0e7490", document: "#1d4ed8", query: "#475569", tool_call: "#4d7c0f",
  prompt: "#334155", verdict: "#6b7280", tombstone: "#111827",
};

const MARKS = {
  old_transform_version: {
    label: "old transform version",
    explains: "Made by an older version of a transform than another record of this same " +
      "walk-back (chunker@1.4 beside chunker@2.3.1): the answer mixes work from before and " +
      "after an upgrade. Other pipelines of the tenant do not count.",
  },
  snapshot_predates_revision: {
    label: "snapshot before revision",
    explains: "Carries an index snapshot built before the newest revision of a document it " +
      "derives from: the index served text the document no longer says.",
  },
  source_changed: {
    label: "source changed",
    explains: "A document whose content hash differs from the newest record for its source " +
      "URI: everything above it was built from an old revision.",
  },
  hallucinated_id: {
    label: "hallucinated id",
    explains: "A claim whose current verdict is hallucinated_id: it cites an id that was not " +
      "in its prompt.",
  },
  unsupported: {
    label: "unsupported",
    explains: "A claim, or a statement of a summary or other hand-off, whose current verdict " +
      "is unsupported: the text it cites, or its parents, do not entail it.",
  },
  cross_source_merge: {
    label: "cross-source merge",
    explains: "A summary or other hand-off with a statement that no single parent says, only " +
      "parents from different documents together: it fused two sources into one \"fact\".",
  },
};

const view = document.getElementById("view");
const panel = document.getElementById("record");

// --- small helpers -----------------------------------------------------------------------

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "className") node.className = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

function colour(kind) {
  return KIND_COLOURS[kind] || "#52525b";
}

function markLabel(reason) {
  return (MARKS[reason] && MARKS[reason].label) || reason.replaceAll("_", " ");
}

function clip(text, length) {
  return text.length > length ? text.slice(0, length - 1) + "…" : text;
}

function plural(count, word) {
  return `${count.toLocaleString()} ${word}${count === 1 ? "" : "s"}`;
}

function kindChip(kind) {
  const chip = el("span", { className: "kind" }, kind);
  chip.style.setProperty("--kind", colour(kind));
  return chip;
}

function markPill(reason) {
  return el("span", { className: "mark", title: (MARKS[reason] || {}).explains }, "⚠ ",
    markLabel(reason));
}

function link(text, params, className) {
  const href = "ui?" + new URLSearchParams(params);
  return el("a", {
    href, className,
    onclick: (event) => {
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
      event.preventDefault();
      go(params);
    },
  }, text);
}

function fill(parent, ...children) {
  parent.replaceChildren(...children.flat(Infinity).filter((child) => child !== null));
}

function show(...children) {
  fill(view, ...children);
}

function closeRecord() {
  panel.hidden = true;
  panel.replaceChildren();
}

// --- the API, and the key prompt when it answers 401 --------------------------------------

class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

let signingIn = null;

function askForKey() {
  if (signingIn) return signingIn;
  const dialog = document.getElementById("key-dialog");
  const form = document.getElementById("key-form");
  const input = document.getElementById("key");
  const error = document.getElementById("key-error");
  signingIn = new Promise((resolve) => {
    form.onsubmit = async (event) => {
      event.preventDefault();
      const response = await fetch("v1/session", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ key: input.value }),
      });
      if (!response.ok) {
        error.textContent = await problemDetail(response);
        error.hidden = false;
        return;
      }
      input.value = "";
      error.hidden = true;
      dialog.close();
      document.getElementById("sign-out").hidden = false;
      signingIn = null;
      resolve();
    };
  });
  dialog.showModal();
  input.focus();
  return signingIn;
}

async function problemDetail(response) {
  try {
    const body = await response.json();
    return body.detail || body.title || response.statusText;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

async function api(path) {
  for (;;) {
    const response = await fetch(path, { headers: { Accept: "application/json" } });
    if (response.status === 401) {
      await askForKey();
      continue;
    }
    if (!response.ok) throw new ApiError(response.status, await problemDetail(response));
    return response.json();
  }
}

function enc(id) {
  return encodeURIComponent(id);
}

// --- navigation: the URL holds the view, so a link or a reload shows the same thing -------

const VIEWS = {
  walk: (params) => showWalk(params.get("walk"), params.get("max_depth")),
  trace: (params) => showTrace(params.get("trace")),
  source: (params) => showRadius({ source_uri: params.get("source") }, params),
  radius: (params) => showRadius({ context_id: params.get("radius") }, params),
  q: (params) => search(params.get("q")),
};

function go(params, replace = false) {
  const url = "ui?" + new URLSearchParams(params);
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  route();
}

async function route() {
  const params = new URLSearchParams(location.search);
  const name = Object.keys(VIEWS).find((key) => params.has(key));
  closeRecord();
  document.getElementById("query").value =
    params.get(name) === null ? "" : params.get(name);
  try {
    await (name ? VIEWS[name](params) : showHome());
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    show(el("div", { className: "problem", role: "alert" }, el("strong", {}, "Not shown: "),
      error.message));
  }
}

async function search(text) {
  const query = text.trim();
  show(el("p", { className: "muted" }, `Looking up ${query}…`));
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(query)) return go({ source: query }, true);
  if (/^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$/.test(query)) {
    const record = await found(`v1/contexts/${enc(query)}`);
    if (record) {
      return go(record.kind === "document" ? { radius: query } : { walk: query }, true);
    }
    if (await found(`v1/traces/${enc(query)}`)) return go({ trace: query }, true);
  }
  const bySource = await api(`v1/contexts?source_uri=${enc(query)}&limit=1`);
  if (bySource.records.length) return go({ source: query }, true);
  show(el("div", { className: "problem", role: "alert" },
    el("strong", {}, query), " is not a context id, trace id or source URI in this tenant."));
}

async function found(path) {
  try {
    return await api(path);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

// --- home: what to type, and the answers recorded ------------------------------------------

async function showHome() {
  const list = el("ul", { className: "answers" });
  const more = el("button", { type: "button", className: "quiet", hidden: true }, "More");
  let cursor = null;
  async function page() {
    const params = new URLSearchParams({ kind: "answer", limit: "25" });
    if (cursor) params.set("cursor", cursor);
    const answers = await api(`v1/contexts?${params}`);
    for (const answer of answers.records) {
      list.append(el("li", {}, link(answer.context_id, { walk: answer.context_id }, "id"),
        el("span", { className: "muted" }, answer.produced_by || "", " · ",
          answer.created_at)));
    }
    cursor = answers.next;
    more.hidden = !cursor;
    if (!list.children.length) list.append(el("li", { className: "muted" }, "No answers yet."));
  }
  more.onclick = page;
  show(
    el("h1", {}, "Which hop made this answer wrong?"),
    el("p", {}, "Search an answer id to walk it back to its documents, with the suspicious " +
      "hops marked; a trace id to see what it recorded; a source URI for everything derived " +
      "from that document."),
    el("h2", {}, "Answers"),
    list, more,
  );
  await page();
}

// --- walk-back -----------------------------------------------------------------------------

async function showWalk(contextId, maxDepth) {
  show(el("p", { className: "muted" }, `Walking back from ${contextId}…`));
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
  const graph = new WalkGraph(walk, marks);
  show(
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
    el("div", { className: "graph", id: "graph" }, graph.draw()),
    legend(),
  );
  graph.centre();
}

function suspiciousSummary(hops, graph) {
  if (!hops.length) {
    return el("div", { className: "verdict clean", id: "suspicious" },
      el("strong", {}, "No suspicious hops. "),
      "Every hop was made by the newest transform versions from the newest revisions, and no " +
      "claim is judged hallucinated or unsupported: look at the model steps (produced_by).");
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

class WalkGraph {
  constructor(walk, marks) {
    this.walk = walk;
    this.marks = marks;
    this.nodes = new Map(walk.nodes.map((node) => [node.context_id, node]));
    this.expanded = new Set();
    this.selected = null;
    this.holder = null;
  }

  // A hop is tainted when it is marked or derives from a tainted hop: the path a bad input
  // took up to the answer.
  tainted() {
    const memo = new Map();
    const visit = (id) => {
      if (memo.has(id)) return memo.get(id);
      memo.set(id, false);
      const node = this.nodes.get(id);
      const bad = this.marks.has(id) ||
        (node ? node.parent_ids.some((parent) => this.nodes.has(parent) && visit(parent))
          : false);
      memo.set(id, bad);
      return bad;
    };
    for (const id of this.nodes.keys()) visit(id);
    return memo;
  }

  layout() {
    const rows = new Map();
    for (const node of this.walk.nodes) {
      if (!rows.has(node.depth)) rows.set(node.depth, []);
      rows.get(node.depth).push(node);
    }
    const depths = [...rows.keys()].sort((a, b) => a - b);
    const hidden = new Map();
    for (const depth of depths) {
      const row = rows.get(depth);
      if (row.length <= ROW_LIMIT || this.expanded.has(depth)) continue;
      row.sort((a, b) => Number(this.marks.has(b.context_id)) -
        Number(this.marks.has(a.context_id)) || a.context_id.localeCompare(b.context_id));
      hidden.set(depth, row.splice(ROW_LIMIT - 1));
    }
    const visible = new Set(depths.flatMap((depth) => rows.get(depth).map((n) => n.context_id)));
    const edges = this.walk.edges.filter((edge) =>
      visible.has(edge.child) && visible.has(edge.parent));
    const up = new Map(); // child -> parents
    const down = new Map(); // parent -> children
    for (const edge of edges) {
      if (!up.has(edge.child)) up.set(edge.child, []);
      if (!down.has(edge.parent)) down.set(edge.parent, []);
      up.get(edge.child).push(edge.parent);
      down.get(edge.parent).push(edge.child);
    }
    const x = new Map();
    const place = (depth) => {
      const row = rows.get(depth);
      const slots = row.length + (hidden.has(depth) ? 1 : 0);
      const width = slots * NODE_WIDTH + (slots - 1) * COLUMN_GAP;
      row.forEach((node, index) => {
        x.set(node.context_id, -width / 2 + index * (NODE_WIDTH + COLUMN_GAP) + NODE_WIDTH / 2);
      });
    };
    const order = (depth, neighbours) => {
      const centre = (node) => {
        const placed = (neighbours.get(node.context_id) || []).filter((id) => x.has(id));
        if (!placed.length) return x.has(node.context_id) ? x.get(node.context_id) : 0;
        return placed.reduce((sum, id) => sum + x.get(id), 0) / placed.length;
      };
      const keyed = rows.get(depth).map((node) => [centre(node), node]);
      keyed.sort((a, b) => a[0] - b[0] || a[1].context_id.localeCompare(b[1].context_id));
      rows.set(depth, keyed.map(([, node]) => node));
      place(depth);
    };
    // Barycentre sweeps, down, up and down again, keep crossings few.
    for (const depth of depths) order(depth, down);
    for (const depth of [...depths].reverse()) order(depth, up);
    for (const depth of depths) order(depth, down);

    const height = (node) => NODE_HEIGHT + (this.marks.get(node.context_id) || []).length *
      MARK_HEIGHT;
    const top = new Map();
    let y = 0;
    for (const depth of depths) {
      top.set(depth, y);
      y += Math.max(NODE_HEIGHT, ...rows.get(depth).map(height)) + ROW_GAP;
    }
    return { rows, depths, hidden, edges, x, top, height, bottom: y - ROW_GAP };
  }

  draw() {
    const plan = this.layout();
    const tainted = this.tainted();
    const spread = Math.max(...plan.depths.map((depth) => {
      const slots = plan.rows.get(depth).length + (plan.hidden.has(depth) ? 1 : 0);
      return slots * NODE_WIDTH + (slots - 1) * COLUMN_GAP;
    }));
    const pad = 24;
    const left = -spread / 2 - pad;
    const root = svg("svg", {
      viewBox: `${left} ${-pad} ${spread + 2 * pad} ${plan.bottom + 2 * pad}`,
      width: spread + 2 * pad, height: plan.bottom + 2 * pad, role: "img",
      "aria-label": `walk-back graph of ${this.walk.context_id}`,
    });
    root.append(svg("defs", {},
      arrowHead("arrow", "#94a3b8"), arrowHead("arrow-tainted", "#dc2626"),
      arrowHead("arrow-selected", "#1d4ed8")));
    const edgeLayer = svg("g", { class: "edges" });
    const nodeLayer = svg("g", { class: "nodes" });
    root.append(edgeLayer, nodeLayer);

    const nodeOf = (id) => this.nodes.get(id);
    const slot = (ids, id) => (ids.indexOf(id) - (ids.length - 1) / 2) *
      Math.min(16, (NODE_WIDTH - 40) / Math.max(ids.length, 1));
    const parentsOf = new Map();
    const childrenOf = new Map();
    for (const edge of plan.edges) {
      if (!parentsOf.has(edge.child)) parentsOf.set(edge.child, []);
      if (!childrenOf.has(edge.parent)) childrenOf.set(edge.parent, []);
      parentsOf.get(edge.child).push(edge.parent);
      childrenOf.get(edge.parent).push(edge.child);
    }
    for (const ids of [...parentsOf.values(), ...childrenOf.values()]) {
      ids.sort((a, b) => plan.x.get(a) - plan.x.get(b));
    }
    for (const edge of plan.edges) {
      const child = nodeOf(edge.child);
      const parent = nodeOf(edge.parent);
      const fromX = plan.x.get(edge.parent) + slot(childrenOf.get(edge.parent), edge.child);
      const fromY = plan.top.get(parent.depth);
      const toX = plan.x.get(edge.child) + slot(parentsOf.get(edge.child), edge.parent);
      const toY = plan.top.get(child.depth) + plan.height(child) + 4;
      const bend = Math.max(24, (fromY - toY) / 2);
      const bad = tainted.get(edge.parent);
      edgeLayer.append(svg("path", {
        d: `M ${fromX} ${fromY} C ${fromX} ${fromY - bend}, ${toX} ${toY + bend}, ${toX} ${toY}`,
        class: bad ? "edge tainted" : "edge",
        "data-child": edge.child, "data-parent": edge.parent,
        "marker-end": `url(#${bad ? "arrow-tainted" : "arrow"})`,
      }, svg("title", {}, `${edge.child} was derived from ${edge.parent}`)));
    }
    for (const depth of plan.depths) {
      for (const node of plan.rows.get(depth)) {
        nodeLayer.append(this.nodeBox(node, plan.x.get(node.context_id) - NODE_WIDTH / 2,
          plan.top.get(depth), plan.height(node)));
      }
      if (plan.hidden.has(depth)) {
        const row = plan.rows.get(depth);
        const last = row[row.length - 1];
        const boxX = plan.x.get(last.context_id) + NODE_WIDTH / 2 + COLUMN_GAP;
        nodeLayer.append(this.foldBox(depth, plan.hidden.get(depth), boxX, plan.top.get(depth)));
      }
    }
    const holder = el("div", { className: "graph-canvas" }, root);
    this.holder = holder;
    return holder;
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

  foldBox(depth, nodes, left, top) {
    const kinds = [...new Set(nodes.map((node) => node.kind))].join(", ");
    const group = svg("g", {
      class: "node fold", transform: `translate(${left} ${top})`, tabindex: "0",
      role: "button", "aria-label": `show ${nodes.length} more at depth ${depth}`,
      onclick: () => this.expand(depth),
      onkeydown: (event) => {
        if (event.key === "Enter") this.expand(depth);
      },
    });
    group.append(
      svg("rect", { class: "box", width: NODE_WIDTH, height: NODE_HEIGHT, rx: 8 }),
      svg("text", { class: "node-id", x: 10, y: 26 }, `+${nodes.length.toLocaleString()} more`),
      svg("text", { class: "node-detail", x: 10, y: 44 }, clip(`${kinds}: click to draw`, 32)),
    );
    return group;
  }

  // Depth 0 is drawn at x = 0, the middle of the widest row: start the scroll there.
  centre() {
    const frame = this.holder.parentElement;
    frame.scrollLeft = (frame.scrollWidth - frame.clientWidth) / 2;
  }

  expand(depth) {
    this.expanded.add(depth);
    const holder = this.holder;
    holder.replaceWith(this.draw());
    this.centre();
    if (this.selected) this.select(this.selected);
  }

  select(contextId) {
    this.selected = contextId;
    const canvas = this.holder;
    for (const box of canvas.querySelectorAll(".node")) {
      box.classList.toggle("selected", box.dataset.id === contextId);
    }
    for (const edge of canvas.querySelectorAll(".edge")) {
      const touches = edge.dataset.child === contextId || edge.dataset.parent === contextId;
      edge.classList.toggle("selected", touches);
      edge.classList.toggle("faded", !touches);
      const tainted = edge.classList.contains("tainted");
      edge.setAttribute("marker-end",
        `url(#${touches ? "arrow-selected" : tainted ? "arrow-tainted" : "arrow"})`);
    }
    const box = canvas.querySelector(`.node[data-id="${CSS.escape(contextId)}"]`);
    if (box) box.scrollIntoView({ block: "nearest", inline: "center", behavior: "smooth" });
    const node = this.nodes.get(contextId);
    if (node) showRecord(node, this.marks.get(contextId) || []);
  }
}

function arrowHead(id, paint) {
  return svg("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
    markerHeight: 7, orient: "auto-start-reverse" },
  svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: paint }));
}

function nodeDetail(node) {
  if (node.kind === "document") return node.source_uri || node.transform_version || "";
  const made = node.produced_by || node.transform_version || node.transform || "";
  return [made, node.index_snapshot].filter(Boolean).join(" · ") || node.source_uri || "";
}

function legend() {
  return el("section", { className: "legend", "aria-label": "legend" },
    el("h2", {}, "Legend"),
    el("div", { className: "legend-kinds" },
      Object.keys(KIND_COLOURS).filter((kind) => !["verdict", "tombstone"].includes(kind))
        .map((kind) => kindChip(kind))),
    el("p", { className: "muted" }, "Arrows point from a source to what was derived from it; " +
      "red arrows carry a marked hop's content on towards the answer. Marks are computed by " +
      "the service (sql/suspicious_hops.sql):"),
    el("dl", { className: "legend-marks" }, Object.entries(MARKS).map(([reason, mark]) => [
      el("dt", { "data-reason": reason }, markPill(reason)),
      el("dd", {}, mark.explains),
    ])));
}

// --- the record panel ----------------------------------------------------------------------

function showRecord(node, marks) {
  const close = el("button", { type: "button", className: "quiet close", "aria-label": "close",
    onclick: closeRecord }, "×");
  const rows = [
    ["kind", kindChip(node.kind)],
    ["depth", `${node.depth} (from the walk's start)`],
    ["content hash", el("code", {}, node.content_hash)],
    ["transform@version", node.transform_version || node.transform],
    ["produced_by", node.produced_by],
    ["index snapshot", node.index_snapshot],
    ["trace id", node.trace_id && link(node.trace_id, { trace: node.trace_id }, "id")],
    ["source URI", node.source_uri && link(node.source_uri, { source: node.source_uri }, "id")],
    ["created at", node.created_at],
    ["parents", node.parent_ids.length
      ? node.parent_ids.map((id) => [link(id, { walk: id }, "id"), " "]) : "none (a root)"],
  ];
  const verdicts = el("div", { id: "record-verdicts" });
  fill(panel,
    close,
    el("h2", { className: "id" }, node.context_id),
    marks.length ? el("ul", { className: "record-marks" }, marks.map((mark) =>
      el("li", {}, markPill(mark.reason), " ", mark.detail))) : null,
    el("dl", { className: "fields" }, rows.filter(([, value]) => value).map(([name, value]) =>
      [el("dt", {}, name), el("dd", { "data-field": name }, value)])),
    el("h3", {}, "attributes"),
    el("pre", { className: "attributes" }, JSON.stringify(node.attributes, null, 2)),
    verdicts,
    el("div", { className: "actions" },
      link("Walk back from here", { walk: node.context_id }, "button"),
      link("Blast radius", { radius: node.context_id }, "button"),
      node.source_uri ? link("Every revision's radius", { source: node.source_uri }, "button")
        : null),
  );
  panel.hidden = false;
  if (node.kind === "claim" || node.kind === "answer") loadVerdicts(node, verdicts);
}

async function loadVerdicts(node, holder) {
  holder.replaceChildren(el("h3", {}, "verdicts"), el("p", { className: "muted" }, "loading…"));
  let body;
  try {
    body = await api(`v1/answers/${enc(node.context_id)}/verdicts`);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    holder.replaceChildren(el("h3", {}, "verdicts"), el("p", { className: "muted" },
      error.message));
    return;
  }
  holder.replaceChildren(el("h3", {}, "verdicts"), body.verdicts.length
    ? el("ul", { className: "verdicts" }, body.verdicts.map((verdict) => el("li", {},
      el("strong", { className: verdict.failing ? "failing" : "passing" }, verdict.verdict),
      ` ${verdict.claim_id} by ${verdict.judge}: ${verdict.reason || ""}`)))
    : el("p", { className: "muted" }, `not verified yet: lineage verify ${node.context_id}`));
}

// --- trace ---------------------------------------------------------------------------------

async function showTrace(traceId) {
  const trace = await api(`v1/traces/${enc(traceId)}`);
  show(
    el("h1", {}, "Trace ", el("span", { className: "id" }, traceId)),
    el("p", { className: "muted" }, `${plural(trace.records.length, "record")} in the order ` +
      "they were recorded. Walk back from an answer to see where it came from."),
    recordTable(trace.records, false),
  );
}

function recordTable(records, withDepth) {
  return el("table", { className: "records" },
    el("thead", {}, el("tr", {}, withDepth ? el("th", {}, "depth") : null,
      el("th", {}, "kind"), el("th", {}, "context id"), el("th", {}, "made by"),
      el("th", {}, "created at"))),
    el("tbody", {}, records.map((record) => el("tr", {
      className: record.kind === "answer" ? "answer" : null,
    },
    withDepth ? el("td", {}, record.depth) : null,
    el("td", {}, kindChip(record.kind)),
    el("td", {}, link(record.context_id, { walk: record.context_id }, "id")),
    el("td", {}, record.produced_by || record.transform_version || record.source_uri || ""),
    el("td", { className: "muted" }, record.created_at)))));
}

// --- blast radius --------------------------------------------------------------------------

async function showRadius(start, params) {
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
  show(
    el("h1", {}, "Blast radius of ", el("span", { className: "id" },
      start.source_uri || start.context_id)),
    el("p", { className: "muted" }, start.source_uri
      ? "Every revision recorded for this source URI and everything derived from them."
      : "This record and everything derived from it."),
    el("div", { className: "counts", id: "counts" },
      el("span", { className: "total" }, plural(radius.summary.total, "record")),
      Object.entries(counts).map(([countKind, count]) => link(
        [kindChip(countKind), ` ${count.toLocaleString()}`],
        { ...here, kind: countKind }, countKind === kind ? "count current" : "count"))),
    radius.summary.truncated ? el("div", { className: "warning", role: "status" },
      "The walk stopped at its depth limit: more records lie beyond; the counts and files " +
      "are incomplete.") : null,
    el("div", { className: "downloads" },
      el("span", {}, `Download ${kind === "any" ? "all" : kind} ids:`), files(kind),
      kind !== "any" ? [el("span", {}, "all ids:"), files("any")] : null),
    el("h2", {}, kind === "answer" ? "Affected answers" : `${kind === "any" ? "All" : kind} ` +
      "records"),
    radius.matching
      ? [recordTable(radius.nodes, true), el("div", { className: "pager" },
        el("span", {}, `${(offset + 1).toLocaleString()}–${last.toLocaleString()} of ` +
          `${radius.matching.toLocaleString()}`),
        offset > 0 ? link("Previous", { ...here, kind,
          offset: Math.max(0, offset - PAGE_SIZE) }, "button") : null,
        radius.next_offset !== null ? link("Next", { ...here, kind,
          offset: radius.next_offset }, "button") : null)]
      : el("p", { className: "muted" }, `No ${kind} records derive from it.`),
  );
}

// --- start ---------------------------------------------------------------------------------

document.getElementById("search").addEventListener("submit", (event) => {
  event.preventDefault();
  go({ q: document.getElementById("query").value });
});
// Nothing works without the key: Escape must not close the prompt.
document.getElementById("key-dialog").addEventListener("cancel", (event) => {
  event.preventDefault();
});
document.getElementById("sign-out").addEventListener("click", async () => {
  await fetch("v1/session", { method: "DELETE" });
  document.getElementById("sign-out").hidden = true;
  route();
});
window.addEventListener("popstate", route);
route();
