// The Citewise chat page: one conversation, streamed answers, citations that open their passage.
// State lives in this module; the server is reached only through api.js.

import { HttpError, getJSON, streamAnswer } from "./api.js";
import { feedbackControl } from "./feedback.js";
import { renderMarkdown, renderPassage, resolveLinks } from "./render.js";
import { describeStep } from "./trace.js";

const $ = (id) => document.getElementById(id);
const els = {
  messages: $("messages"),
  welcome: $("welcome"),
  examples: $("examples"),
  exampleList: $("example-list"),
  form: $("composer"),
  question: $("question"),
  send: $("send"),
  chip: $("selection-chip"),
  chipText: $("selection-chip-text"),
  chipClear: $("selection-clear"),
  askSelection: $("ask-selection"),
  traceToggle: $("trace-toggle"),
  newChat: $("new-chat"),
  settingsOpen: $("settings-open"),
  settings: $("settings"),
  settingsForm: $("settings-form"),
  apiKey: $("api-key"),
  mode: $("mode"),
  style: $("style"),
  passage: $("passage"),
  passageKicker: $("passage-kicker"),
  passageTitle: $("passage-title"),
  passageChapter: $("passage-chapter"),
  passageBody: $("passage-body"),
  passageLink: $("passage-link"),
  passageNote: $("passage-note"),
  passageClose: $("passage-close"),
  corpus: $("corpus-status"),
  analytics: $("analytics-link"),
  statusLive: $("status-live"),
};

const MAX_SELECTED_CHARS = 10_000;
const RATE_LIMIT_RETRIES = 4; // attempts after the first: waits 1, 2, 4, 8 s (or the server's Retry-After)
const DEFAULT_SELECTION_QUESTION = "What does this passage mean?";

const views = new WeakMap(); // assistant <article> → its AssistantMessage

const state = {
  sessionId: null,
  run: null, // {controller} of the answer being streamed
  selection: null, // text attached to the next question
  passageOpener: null, // element focus returns to when the passage closes
  settings: loadSettings(),
  traceOn: localStorage.getItem("citewise.trace") === "1",
};

function loadSettings() {
  try {
    return { apiKey: "", mode: "", style: "default", ...JSON.parse(localStorage.getItem("citewise.settings") || "{}") };
  } catch {
    return { apiKey: "", mode: "", style: "default" };
  }
}

function announce(text) {
  els.statusLive.textContent = "";
  // A fresh text node after a tick makes screen readers announce a repeated message too.
  setTimeout(() => (els.statusLive.textContent = text), 30);
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}

function emit(target, name, detail) {
  // Hooks for tests and embedders; the page itself doesn't listen to them.
  target.dispatchEvent(new CustomEvent(`citewise:${name}`, { bubbles: true, detail }));
}

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      reject(new DOMException("Aborted", "AbortError"));
    });
  });

// ---------------------------------------------------------------------------------------------------------------
// One assistant message: thinking → streaming → done|refused|error|stopped.
// ---------------------------------------------------------------------------------------------------------------

const TRACE_LABELS = {
  guard: "Checking the question",
  constraints: "Reading the question's requirements",
  standalone: "Reading the question with the conversation",
  plan: "Planning the search",
  tool_call: "Searching the docs",
  tool_result: "Reading the results",
  compose: "Choosing the sentences to quote",
  draft: "Writing the answer",
  validation: "Checking every claim against its source",
  reprompt: "Revising the answer",
  generation_failure: "Asking the model again",
  forced_synthesis: "Writing the answer from what was found",
  grounded: "Numbering the citations",
  retrieval_failure: "The index did not answer",
  fallback: "Switching to a fallback model",
};

function traceLabel(ev) {
  const input = ev?.data?.input ?? ev?.data?.args ?? {};
  const query = ev?.data?.query ?? input.query;
  if (ev.type === "tool_call" && query) return `Searching for “${String(query).slice(0, 80)}”`;
  const tool = ev?.data?.tool ?? ev?.data?.name;
  if (ev.type === "tool_call" && tool === "open_citation") return "Opening a cited passage";
  return TRACE_LABELS[ev.type] ?? "Working";
}


