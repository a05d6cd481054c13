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
      if (m.index > last) frag.append(text.slice(last, m.index));
      const btn = document.createElement("button");
      btn.type = "button";
      btn.className = "cite-ref";
      btn.dataset.n = m[1];
      btn.textContent = m[1];
      btn.setAttribute("aria-label", `Open source ${m[1]}`);
      frag.append(btn);
      last = m.index + m[0].length;
    }
    if (last < text.length) frag.append(text.slice(last));
    node.replaceWith(frag);
  }
}

export function renderMarkdown(el, text) {
  el.innerHTML = DOMPurify.sanitize(marked.parse(text ?? ""), SANITIZE);
  for (const table of el.querySelectorAll("table")) {
    // Wide tables scroll inside the answer instead of widening the page on a phone.
    const wrap = document.createElement("div");
    wrap.className = "table-wrap";
    table.replaceWith(wrap);
    wrap.append(table);
  }
  linkMarkers(el);
}

// quote_spans are [start, end) offsets in Python str indices (code points); JS strings index UTF-16 units,
// so the text is split into code points before slicing (an emoji before the span would otherwise shift it).
export function renderPassage(el, text, spans) {
  el.replaceChildren();
  const points = Array.from(text);
  const clean = (spans || [])
    .map(([s, e]) => [Math.max(0, s), Math.min(points.length, e)])
    .filter(([s, e]) => e > s)
    .sort((a, b) => a[0] - b[0]);
  let pos = 0;
  let first = null;
  for (const [s, e] of clean) {
    const start = Math.max(s, pos);
    if (start >= e) continue;
    if (start > pos) el.append(points.slice(pos, start).join(""));
    const mark = document.createElement("mark");
    mark.textContent = points.slice(start, e).join("");
    el.append(mark);
    first ??= mark;
    pos = e;
  }
  if (pos < points.length) el.append(points.slice(pos).join(""));
  return first;
}
