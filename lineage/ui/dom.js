// What every view of the explorer shares: building elements, kinds and marks, links that
// navigate without a reload, and the API with its key prompt.

export const SVG = "http://www.w3.org/2000/svg";

export const KIND_COLOURS = {
  answer: "#15803d", claim: "#be185d", summary: "#b45309", reasoning: "#a16207",
  plan: "#92400e", retrieval: "#6d28d9", rerank: "#7e22ce", chunk: "#0f766e",
  embedding: "#0e7490", document: "#1d4ed8", query: "#475569", tool_call: "#4d7c0f",
  prompt: "#334155", verdict: "#6b7280", tombstone: "#111827",
};

export const MARKS = {
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

export function el(tag, attributes = {}, ...children) {
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

export function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function colour(kind) {
  return KIND_COLOURS[kind] || "#52525b";
}

export function markLabel(reason) {
  return (MARKS[reason] && MARKS[reason].label) || reason.replaceAll("_", " ");
}

export function clip(text, length) {
  return text.length > length ? text.slice(0, length - 1) + "…" : text;
}

export function plural(count, word) {
  return `${count.toLocaleString()} ${word}${count === 1 ? "" : "s"}`;
}

export function kindChip(kind) {
  const chip = el("span", { className: "kind" }, kind);
  chip.style.setProperty("--kind", colour(kind));
  return chip;
}

export function markPill(reason) {
  return el("span", { className: "mark", title: (MARKS[reason] || {}).explains }, "⚠ ",
    markLabel(reason));
}

export function fill(parent, ...children) {
  parent.replaceChildren(...children.flat(Infinity).filter((child) => child !== null));
}

export function enc(id) {
  return encodeURIComponent(id);
}

// --- navigation: the URL holds the view, so a link or a reload shows the same thing -------

let navigate = () => {};

export function onNavigate(go) {
  navigate = go;
}

export function go(params, replace = false) {
  navigate(params, replace);
}

export function link(text, params, className) {
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

// --- the API, and the key prompt when it answers 401 --------------------------------------

export class ApiError extends Error {
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

export async function api(path) {
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

export async function found(path) {
  try {
    return await api(path);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}