class AssistantMessage {
  constructor(request) {
    this.request = request;
    this.text = "";
    this.citations = new Map();
    this.answer = null;
    this.traceCount = 0;
    this.tokens = 0;

    this.root = el("article", "msg msg-assistant");
    this.root.setAttribute("aria-label", "Citewise's answer");
    const avatar = el("div", "msg-avatar");
    avatar.setAttribute("aria-hidden", "true");
    avatar.textContent = "C";
    const main = el("div", "msg-main");

    this.thinking = el("div", "thinking");
    this.thinking.setAttribute("role", "status");
    const dots = el("span", "dots");
    dots.setAttribute("aria-hidden", "true");
    dots.append(el("i"), el("i"), el("i"));
    this.thinkingLabel = el("span", "thinking-label", "Searching the docs");
    this.thinking.append(dots, this.thinkingLabel);

    this.badge = el("p", "badge");
    this.badge.hidden = true;
    this.body = el("div", "answer markdown");
    this.notice = el("div", "notice");
    this.notice.hidden = true;
    this.notes = el("div", "answer-notes");
    this.notes.hidden = true;

    this.citeWrap = el("section", "citations");
    this.citeWrap.hidden = true;
    const citeHead = el("h3", "citations-title", "Sources");
    this.citeList = el("ol", "citation-list");
    this.citeWrap.append(citeHead, this.citeList);

    this.meta = el("div", "msg-meta");
    this.meta.hidden = true;

    this.trace = el("details", "trace");
    const summary = el("summary", null, "Trace");
    this.traceList = el("ol", "trace-list");
    this.trace.append(summary, this.traceList);
    this.trace.hidden = true;
    this.trace.open = state.traceOn;

    main.append(this.thinking, this.badge, this.body, this.notice, this.notes, this.citeWrap, this.meta, this.trace);
    this.root.append(avatar, main);
    this.root.dataset.state = "thinking"; // announced with setState once the message is in the page
  }

  setState(name) {
    this.root.dataset.state = name;
    this.thinking.hidden = name !== "thinking";
    emit(this.root, "state", { state: name });
  }

  reset() {
    // A retry starts the answer afresh; the trace keeps growing so the retries stay visible.
    this.text = "";
    this.tokens = 0;
    this.citations.clear();
    this.body.replaceChildren();
    this.citeList.replaceChildren();
    this.citeWrap.hidden = true;
    this.setState("thinking");
  }

  onTrace(ev) {
    if (!ev || typeof ev !== "object") return;
    this.traceCount += 1;
    const li = el("li", `trace-item trace-${ev.type}`);
    const { title, detail } = describeStep(ev);
    li.append(el("span", "trace-step", title));
    if (detail) li.append(el("span", "trace-detail", detail));
    li.title = `${ev.type}${ev.node ? ` (${ev.node})` : ""}`; // the event's own name, for whoever reads server logs
    this.traceList.append(li);
    this.trace.querySelector("summary").textContent = `How it was found · ${this.traceCount} step${this.traceCount === 1 ? "" : "s"}`;
    this.trace.hidden = false;
    if (this.root.dataset.state === "thinking") this.thinkingLabel.textContent = traceLabel(ev);
  }

  // The server's one signal that the text shown so far will not stand (docs/server.md): clear it and wait for the
  // tokens that replace it.
  onDiscard() {
    this.text = "";
    this.tokens = 0;
    this.body.replaceChildren();
    this.setState("thinking");
  }

  onToken(text) {
    if (!text) return;
    if (this.root.dataset.state === "thinking") this.setState("streaming");
    this.text += text;
    this.tokens += 1;
    renderMarkdown(this.body, this.text, { provisional: true });
    emit(this.root, "token", { chars: this.body.textContent.length, tokens: this.tokens });
  }

