// Markdown → sanitized DOM, citation markers → buttons, and a passage with its quoted spans highlighted.
// Everything the server sends is treated as untrusted text: markdown goes through DOMPurify, passages are
// inserted as text nodes only.

import DOMPurify from "./vendor/purify.es.mjs";
import { marked } from "./vendor/marked.esm.js";

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

const ONLY_MARKERS = /^\s*(\[\d{1,3}\]\s*)+$/;

// Code blocks get a bar with a copy button. A paragraph holding nothing but citation markers right after a code block
// (an answer that ends a command with " [2]") moves into that bar, instead of standing alone on a line of its own.
function decorateCode(root) {
  for (const pre of root.querySelectorAll("pre")) {
    const block = document.createElement("div");
    block.className = "code-block";
    pre.replaceWith(block);
    const bar = document.createElement("div");
    bar.className = "code-bar";
    const next = block.nextElementSibling;
    if (next?.tagName === "P" && ONLY_MARKERS.test(next.textContent)) {
      const cites = document.createElement("span");
      cites.className = "code-cites";
      cites.textContent = next.textContent.trim();
      bar.append(cites);
      next.remove();
    }
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "code-copy";
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", "Copy the code");
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(pre.textContent.replace(/\n$/, ""));
        copy.textContent = "Copied";
      } catch {
        copy.textContent = "Copy failed";
      }
      setTimeout(() => (copy.textContent = "Copy"), 1500);
    });
    bar.append(copy);
    block.append(bar, pre);
  }
}

// `provisional`: text still streaming, not yet checked against the sources (a model's draft may carry a link a
// passage planted, with the question in its URL): links are shown as their words, with no address to follow. The
// checked answer (the run's `complete` event) renders its links.
export function renderMarkdown(el, text, { provisional = false } = {}) {
  el.innerHTML = DOMPurify.sanitize(marked.parse(text ?? ""), SANITIZE);
  if (provisional) {
    for (const a of el.querySelectorAll("a")) {
      const span = document.createElement("span");
      span.className = "link-pending";
      span.append(...a.childNodes);
      a.replaceWith(span);
    }
  }
  wrapTables(el);
  decorateCode(el);
  linkMarkers(el);
}

