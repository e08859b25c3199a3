// The lineage explorer. Everything it shows comes from the API; the suspicious marks are the
// service's (sql/suspicious_hops.sql): the page only draws them and never decides one.

import { api, el, enc, fill, found, link, onNavigate, ApiError } from "./dom.js";
import { showLive } from "./live.js";
import { showRadius } from "./radius.js";
import { closeRecord } from "./record.js";
import { showTrace } from "./trace.js";
import { showWalk } from "./walk.js";

const view = document.getElementById("view");

const VIEWS = {
  walk: (params) => showWalk(view, params.get("walk"), params.get("max_depth")),
  trace: (params) => showTrace(view, params.get("trace")),
  source: (params) => showRadius(view, { source_uri: params.get("source") }, params),
  radius: (params) => showRadius(view, { context_id: params.get("radius") }, params),
  live: (params) => showLive(view, params.get("live"), params.get("by") || "session"),
  q: (params) => search(params.get("q")),
};

let leave = null; // what the shown view must stop (a live stream) before the next one

function go(params, replace = false) {
  const url = "ui?" + new URLSearchParams(params);
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  route();
}

onNavigate(go);

async function route() {
  const params = new URLSearchParams(location.search);
  const name = Object.keys(VIEWS).find((key) => params.has(key));
  if (leave) leave();
  leave = null;
  closeRecord();
  document.getElementById("query").value =
    params.get(name) === null ? "" : params.get(name);
  try {
    const stop = await (name ? VIEWS[name](params) : showHome());
    if (typeof stop === "function") leave = stop;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    fill(view, el("div", { className: "problem", role: "alert" }, el("strong", {},
      "Not shown: "), error.message));
  }
}

async function search(text) {
  const query = text.trim();
  fill(view, el("p", { className: "muted" }, `Looking up ${query}…`));
  const live = /^(session|live):(.+)$/.exec(query);
  if (live) return go({ live: live[2] }, true);
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
  fill(view, el("div", { className: "problem", role: "alert" },
    el("strong", {}, query), " is not a context id, trace id or source URI in this tenant."));
  return null;
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
  fill(view,
    el("h1", {}, "Which hop made this answer wrong?"),
    el("p", {}, "Search an answer id to walk it back to its documents, with the suspicious " +
      "hops marked; a trace id to see its spans and records on one timeline; a source URI " +
      "for everything derived from that document; session:ID to watch an agent session's " +
      "graph grow as it records."),
    el("h2", {}, "Answers"),
    list, more,
  );
  await page();
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