  onCitation(c) {
    if (!c || c.n == null) return;
    this.citations.set(Number(c.n), c);
    this.renderCitations();
  }

  renderCitations() {
    const list = [...this.citations.values()].sort((a, b) => a.n - b.n);
    this.citeList.replaceChildren();
    for (const c of list) {
      const li = el("li");
      const btn = el("button", "cite");
      btn.type = "button";
      btn.dataset.n = String(c.n);
      const num = el("span", "cite-n", String(c.n));
      num.setAttribute("aria-hidden", "true");
      const text = el("span", "cite-text");
      text.append(el("span", "cite-file", c.filename || "document"));
      if (c.chapter) text.append(el("span", "cite-chapter", c.chapter.replaceAll(" > ", " › ")));
      btn.append(num, text);
      btn.setAttribute("aria-label", `Source ${c.n}: ${c.filename}${c.chapter ? `, ${c.chapter}` : ""}. Open passage`);
      btn.title = [c.filename, c.chapter].filter(Boolean).join(" — ");
      li.append(btn);
      this.citeList.append(li);
    }
    this.citeWrap.hidden = list.length === 0;
  }

  citation(n) {
    return this.citations.get(Number(n));
  }

  source(chunkId) {
    return this.answer?.sources?.find((s) => s.chunk_id === chunkId);
  }

  complete(answer) {
    this.answer = answer;
    // The final text is authoritative: grounding renumbers [n] and drops markers that point nowhere.
    this.text = answer.answer ?? this.text;
    renderMarkdown(this.body, this.text);
    this.citations.clear();
    for (const c of answer.citations ?? []) this.citations.set(Number(c.n), c);
    resolveLinks(this.body, (n) => this.citation(n)?.source_url); // the docs' own relative links, onto their site
    this.renderCitations();
    if (!this.traceCount) for (const ev of answer.trace ?? []) this.onTrace(ev);

    const refused = answer.status === "refused";
    this.badge.hidden = !refused;
    if (refused) this.badge.textContent = "Not covered by the docs";
    this.renderNotes(answer);
    this.renderMeta(answer);
    const state = refused ? "refused" : answer.status === "error" ? "error" : "done";
    this.setState(state);
    emit(this.root, "complete", { exit_reason: answer.exit_reason, status: answer.status });
  }

  renderNotes(answer) {
    this.notes.replaceChildren();
    if (answer.status === "refused") {
      const why = answer.refusal_detail; // in words, from the server's one table: never a code
      if (why) this.notes.append(el("p", "note note-why", why));
      const sections = answer.closest_sections ?? [];
      if (sections.length) {
        // Places to read, not citations: the answer rests on none of them.
        const p = el("p", "note-title", "Closest sections in the docs (not an answer):");
        const ul = el("ul", "note-list closest-sections");
        for (const section of sections) {
          const label = section.filename + (section.chapter ? ` › ${section.chapter}` : "");
          const li = el("li");
          if (section.source_url && /^https?:\/\//.test(section.source_url)) {
            const a = el("a", null, label);
            a.href = section.source_url;
            a.target = "_blank";
            a.rel = "noopener noreferrer";
            li.append(a);
          } else {
            li.textContent = label;
          }
          ul.append(li);
        }
        this.notes.append(p, ul);
      }
    }
    if (answer.insufficiencies?.length) {
      const p = el("p", "note-title", "What the docs don't cover:");
      const ul = el("ul", "note-list");
      for (const item of answer.insufficiencies) ul.append(el("li", null, item));
      this.notes.append(p, ul);
    }
    for (const conflict of answer.conflicting_info ?? []) {
      const values = (conflict.values ?? []).map((v) => `${v.value} (${v.filename}${v.date ? `, ${v.date}` : ""})`);
      let text = `The docs disagree on ${conflict.subject}: ${values.join(" vs ")}.`;
      if (conflict.resolved_value) text += ` Using ${conflict.resolved_value}, from the newest document.`;
      this.notes.append(el("p", "note note-conflict", text));
    }
    this.notes.hidden = !this.notes.childElementCount;
  }