// quote_spans are [start, end) offsets into the chunk's markdown source, in Python str indices (code points); JS
// strings index UTF-16 units, so the source is split into code points first (an emoji before a span would otherwise
// shift it).
const BLOCK_MARKER = /^(#{1,6}[ \t]+|>[ \t]*|[-*+][ \t]+|\d{1,3}[.)][ \t]+)/;

function cleanSpans(points, spans) {
  const out = [];
  for (const span of spans || []) {
    let [s, e] = [Math.max(0, span[0]), Math.min(points.length, span[1])];
    // A span that starts at "## " or "- " highlights the heading or item, not its marker.
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

// Where each character of the rendered text came from in the source. Rendering only drops characters (markdown
// syntax: **, `, ```lang, #, link targets) and decodes a few (entities), so the rendered text is, almost, a
// subsequence of the source: each rendered character is matched to the next equal source character close ahead, or
// further ahead when the characters after it match there too (past a link target); one that matches nowhere (an
// entity's decoded character) is not mapped. Whitespace matches whitespace, or nothing (markdown adds line breaks
// between blocks).
const NEAR = 12;
const FAR = 400;

function nextMatch(points, from, ch, limit) {
  const end = Math.min(points.length, from + limit);
  const space = /\s/.test(ch);
  for (let i = from; i < end; i += 1) {
    if (space ? /\s/.test(points[i]) : points[i] === ch) return i;
  }
  return -1;
}

function confirmed(points, at, rest) {
  // The next few non-space rendered characters follow `at` closely in the source too.
  let p = at + 1;
  let checked = 0;
  for (const ch of rest) {
    if (/\s/.test(ch)) continue;
    const i = nextMatch(points, p, ch, NEAR);
    if (i < 0) return false;
    p = i + 1;
    checked += 1;
    if (checked === 4) break;
  }
  return true;
}

function sourcePositions(points, rendered) {
  const positions = new Array(rendered.length).fill(-1);
  let p = 0;
  for (let k = 0; k < rendered.length; k += 1) {
    const ch = rendered[k];
    let i = nextMatch(points, p, ch, NEAR);
    if (i < 0 && !/\s/.test(ch)) {
      const rest = rendered.slice(k + 1, k + 24);
      for (let from = p; from < Math.min(points.length, p + FAR); ) {
        const j = nextMatch(points, from, ch, FAR - (from - p));
        if (j < 0) break;
        if (confirmed(points, j, rest)) {
          i = j;
          break;
        }
        from = j + 1;
      }
    }
    if (i >= 0) {
      positions[k] = i;
      p = i + 1;
    }
  }
  return positions;
}

// Wraps the rendered characters whose source lies inside a span in <mark>, text node by text node; returns the first.
function highlight(root, points, spans) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  const chars = nodes.map((n) => Array.from(n.nodeValue));
  const positions = sourcePositions(points, chars.flat());
  const inside = (pos) => pos >= 0 && spans.some(([s, e]) => pos >= s && pos < e);
  let k = 0;
  let previous = false;
  let first = null;
  nodes.forEach((node, n) => {
    const flags = chars[n].map((ch) => {
      const pos = positions[k];
      k += 1;
      // An unmapped character (an entity, a line break markdown added) goes with the text before it.
      previous = pos >= 0 ? inside(pos) : previous;
      return previous;
    });
    if (!flags.some(Boolean)) return;
    const frag = document.createDocumentFragment();
    let run = "";
    let marked_ = flags[0];
    const flush = () => {
      if (!run) return;
      if (marked_ && run.trim()) {
        const mark = document.createElement("mark");
        mark.textContent = run;
        frag.append(mark);
        first ??= mark;
      } else frag.append(run);
      run = "";
    };
    chars[n].forEach((ch, i) => {
      if (flags[i] !== marked_) {
        flush();
        marked_ = flags[i];
      }
      run += ch;
    });
    flush();
    node.replaceWith(frag);
  });
  return first;
}

// Renders a chunk (markdown source) as markdown, with its quoted spans highlighted on the rendered text; returns the
// first <mark>, if any. Never falls back to showing the raw source.
export function renderPassage(el, text, spans) {
  el.replaceChildren();
  const points = Array.from(text ?? "");
  const holder = document.createElement("div");
  holder.innerHTML = DOMPurify.sanitize(marked.parse(text ?? ""), SANITIZE);
  el.classList.remove("plain");
  el.classList.add("markdown");
  el.append(...holder.childNodes);
  wrapTables(el);
  const clean = cleanSpans(points, spans);
  return clean.length ? highlight(el, points, clean) : null;
}

// Links the docs wrote relative to their own page ("server.md#sessions", "#limits", "../guide/") lead into that
// page's site, not into the one showing the answer: each is resolved against the source URL of the citation that
// quotes it (the marker after it in the same paragraph, list item or cell; else the block's first marker). A link
// no citation gives a web address for is shown as its words: followed from here it would reach no page at all.
export function resolveLinks(root, sourceUrlOf) {
  for (const a of root.querySelectorAll("a[href]")) {
    const href = a.getAttribute("href");
    if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith("//")) continue; // already absolute: https:, mailto:
    const block = a.closest("p, li, td, th, blockquote, dd, h1, h2, h3, h4, h5, h6") ?? root;
    const markers = [...block.querySelectorAll("button.cite-ref")];
    const marker = markers.find((m) => a.compareDocumentPosition(m) & Node.DOCUMENT_POSITION_FOLLOWING) ?? markers[0];
    const base = marker ? sourceUrlOf(marker.dataset.n) : null;
    let resolved = null;
    if (base && /^https?:\/\//i.test(base)) {
      try {
        resolved = new URL(href, base).href;
      } catch {
        resolved = null;
      }
    }
    if (resolved) {
      a.setAttribute("href", resolved);
    } else {
      const span = document.createElement("span");
      span.className = "link-unresolved";
      span.append(...a.childNodes);
      a.replaceWith(span);
    }
  }
}
