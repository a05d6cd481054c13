// Markdown → sanitized DOM, citation markers → buttons, and a passage with its quoted spans highlighted.
// Everything the server sends is treated as untrusted text: markdown goes through DOMPurify, passages are
// inserted as text nodes only.

import { marked } from "./vendor/marked.esm.js";

const DOMPurify = window.DOMPurify;

marked.setOptions({ gfm: true, breaks: false });

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.getAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

const SANITIZE = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "img"],
  FORBID_ATTR: ["style"],
};

const MARKER = /\[(\d{1,3})\]/g;

// Replaces "[n]" in text (outside code and links) with a superscript button the app wires to the citation.
function linkMarkers(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode(node) {
      if (!node.nodeValue.includes("[")) return NodeFilter.FILTER_REJECT;
      return node.parentElement.closest("code, pre, a") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT;
    },
  });
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  for (const node of nodes) {
    const text = node.nodeValue;
    MARKER.lastIndex = 0;
    if (!MARKER.test(text)) continue;
    MARKER.lastIndex = 0;
    const frag = document.createDocumentFragment();
    let last = 0;
    for (const m of text.matchAll(MARKER)) {
      // The marker, the space before it and the word it follows go in one unbreakable run, so a marker never
      // wraps onto a line of its own (a button is an atomic inline: a no-break space alone doesn't hold it).
      const before = text.slice(last, m.index);
      const tail = /\S*\s?$/.exec(before)[0];
      if (before.length > tail.length) frag.append(before.slice(0, before.length - tail.length));
      const glue = document.createElement("span");
      glue.className = "cite-glue";
      if (tail) glue.append(tail.replace(/\s$/, "\u00a0"));
      const btn = document.createElement("button");
      btn.type = "button";
      btn.className = "cite-ref";
      btn.dataset.n = m[1];
      btn.textContent = m[1];
      btn.setAttribute("aria-label", `Open source ${m[1]}`);
      glue.append(btn);
      frag.append(glue);
      last = m.index + m[0].length;
    }
    if (last < text.length) frag.append(text.slice(last));
    node.replaceWith(frag);
  }
}

// Wide tables scroll inside their box instead of widening the page on a phone.
function wrapTables(el) {
  for (const table of el.querySelectorAll("table")) {
    const wrap = document.createElement("div");
    wrap.className = "table-wrap";
    table.replaceWith(wrap);
    wrap.append(table);
  }
}

export function renderMarkdown(el, text) {
  el.innerHTML = DOMPurify.sanitize(marked.parse(text ?? ""), SANITIZE);
  wrapTables(el);
  linkMarkers(el);
}

// Private-use characters mark the quoted spans in the chunk's markdown before it is rendered; afterwards every
// text run between them is wrapped in <mark>, so a quote that crosses **bold** or `code` is still highlighted.
const OPEN = "\uE000";
const CLOSE = "\uE001";
const BLOCK_MARKER = /^(#{1,6}[ \t]+|>[ \t]*|[-*+][ \t]+|\d{1,3}[.)][ \t]+)/;

// quote_spans are [start, end) offsets in Python str indices (code points); JS strings index UTF-16 units, so the
// text is split into code points before slicing (an emoji before the span would otherwise shift it).
function cleanSpans(points, spans) {
  const out = [];
  for (const span of spans || []) {
    let [s, e] = [Math.max(0, span[0]), Math.min(points.length, span[1])];
    // A marker at the start of a line would stop "## Heading" or "- item" being one; one right after a line
    // break would do the same to the next line. Keep both inside the text.
    const lineStart = points.lastIndexOf("\n", s - 1) + 1;
    if (!points.slice(lineStart, s).join("").trim()) {
      const m = BLOCK_MARKER.exec(points.slice(s, s + 16).join(""));
      if (m) s += m[0].length;
    }
    while (e > s && /\s/.test(points[e - 1])) e -= 1;
    if (e > s) out.push([s, e]);
  }
  out.sort((a, b) => a[0] - b[0]);
  const merged = [];
  for (const span of out) {
    const last = merged.at(-1);
    if (last && span[0] <= last[1]) last[1] = Math.max(last[1], span[1]);
    else merged.push(span);
  }
  return merged;
}

function wrapMarked(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  let inside = false;
  let first = null;
  for (const node of nodes) {
    const parts = node.nodeValue.split(/([\uE000\uE001])/);
    if (parts.length === 1 && !inside) continue;
    const frag = document.createDocumentFragment();
    for (const part of parts) {
      if (part === OPEN) inside = true;
      else if (part === CLOSE) inside = false;
      else if (part && inside) {
        const mark = document.createElement("mark");
        mark.textContent = part;
        frag.append(mark);
        first ??= mark;
      } else if (part) frag.append(part);
    }
    node.replaceWith(frag);
  }
  return first;
}

function renderPlain(el, points, spans) {
  el.classList.remove("markdown");
  el.classList.add("plain");
  let pos = 0;
  let first = null;
  for (const [s, e] of spans) {
    if (s > pos) el.append(points.slice(pos, s).join(""));
    const mark = document.createElement("mark");
    mark.textContent = points.slice(s, e).join("");
    el.append(mark);
    first ??= mark;
    pos = e;
  }
  if (pos < points.length) el.append(points.slice(pos).join(""));
  return first;
}

// Renders a chunk (markdown source) with its quoted spans highlighted; returns the first <mark>, if any.
export function renderPassage(el, text, spans) {
  el.replaceChildren();
  const points = Array.from(text.replace(/[\uE000\uE001]/g, ""));
  const clean = cleanSpans(points, spans);
  let marked_ = "";
  let pos = 0;
  for (const [s, e] of clean) {
    marked_ += points.slice(pos, s).join("") + OPEN + points.slice(s, e).join("") + CLOSE;
    pos = e;
  }
  marked_ += points.slice(pos).join("");

  const holder = document.createElement("div");
  holder.innerHTML = DOMPurify.sanitize(marked.parse(marked_), SANITIZE);
  const rendered = holder.textContent;
  const opens = rendered.split(OPEN).length - 1;
  const closes = rendered.split(CLOSE).length - 1;
  if (opens !== clean.length || closes !== clean.length) {
    // A marker ended up somewhere markdown doesn't keep as text (a link target, an HTML attribute): show the
    // source as plain text instead, where the offsets are exact.
    return renderPlain(el, points, clean);
  }
  el.classList.remove("plain");
  el.classList.add("markdown");
  el.append(...holder.childNodes);
  wrapTables(el);
  return wrapMarked(el);
}