  renderMeta(answer) {
    this.meta.replaceChildren();
    const parts = [];
    const n = answer.citations?.length ?? 0;
    if (n) parts.push(`${n} source${n === 1 ? "" : "s"}`);
    if (answer.mode) parts.push(answer.mode === "extractive" ? "quote mode" : answer.mode);
    if (answer.cached) parts.push("cached");
    if (answer.timing_ms) parts.push(`${(answer.timing_ms / 1000).toFixed(answer.timing_ms < 10_000 ? 1 : 0)} s`);
    const info = el("span", "meta-info", parts.join(" · "));
    const copy = el("button", "btn btn-ghost btn-small", "Copy");
    copy.type = "button";
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(this.text);
        copy.textContent = "Copied";
      } catch {
        copy.textContent = "Copy failed";
      }
      setTimeout(() => (copy.textContent = "Copy"), 1500);
    });
    this.meta.append(info, copy);
    const rating = feedbackControl(answer.answer_id, { apiKey: state.settings.apiKey });
    if (rating) this.meta.append(rating);
    this.meta.hidden = false;
  }

  showNotice(kind, text, actions = []) {
    this.notice.className = `notice notice-${kind}`;
    this.notice.replaceChildren(el("p", null, text));
    if (actions.length) {
      const row = el("div", "notice-actions");
      for (const { label, onClick, primary } of actions) {
        const b = el("button", `btn ${primary ? "btn-primary" : "btn-ghost"} btn-small`, label);
        b.type = "button";
        b.addEventListener("click", onClick);
        row.append(b);
      }
      this.notice.append(row);
    }
    this.notice.hidden = false;
  }

  hideNotice() {
    this.notice.hidden = true;
  }

  fail(state) {
    this.setState(state);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Sending and the exit-reason states.
// ---------------------------------------------------------------------------------------------------------------

function appendUserMessage(question, selected) {
  const msg = el("article", "msg msg-user");
  msg.setAttribute("aria-label", "Your question");
  const main = el("div", "msg-main");
  if (selected) {
    const q = el("blockquote", "msg-selection", selected.length > 280 ? `${selected.slice(0, 280)}…` : selected);
    main.append(q);
  }
  main.append(el("p", "msg-text", question));
  msg.append(main);
  els.messages.append(msg);
}

// Follow the conversation as it grows (tokens, notices, sources) while the reader is at the bottom; once they
// scroll up to read, leave the page where they put it.
let pinnedToEnd = true;
window.addEventListener(
  "scroll",
  () => (pinnedToEnd = window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80),
  { passive: true },
);
new ResizeObserver(() => {
  if (pinnedToEnd) window.scrollTo({ top: document.documentElement.scrollHeight });
}).observe(els.messages);

function setBusy(busy) {
  els.send.classList.toggle("is-stop", busy);
  els.send.setAttribute("aria-label", busy ? "Stop answering" : "Send");
  els.messages.setAttribute("aria-busy", busy ? "true" : "false");
}

async function ask(question, selected = null) {
  if (state.run) return;
  els.welcome.hidden = true;
  appendUserMessage(question, selected);
  const view = new AssistantMessage({ question, selected });
  views.set(view.root, view);
  els.messages.append(view.root);
  view.setState("thinking");
  pinnedToEnd = true; // asking is a request to see the answer
  window.scrollTo({ top: document.documentElement.scrollHeight });
  await runAnswer(view);
}

function requestBody(view) {
  const { question, selected } = view.request;
  const body = { question, returnTrace: true, style: state.settings.style || "default" };
  if (state.settings.mode) body.mode = state.settings.mode;
  if (selected) body.selected_text = selected;
  if (state.sessionId) body.session_id = state.sessionId;
  return body;
}

async function runAnswer(view) {
  const controller = new AbortController();
  state.run = { controller };
  setBusy(true);
  view.hideNotice();
  try {
    for (let attempt = 0; ; attempt += 1) {
      let outcome;
      try {
        outcome = await streamAnswer(requestBody(view), {
          apiKey: state.settings.apiKey,
          signal: controller.signal,
          handlers: {
            onTrace: (ev) => view.onTrace(ev),
            onToken: (t) => view.onToken(t),
            onDiscard: () => view.onDiscard(),
            onCitation: (c) => view.onCitation(c),
          },
        });
      } catch (err) {
        if (err.name === "AbortError") throw err;
        if (err instanceof HttpError && err.status === 429) {
          outcome = { rateLimited: true, retryAfterS: err.retryAfterS };
        } else {
          showTransportError(view, err);
          return;
        }
      }
      const reason = outcome.answer?.exit_reason ?? outcome.error?.exit_reason;
      if (outcome.rateLimited || reason === "RATE_LIMITED") {
        if (attempt >= RATE_LIMIT_RETRIES) {
          if (outcome.answer) view.complete(outcome.answer);
          else view.fail("error");
          view.showNotice("error", "Still rate limited after several retries. Try again in a minute.", [
            { label: "Try again", primary: true, onClick: () => retry(view) },
          ]);
          announce("Rate limited; gave up after several retries.");
          return;
        }
        const waitS = outcome.retryAfterS ?? 2 ** attempt;
        // HTTP 429 is the server's own per-key limit; RATE_LIMITED in an answer comes from the model provider.
        const who = outcome.rateLimited ? "The server is limiting requests" : "The model provider is rate limiting requests";
        emit(view.root, "retry", { attempt: attempt + 1, wait_s: waitS });
        await countdown(view, who, waitS, attempt + 1, controller.signal);
        view.reset();
        continue;
      }
      view.hideNotice();
      if (outcome.error) {
        showRunError(view, outcome.error);
        return;
      }
      finish(view, outcome.answer);
      return;
    }
  } catch (err) {
    if (err.name !== "AbortError") throw err;
    view.fail("stopped");
    view.showNotice("info", "Stopped.", [{ label: "Ask again", onClick: () => retry(view) }]);
  } finally {
    state.run = null;
    setBusy(false);
  }
}

async function countdown(view, who, seconds, attempt, signal) {
  const total = Math.max(0, seconds);
  for (let left = Math.ceil(total); left > 0; left -= 1) {
    view.showNotice("warn", `${who} — retrying in ${left} s (attempt ${attempt} of ${RATE_LIMIT_RETRIES}).`);
    if (left === Math.ceil(total)) announce(`Rate limited. Retrying in ${left} seconds.`);
    await sleep(Math.min(1000, (total - (Math.ceil(total) - left)) * 1000), signal);
  }
  view.showNotice("warn", `Retrying now (attempt ${attempt} of ${RATE_LIMIT_RETRIES})…`);
}

function finish(view, answer) {
  view.complete(answer);
  if (answer.session_id) {
    state.sessionId = answer.session_id;
    view.root.dataset.sessionId = answer.session_id;
  }
  switch (answer.exit_reason) {
    case "COMPLETED":
      break;
    case "MAX_CONTEXT_REACHED":
      view.showNotice("warn", "This conversation is too long for Citewise to keep in mind. Start over to continue.", [
        { label: "Start over", primary: true, onClick: () => newChat() },
      ]);
      break;
    case "MAX_TURNS_REACHED":
    case "MAX_TOOL_CALLS_REACHED":
      view.showNotice("info", "Citewise reached its step limit for one question, so this answer may be incomplete.", [
        { label: "Ask again", onClick: () => retry(view) },
      ]);
      break;
    case "EMPTY_INPUT":
      view.showNotice("info", "There was no question to answer. Type one below.");
      break;
    default:
      if (answer.status === "error") {
        const actions = answer.retryable ? [{ label: "Try again", primary: true, onClick: () => retry(view) }] : [];
        view.showNotice("error", "Citewise could not produce an answer this time.", actions);
      }
  }
  const summary =
    answer.status === "refused"
      ? "Answer complete: the documentation does not cover this."
      : `Answer complete with ${answer.citations?.length ?? 0} sources.`;
  announce(summary);
}

function showRunError(view, error) {
  view.fail("error");
  const text = error.message || "Citewise could not produce an answer.";
  const actions = error.retryable !== false ? [{ label: "Try again", primary: true, onClick: () => retry(view) }] : [];
  view.showNotice("error", text, actions);
  announce(text);
}

function showTransportError(view, err) {
  view.fail("error");
  if (err instanceof HttpError && (err.status === 401 || err.status === 403)) {
    const text =
      err.status === 401
        ? "This server needs an API key. Add yours in Settings."
        : `This API key may not do that: ${err.message}`;
    view.showNotice("error", text, [
      { label: "Open settings", primary: true, onClick: () => openSettings() },
      { label: "Try again", onClick: () => retry(view) },
    ]);
    announce(text);
    return;
  }
  if (err instanceof HttpError && (err.status === 400 || err.status === 422)) {
    view.showNotice("error", `The server did not accept the question: ${err.message}`);
    announce(err.message);
    return;
  }
  const text =
    err instanceof HttpError ? `The server answered with an error (${err.status}).` : "Could not reach the server.";
  view.showNotice("error", text, [{ label: "Try again", primary: true, onClick: () => retry(view) }]);
  announce(text);
}

function retry(view) {
  if (state.run) return;
  view.reset();
  view.hideNotice();
  view.notes.hidden = true;
  view.meta.hidden = true;
  view.badge.hidden = true;
  runAnswer(view);
}

function newChat() {
  state.run?.controller.abort();
  state.sessionId = null;
  els.messages.replaceChildren();
  els.welcome.hidden = false;
  clearSelectionChip();
  closePassage();
  els.question.focus();
  announce("Started a new conversation.");
}

// ---------------------------------------------------------------------------------------------------------------
// Composer.
// ---------------------------------------------------------------------------------------------------------------

function autoGrow() {
  els.question.style.height = "auto";
  els.question.style.height = `${Math.min(els.question.scrollHeight, 200)}px`;
}

function submit() {
  if (state.run) return;
  const selected = state.selection;
  let question = els.question.value.trim();
  if (!question && selected) question = DEFAULT_SELECTION_QUESTION;
  if (!question) return;
  els.question.value = "";
  autoGrow();
  clearSelectionChip();
  ask(question, selected);
}

els.form.addEventListener("submit", (e) => {
  e.preventDefault();
  if (state.run) state.run.controller.abort();
  else submit();
});

els.question.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    submit();
  }
});
els.question.addEventListener("input", autoGrow);

