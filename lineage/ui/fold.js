// The records of a walk as the graph view folds them, with no DOM: each record's layer (its
// longest path from a source), its source document and whether a marked hop fed it; the boxes a
// layer folds into so that it fits across the frame; the records on a path up to the start.

export const PAGE = 12; // records, or documents' groups, that an opened group draws at a time
const SEVERAL = "*"; // the source of a record derived from more than one document

function groupBy(items, keyOf) {
  const groups = new Map();
  for (const item of items) {
    const key = keyOf(item);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(item);
  }
  return groups;
}

export class RecordGraph {
  // records: [{context_id, kind, parent_ids, ...}]; marks: Map id -> [{reason, detail}].
  constructor(records, marks) {
    this.records = new Map(records.map((record) => [record.context_id, record]));
    this.marks = marks;
    this.stale = true;
  }

  // Add records (the live view); the next plan places them.
  add(records) {
    for (const record of records) {
      if (this.records.has(record.context_id)) continue;
      this.records.set(record.context_id, record);
      this.stale = true;
    }
  }

  parentsOf(record) {
    return record.parent_ids.filter((p) => this.records.has(p) && p !== record.context_id);
  }

  // Each record's layer, source document and taint, parents first, in an iterative depth-first
  // order: a walk can be thousands of records deep.
  describe() {
    if (!this.stale) return;
    this.stale = false;
    const layer = new Map();
    const source = new Map();
    const tainted = new Map();
    for (const id of this.records.keys()) {
      if (layer.has(id)) continue;
      const stack = [[id, false]];
      while (stack.length) {
        const [at, parentsDone] = stack.pop();
        if (layer.has(at)) continue;
        const record = this.records.get(at);
        const parents = this.parentsOf(record);
        if (!parentsDone) {
          stack.push([at, true]);
          for (const parent of parents) if (!layer.has(parent)) stack.push([parent, false]);
          continue;
        }
        let rank = 0;
        let from = record.kind === "document" ? at : null;
        let bad = this.marks.has(at);
        for (const parent of parents) {
          rank = Math.max(rank, layer.get(parent) + 1);
          const theirs = source.get(parent);
          if (record.kind !== "document" && theirs !== null) {
            from = from === null || from === theirs ? theirs : SEVERAL;
          }
          bad = bad || tainted.get(parent);
        }
        layer.set(at, rank);
        source.set(at, from);
        tainted.set(at, bad);
      }
    }
    this.layer = layer;
    this.source = source;
    this.tainted = tainted;
  }

  markedIn(records) {
    return records.reduce((n, record) => n + (this.marks.has(record.context_id) ? 1 : 0), 0);
  }

  documentsOf(records) {
    const documents = new Set(records.map((r) => this.source.get(r.context_id)));
    documents.delete(null);
    return { count: documents.size, several: documents.has(SEVERAL) };
  }

  // A document's name that fits a box: the last part of its source URI, else its id.
  sourceName(source) {
    if (source === SEVERAL) return "several documents";
    const document = this.records.get(source);
    const uri = (document && document.source_uri) || "";
    return uri.replace(/\/+$/, "").split("/").pop() || source || "no document";
  }

  // The boxes and edges to draw. Each layer draws its records one by one when they fit in
  // `columns`, else folds them by kind and source document, else by kind. `pins(id)` says which
  // records keep a box of their own; `opened` (group key -> count) which groups draw a page of
  // their records (or, folded by kind, of their documents' groups) and fold the rest.
  plan(columns, pins, opened) {
    this.describe();
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
      for (const [name, list] of groupBy(members, level === 2 ? (r) => r.kind : bySource)) {
        const key = `${parentKey}|${name}`;
        const shown = opened.get(key);
        if (list.length === 1) single(list[0]);
        else if (!shown) folded(key, list, level);
        else if (level === 2 && groupBy(list, bySource).size > 1) {
          const sources = [...groupBy(list, bySource).values()]
            .sort((a, b) => this.markedIn(b) - this.markedIn(a) || b.length - a.length);
          place(sources.slice(0, shown).flat(), 1, key);
          const rest = sources.slice(shown).flat();
          if (rest.length) folded(key, rest, 2, sources.length - shown);
        } else {
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
      const free = records.filter((r) => !pins(r.context_id));
      records.filter((r) => pins(r.context_id)).forEach(single);
      const room = columns - (records.length - free.length);
      let level = 0;
      if (free.length > room) level = groupBy(free, bySource).size <= room ? 1 : 2;
      if (level === 0) free.forEach(single);
      else place(free, level, `layer${rank}`);
    }
    const edges = new Map();
    for (const record of this.records.values()) {
      const child = owner.get(record.context_id);
      for (const parentId of this.parentsOf(record)) {
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

  // The records on a path from ids up to the start are ids and everything in the walk derived
  // from them: the boxes (of `owner`, record -> box) and the edges that hold those.
  pathThrough(ids, owner) {
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
          const parents = this.parentsOf(this.records.get(at));
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
    for (const record of this.records.values()) {
      if (!reached.get(record.context_id)) continue;
      boxes.add(owner.get(record.context_id));
      for (const parent of this.parentsOf(record)) {
        if (reached.get(parent)) edges.add(`${owner.get(parent)}\n${owner.get(record.context_id)}`);
      }
    }
    return { boxes, edges };
  }

  // Records whose id, kind, source, maker or snapshot holds the text: an exact id first, then
  // ids that start with it, then the rest.
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
    const score = (r) => (r.context_id.toLowerCase() === wanted ? 0
      : r.context_id.toLowerCase().startsWith(wanted) ? 1 : 2);
    return found.sort((a, b) => score(a) - score(b));
  }
}
