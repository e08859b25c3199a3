// The record panel beside every view, and the table of records the lists share.

import { ApiError, api, el, enc, fill, kindChip, link, markPill } from "./dom.js";

const panel = document.getElementById("record");

export function closeRecord() {
  panel.hidden = true;
  panel.replaceChildren();
}

export function showRecord(node, marks) {
  const close = el("button", { type: "button", className: "quiet close", "aria-label": "close",
    onclick: closeRecord }, "×");
  const rows = [
    ["kind", kindChip(node.kind)],
    ["depth", node.depth === undefined ? null : `${node.depth} (from the walk's start)`],
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

export function recordTable(records, withDepth) {
  return el("table", { className: "records" },
    el("thead", {}, el("tr", {}, withDepth ? el("th", {}, "depth") : null,
      el("th", {}, "kind"), el("th", {}, "context id"), el("th", {}, "made by"),
      el("th", {}, "created at"))),
    el("tbody", {}, records.map((record) => el("tr", {
      className: record.kind === "answer" ? "answer" : null, "data-id": record.context_id,
    },
    withDepth ? el("td", {}, record.depth) : null,
    el("td", {}, kindChip(record.kind)),
    el("td", {}, link(record.context_id, { walk: record.context_id }, "id")),
    el("td", {}, record.produced_by || record.transform_version || record.source_uri || ""),
    el("td", { className: "muted" }, record.created_at)))));
}