// ---------------------------------------------------------------------------------------------------------------
// Ask about selected text.
// ---------------------------------------------------------------------------------------------------------------

function selectedText() {
  const sel = window.getSelection();
  if (!sel || sel.isCollapsed || !sel.rangeCount) return null;
  const range = sel.getRangeAt(0);
  const inside = (node) => els.messages.contains(node) || els.passageBody.contains(node) || els.welcome.contains(node);
  if (!inside(range.commonAncestorContainer)) return null;
  const text = sel.toString().trim();
  return text.length >= 3 ? { text, rect: range.getBoundingClientRect() } : null;
}

function placeSelectionButton() {
  const found = selectedText();
  if (!found) {
    els.askSelection.hidden = true;
    return;
  }
  const btn = els.askSelection;
  btn.hidden = false;
  const { rect } = found;
  const width = btn.offsetWidth;
  const left = Math.min(Math.max(8, rect.left + rect.width / 2 - width / 2), window.innerWidth - width - 8);
  const top = rect.top > 56 ? rect.top - btn.offsetHeight - 8 : rect.bottom + 8;
  btn.style.left = `${left}px`;
  btn.style.top = `${top}px`;
}

let selectionTimer = null;
document.addEventListener("selectionchange", () => {
  clearTimeout(selectionTimer);
  selectionTimer = setTimeout(placeSelectionButton, 120);
});
window.addEventListener("scroll", () => (els.askSelection.hidden = true), { passive: true });

