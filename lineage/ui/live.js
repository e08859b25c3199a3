// A live session: an agent session's DAG built as its records arrive over /v1/events.

import { api, el, fill, link, plural } from "./dom.js";
import { DagView } from "./graph.js";
import { showRecord } from "./record.js";

const REDRAW_MS = 250; // at most four layouts a second, however fast records arrive

export async function showLive(view, id, by) {
  const field = by === "trace" ? "trace_id" : "session_id";
  await api("v1/contexts?limit=1"); // signs in first: an EventSource cannot answer a 401
  const status = el("p", { className: "live-status", id: "live-status", role: "status" },
    "connecting…");
  const latest = el("ol", { className: "live-feed", id: "live-feed", reversed: true });
  const graph = new DagView({ records: [], label: `live graph of ${field} ${id}`,
    onSelect: showRecord });
  fill(view,
    el("h1", {}, "Live ", by === "trace" ? "trace " : "session ",
      el("span", { className: "id" }, id)),
    el("p", { className: "muted" }, `Every record whose ${field} is ${id}, drawn as it is ` +
      "committed, from the session's first record on. ",
      by === "trace" ? link("Trace view", { trace: id }) : null),
    status,
    graph.element,
    el("h2", {}, "As they arrived"),
    latest,
  );
  let count = 0;
  let pending = null;
  let last = null;
  const redraw = () => {
    pending = null;
    graph.draw();
    graph.fit();
    status.replaceChildren(el("span", { className: "live-dot" }), ` live · `,
      el("strong", { "data-count": String(count) }, plural(count, "record")),
      last ? ` · last ${last.kind} ${last.context_id} at ${last.created_at}` : "");
  };
  const query = new URLSearchParams({ [field]: id, after: "0" });
  const source = new EventSource(`v1/events?${query}`);
  source.onopen = () => {
    if (!count) status.textContent = "live · waiting for the first record…";
  };
  source.onerror = () => {
    status.textContent = "the stream dropped: reconnecting (nothing is missed)…";
  };
  source.onmessage = (event) => {
    const record = JSON.parse(event.data);
    graph.add([record]);
    count += 1;
    last = record;
    latest.prepend(el("li", {}, link(record.context_id, { walk: record.context_id }, "id"),
      el("span", { className: "muted" }, ` ${record.kind} · ${record.created_at}`)));
    while (latest.children.length > 20) latest.lastChild.remove();
    if (!pending) pending = setTimeout(redraw, REDRAW_MS);
  };
  return () => {
    source.close();
    if (pending) clearTimeout(pending);
  };
}