// Keep the selection alive while the button is pressed.
els.askSelection.addEventListener("mousedown", (e) => e.preventDefault());
els.askSelection.addEventListener("click", () => {
  const found = selectedText();
  if (!found) return;
  attachSelection(found.text);
  window.getSelection().removeAllRanges();
  els.askSelection.hidden = true;
  if (window.matchMedia("(max-width: 720px)").matches) closePassage({ restoreFocus: false });
  els.question.focus();
});

function attachSelection(text) {
  state.selection = text.slice(0, MAX_SELECTED_CHARS);
  els.chipText.textContent = state.selection.length > 160 ? `${state.selection.slice(0, 160)}…` : state.selection;
  els.chip.hidden = false;
  els.question.placeholder = "Ask about the selected text (or just press Enter)";
}

function clearSelectionChip() {
  state.selection = null;
  els.chip.hidden = true;
  els.question.placeholder = "Ask a question about the docs…";
}

els.chipClear.addEventListener("click", () => {
  clearSelectionChip();
  els.question.focus();
});

// ---------------------------------------------------------------------------------------------------------------
// The passage panel (non-modal, so the answer stays readable beside it; Escape closes it).
// ---------------------------------------------------------------------------------------------------------------

async function chunkText(view, citation) {
  const source = view.source(citation.chunk_id);
  if (source?.text) return { text: source.text, exact: true };
  try {
    const chunk = await getJSON(`/api/chunks/${encodeURIComponent(citation.chunk_id)}`, {
      apiKey: state.settings.apiKey,
    });
    if (chunk?.text) return { text: chunk.text, exact: true };
  } catch {
    // No chunk endpoint (or not allowed): fall back to the snippet the citation carries.
  }
  return { text: citation.snippet || "", exact: false };
}

async function openPassage(view, n, opener) {
  const c = view.citation(n);
  if (!c) return;
  state.passageOpener = opener;
  els.passageKicker.textContent = `Source ${c.n}`;
  els.passageTitle.textContent = c.filename || "Document";
  els.passageChapter.textContent = (c.chapter || "").replaceAll(" > ", " › ");
  els.passageChapter.hidden = !c.chapter;
  const url = c.source_url && /^https?:\/\//i.test(c.source_url) ? c.source_url : null;
  els.passageLink.hidden = !url;
  if (url) els.passageLink.href = url;
  els.passageBody.replaceChildren(el("p", "muted", "Loading the passage…"));
  els.passageNote.textContent = "";
  if (!els.passage.open) els.passage.show();
  document.body.classList.add("passage-open");
  els.passageClose.focus();

  const { text, exact } = await chunkText(view, c);
  const mark = renderPassage(els.passageBody, text, exact ? c.quote_spans : []);
  if (!exact && c.snippet) els.passageNote.textContent = "Showing the start of the passage.";
  else if (mark) els.passageNote.textContent = "Highlighted: the text the answer quotes.";
  mark?.scrollIntoView({ block: "center" });
  emit(els.passage, "passage", { n: c.n, highlighted: els.passageBody.querySelectorAll("mark").length });
}

function closePassage({ restoreFocus = true } = {}) {
  if (!els.passage.open) return;
  els.passage.close();
  document.body.classList.remove("passage-open");
  if (restoreFocus && state.passageOpener?.isConnected) state.passageOpener.focus();
  state.passageOpener = null;
}

els.passageClose.addEventListener("click", () => closePassage());
document.addEventListener("keydown", (e) => {
  if (e.key !== "Escape") return;
  if (els.passage.open && !els.settings.open) {
    e.preventDefault();
    closePassage();
  } else if (!els.askSelection.hidden) {
    els.askSelection.hidden = true;
  }
});

// Citation buttons (the list and the inline [n] markers) are handled by delegation.
els.messages.addEventListener("click", (e) => {
  const btn = e.target.closest("button.cite, button.cite-ref");
  if (!btn) return;
  const view = views.get(btn.closest("article.msg-assistant"));
  if (view) openPassage(view, btn.dataset.n, btn);
});

// ---------------------------------------------------------------------------------------------------------------
// Header: trace toggle, new chat, settings, corpus status.
// ---------------------------------------------------------------------------------------------------------------

function applyTrace() {
  document.body.classList.toggle("trace-on", state.traceOn);
  els.traceToggle.setAttribute("aria-pressed", String(state.traceOn));
  for (const details of els.messages.querySelectorAll("details.trace")) details.open = state.traceOn;
}
els.traceToggle.addEventListener("click", () => {
  state.traceOn = !state.traceOn;
  localStorage.setItem("citewise.trace", state.traceOn ? "1" : "0");
  applyTrace();
});
els.newChat.addEventListener("click", newChat);

function openSettings() {
  els.apiKey.value = state.settings.apiKey || "";
  els.mode.value = state.settings.mode || "";
  els.style.value = state.settings.style || "default";
  els.settings.showModal();
}
els.settingsOpen.addEventListener("click", openSettings);
els.settings.addEventListener("close", () => {
  if (els.settings.returnValue === "save") {
    state.settings = { apiKey: els.apiKey.value.trim(), mode: els.mode.value, style: els.style.value };
    localStorage.setItem("citewise.settings", JSON.stringify(state.settings));
    loadCorpusStatus();
    loadAnalyticsLink();
    loadExamples();
  }
  els.settingsOpen.focus();
});

// The Analytics link shows for keys that may read them (an admin key, or any caller on a server without keys).
async function loadAnalyticsLink() {
  try {
    await getJSON("/api/analytics?days=1&top=1", { apiKey: state.settings.apiKey });
    els.analytics.hidden = false;
  } catch {
    els.analytics.hidden = true;
  }
}

// Three questions made from the docs' own headings (GET /api/examples, the caller's documents only): a new reader
// sees what the docs can answer, and a click asks it.
async function loadExamples() {
  let questions = [];
  try {
    const body = await getJSON("/api/examples", { apiKey: state.settings.apiKey });
    questions = Array.isArray(body?.questions) ? body.questions.filter((q) => typeof q === "string") : [];
  } catch {
    questions = []; // no key yet, or an older server: the page works without them
  }
  els.exampleList.replaceChildren(
    ...questions.map((question) => {
      const li = el("li");
      const btn = el("button", "example", question);
      btn.type = "button";
      btn.addEventListener("click", () => ask(question));
      li.append(btn);
      return li;
    }),
  );
  els.examples.hidden = questions.length === 0;
}

async function loadCorpusStatus() {
  try {
    const body = await getJSON("/api/documents", { apiKey: state.settings.apiKey });
    const docs = Array.isArray(body) ? body : (body.documents ?? body.items ?? []);
    const indexed = docs.filter((d) => !d.status || d.status === "INDEXED").length;
    els.corpus.textContent = `${indexed} document${indexed === 1 ? "" : "s"}`;
    els.corpus.title = "Documents in the index";
  } catch (err) {
    els.corpus.textContent = err instanceof HttpError && err.status === 401 ? "API key needed" : "";
  }
}

applyTrace();
loadCorpusStatus();
loadAnalyticsLink();
loadExamples();
autoGrow();
els.question.focus();
document.body.dataset.ready = "1";
