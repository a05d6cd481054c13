// The widget's chat panel, mounted by widget.js inside its Shadow DOM on someone else's page.
// Same server contract as the chat page (api.js: the SSE stream and its token/discard rule; render.js: sanitized
// markdown, [n] buttons, highlighted passages; feedback.js: ratings). State that must survive a page change on the
// docs site (the session, the conversation) lives in sessionStorage, per Citewise server.

import { HttpError, getJSON, streamAnswer } from "./api.js";
import { feedbackControl } from "./feedback.js";
import { renderMarkdown, renderPassage, resolveLinks } from "./render.js";

const MAX_SELECTED_CHARS = 10_000;
const KEPT_TURNS = 20;
const DEFAULT_SELECTION_QUESTION = "What does this passage mean?";
const TRACE_LABELS = {
  standalone: "Reading the question with the conversation",
  plan: "Planning the search",
  tool_call: "Searching the docs",
  tool_result: "Reading the results",
  compose: "Choosing the sentences to quote",
  draft: "Writing the answer",
  validation: "Checking every claim against its source",
  reprompt: "Revising the answer",
  grounded: "Numbering the citations",
};

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}

function button(className, label, html) {
  const b = el("button", className);
  b.type = "button";
  b.setAttribute("aria-label", label);
  b.title = label;
  if (html) b.innerHTML = html;
  return b;
}

const ICON_CLOSE =
  '<svg viewBox="0 0 24 24" aria-hidden="true"><path d="M6 6l12 12M18 6L6 18" stroke="currentColor" stroke-width="2" stroke-linecap="round"/></svg>';
const ICON_NEW =
  '<svg viewBox="0 0 24 24" aria-hidden="true"><path d="M12 5v14M5 12h14" stroke="currentColor" stroke-width="2" stroke-linecap="round"/></svg>';
const ICON_SEND =
  '<svg viewBox="0 0 24 24" aria-hidden="true"><path d="M5 12h13M13 6l6 6-6 6" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round" fill="none"/></svg>';
const ICON_BACK =
  '<svg viewBox="0 0 24 24" aria-hidden="true"><path d="M15 6l-6 6 6 6" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round" fill="none"/></svg>';

const isWeb = (url) => typeof url === "string" && /^https?:\/\//i.test(url);

export function mount({ host, root, shell, launcher, options }) {
  const api = { apiKey: options.key, base: options.base };
  const storeKey = `citewise.widget:${options.base}`;
  const saved = load();
  const state = { sessionId: saved.sessionId ?? null, turns: saved.turns ?? [], selection: null, run: null };

  // -- the panel --------------------------------------------------------------------------------------------------
  const panel = el("section", "cw-panel");
  panel.id = "cw-panel";
  panel.hidden = true;
  panel.setAttribute("role", "dialog");
  panel.setAttribute("aria-label", options.title);
  launcher.setAttribute("aria-controls", panel.id);

  const head = el("header", "cw-head");
  const title = el("h2", "cw-title", options.title);
  const newChat = button("cw-icon", "New conversation", ICON_NEW);
  const close = button("cw-icon", "Close", ICON_CLOSE);
  head.append(title, newChat, close);

  const messages = el("div", "cw-messages");
  messages.setAttribute("role", "log");
  messages.setAttribute("aria-live", "polite");
  messages.setAttribute("aria-label", "Conversation");
  const welcome = el("p", "cw-welcome", "Answers come only from the documentation, with a source for every claim.");

  const passage = el("div", "cw-passage");
  passage.hidden = true;
  const passageBack = button("cw-icon cw-back", "Back to the conversation", ICON_BACK);
  const passageTitle = el("h3", "cw-passage-title");
  const passageChapter = el("p", "cw-passage-chapter");
  const passageBody = el("div", "cw-passage-body markdown");
  passageBody.tabIndex = 0;
  const passageNote = el("p", "cw-passage-note");
  const passageHead = el("div", "cw-passage-head");
  const passageHeading = el("div");
  passageHeading.append(passageTitle, passageChapter);
  passageHead.append(passageBack, passageHeading);
  passage.append(passageHead, passageBody, passageNote);

  const form = el("form", "cw-composer");
  form.autocomplete = "off";
  const chip = el("div", "cw-chip");
  chip.hidden = true;
  const chipText = el("q", "cw-chip-text");
  const chipClear = button("cw-chip-clear", "Remove the selected text", "×");
  chip.append(el("span", "cw-chip-label", "Asking about:"), chipText, chipClear);
  const row = el("div", "cw-row");
  const input = el("textarea", "cw-input");
  input.rows = 1;
  input.maxLength = 10_000; // agent.max_question_chars, as the page's textarea (tests/server/test_http_long_messages.py)
  input.placeholder = options.placeholder;
  input.setAttribute("aria-label", "Your question");
  const send = button("cw-send", "Send", ICON_SEND);
  send.type = "submit";
  row.append(input, send);
  form.append(chip, row);
  const foot = el("p", "cw-foot", "Answers cite the docs they come from.");

  panel.append(head, messages, passage, form, foot);
  shell.append(panel);

  const askSelection = el("button", "cw-ask-selection", "Ask about this");
  askSelection.type = "button";
  askSelection.hidden = true;
  shell.append(askSelection);

  // -- open, close, keyboard --------------------------------------------------------------------------------------
  function open() {
    panel.hidden = false;
    launcher.setAttribute("aria-expanded", "true");
    shell.classList.add("cw-open");
    input.focus();
    scrollToEnd();
    emit("open", {});
  }
  function closePanel({ focusLauncher = true } = {}) {
    panel.hidden = true;
    launcher.setAttribute("aria-expanded", "false");
    shell.classList.remove("cw-open");
    if (focusLauncher) launcher.focus();
  }
  launcher.addEventListener("click", () => (panel.hidden ? open() : closePanel()));
  close.addEventListener("click", () => closePanel());
  panel.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    e.preventDefault();
    if (!passage.hidden) showConversation();
    else closePanel();
  });
  newChat.addEventListener("click", () => {
    state.run?.controller.abort();
    state.sessionId = null;
    state.turns = [];
    save();
    messages.replaceChildren(welcome);
    showConversation();
    input.focus();
  });

  function emit(name, detail) {
    // Hooks for the page that embeds the widget (and for tests): they cross the shadow boundary.
    host.dispatchEvent(new CustomEvent(`citewise:${name}`, { bubbles: true, composed: true, detail }));
  }

  function scrollToEnd() {
    messages.scrollTop = messages.scrollHeight;
  }

  // -- the composer ------------------------------------------------------------------------------------------------
  function autoGrow() {
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, 140)}px`;
  }
  input.addEventListener("input", autoGrow);
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (state.run) {
      state.run.controller.abort();
      return;
    }
    const selected = state.selection;
    let question = input.value.trim();
    if (!question && selected) question = DEFAULT_SELECTION_QUESTION;
    if (!question) return;
    input.value = "";
    autoGrow();
    clearChip();
    ask(question, selected);
  });
  chipClear.addEventListener("click", () => {
    clearChip();
    input.focus();
  });
  function attach(text) {
    state.selection = text.slice(0, MAX_SELECTED_CHARS);
    chipText.textContent = state.selection.length > 140 ? `${state.selection.slice(0, 140)}…` : state.selection;
    chip.hidden = false;
    input.placeholder = "Ask about the selected text (or press Enter)";
  }
  function clearChip() {
    state.selection = null;
    chip.hidden = true;
    input.placeholder = options.placeholder;
  }

  // -- "Ask about this" on the host page's selection ----------------------------------------------------------------
  function hostSelection() {
    const sel = document.getSelection();
    if (!sel || sel.isCollapsed || !sel.rangeCount) return null;
    const range = sel.getRangeAt(0);
    if (host.contains(range.commonAncestorContainer)) return null;
    const text = sel.toString().trim();
    return text.length >= 3 ? { text, rect: range.getBoundingClientRect() } : null;
  }
  let selectionTimer = null;
  document.addEventListener("selectionchange", () => {
    clearTimeout(selectionTimer);
    selectionTimer = setTimeout(() => {
      const found = hostSelection();
      askSelection.hidden = !found;
      if (!found) return;
      const width = askSelection.offsetWidth || 120;
      const left = Math.min(Math.max(8, found.rect.left + found.rect.width / 2 - width / 2), innerWidth - width - 8);
      const top = found.rect.top > 48 ? found.rect.top - 40 : found.rect.bottom + 8;
      askSelection.style.left = `${left}px`;
      askSelection.style.top = `${top}px`;
    }, 120);
  });
  addEventListener("scroll", () => (askSelection.hidden = true), { passive: true });
  askSelection.addEventListener("mousedown", (e) => e.preventDefault()); // keep the selection while pressing
  askSelection.addEventListener("click", () => {
    const found = hostSelection();
    askSelection.hidden = true;
    if (!found) return;
    attach(found.text);
    document.getSelection()?.removeAllRanges();
    open();
  });

  // -- one question ------------------------------------------------------------------------------------------------
  async function ask(question, selected) {
    welcome.remove();
    showConversation();
    messages.append(userBubble(question, selected));
    const view = new Answer(question, selected);
    messages.append(view.root);
    scrollToEnd();
    const body = { question };
    if (options.mode) body.mode = options.mode;
    if (selected) body.selected_text = selected;
    if (state.sessionId) body.session_id = state.sessionId;
    const controller = new AbortController();
    state.run = { controller };
    form.classList.add("cw-busy");
    send.setAttribute("aria-label", "Stop");
    try {
      const outcome = await streamAnswer(body, {
        ...api,
        signal: controller.signal,
        handlers: {
          onTrace: (ev) => view.trace(ev),
          onToken: (t) => view.token(t),
          onDiscard: () => view.discard(),
        },
      });
      if (outcome.error) {
        view.fail(outcome.error.message || "The assistant could not answer this time.", true);
        return;
      }
      const answer = outcome.answer;
      if (answer.session_id) state.sessionId = answer.session_id;
      view.complete(answer);
      state.turns.push({ question, selected, answer: slim(answer) });
      state.turns = state.turns.slice(-KEPT_TURNS);
      save();
    } catch (err) {
      if (err.name === "AbortError") view.fail("Stopped.", true);
      else if (err instanceof HttpError && err.status === 429) {
        const wait = err.retryAfterS ? ` Try again in ${Math.ceil(err.retryAfterS)} s.` : " Try again shortly.";
        view.fail(`Too many questions right now.${wait}`, true);
      } else if (err instanceof HttpError && err.status === 401) {
        view.fail("This site's assistant key was not accepted by the server.", false);
      } else if (err instanceof HttpError) {
        view.fail(err.message || `The server answered with an error (${err.status}).`, err.status >= 500);
      } else {
        view.fail("Could not reach the assistant.", true);
      }
    } finally {
      state.run = null;
      form.classList.remove("cw-busy");
      send.setAttribute("aria-label", "Send");
      scrollToEnd();
    }
  }

  function userBubble(question, selected) {
    const msg = el("article", "cw-msg cw-user");
    msg.setAttribute("aria-label", "Your question");
    if (selected) msg.append(el("blockquote", "cw-quote", selected.length > 200 ? `${selected.slice(0, 200)}…` : selected));
    msg.append(el("p", null, question));
    return msg;
  }

  class Answer {
    constructor(question, selected) {
      this.question = question;
      this.selected = selected;
      this.text = "";
      this.answer = null;
      this.root = el("article", "cw-msg cw-answer");
      this.root.setAttribute("aria-label", "The assistant's answer");
      this.thinking = el("div", "cw-thinking");
      this.thinking.setAttribute("role", "status");
      const dots = el("span", "cw-dots");
      dots.append(el("i"), el("i"), el("i"));
      dots.setAttribute("aria-hidden", "true");
      this.thinkingLabel = el("span", null, "Searching the docs…");
      this.thinking.append(dots, this.thinkingLabel);
      this.badge = el("p", "cw-badge", "Not covered by the docs");
      this.badge.hidden = true;
      this.body = el("div", "cw-body markdown");
      this.notes = el("div", "cw-notes");
      this.sources = el("ol", "cw-sources");
      this.sources.hidden = true;
      this.footer = el("div", "cw-answer-foot");
      this.root.append(this.thinking, this.badge, this.body, this.notes, this.sources, this.footer);
      this.root.addEventListener("click", (e) => {
        const quote = e.target.closest("button.cw-source-quote");
        if (quote) {
          const c = (this.answer?.citations ?? []).find((x) => Number(x.n) === Number(quote.dataset.n));
          if (c) showPassage(c, this.answer, quote);
          return;
        }
        const cite = e.target.closest("button.cite-ref, button.cw-source");
        if (cite) this.openCitation(Number(cite.dataset.n), cite);
      });
      this.state("thinking");
    }

    state(name) {
      this.root.dataset.state = name;
      this.thinking.hidden = name !== "thinking";
      emit("state", { state: name });
    }

    trace(ev) {
      if (this.root.dataset.state !== "thinking" || !ev) return;
      const query = ev.data?.args?.query ?? ev.data?.query;
      this.thinkingLabel.textContent =
        ev.type === "tool_call" && query ? `Searching for “${String(query).slice(0, 60)}”…` : `${TRACE_LABELS[ev.type] ?? "Working"}…`;
    }

    token(text) {
      if (!text) return;
      if (this.root.dataset.state === "thinking") this.state("streaming");
      this.text += text;
      renderMarkdown(this.body, this.text, { provisional: true });
      emit("token", { chars: this.body.textContent.length });
      scrollToEnd();
    }

    discard() {
      this.text = "";
      this.body.replaceChildren();
      this.state("thinking");
    }

    complete(answer) {
      this.answer = answer;
      this.text = answer.answer ?? this.text;
      renderMarkdown(this.body, this.text);
      const urls = new Map((answer.citations ?? []).map((c) => [String(c.n), c.source_url]));
      resolveLinks(this.body, (n) => urls.get(String(n))); // the docs' own relative links, onto their site
      const refused = answer.status === "refused";
      this.badge.hidden = !refused;
      this.sources.replaceChildren();
      for (const c of answer.citations ?? []) {
        const li = el("li");
        // A source with a page is a real link (same tab on this site: the conversation comes along; a new tab
        // elsewhere); one without opens its passage in the panel.
        const web = isWeb(c.source_url);
        const b = web ? el("a", "cw-source") : el("button", "cw-source");
        if (web) {
          b.href = c.source_url;
          if (new URL(c.source_url).origin !== location.origin) {
            b.target = "_blank";
            b.rel = "noopener noreferrer";
          }
          b.addEventListener("click", () => emit("citation", { n: c.n, source_url: c.source_url }));
        } else b.type = "button";
        b.dataset.n = String(c.n);
        b.append(el("span", "cw-source-n", String(c.n)), el("span", "cw-source-file", c.filename || "document"));
        if (c.chapter) b.append(el("span", "cw-source-chapter", c.chapter.replaceAll(" > ", " › ")));
        b.title = [c.filename, c.chapter?.replaceAll(" > ", " › ")].filter(Boolean).join(" — ");
        b.setAttribute("aria-label", `Source ${c.n}: ${b.title}${web ? " (opens the page)" : ""}`);
        li.append(b);
        if (web) {
          // The page may be long: the quote itself is one click away too.
          const q = button("cw-source-quote", `Show what source ${c.n} says`);
          q.textContent = "Quote";
          q.dataset.n = String(c.n);
          li.append(q);
        }
        this.sources.append(li);
      }
      this.sources.hidden = !(answer.citations ?? []).length;
      this.notes.replaceChildren();
      if (refused) {
        const why = answer.refusal_detail; // in words, from the server's one table: never a code
        if (why) this.notes.append(el("p", "cw-why", why));
        const sections = answer.closest_sections ?? [];
        if (sections.length) {
          this.notes.append(el("p", "cw-note-title", "Closest sections to read (not an answer):"));
          const ul = el("ul", "cw-closest");
          for (const s of sections) {
            const label = s.filename + (s.chapter ? ` › ${s.chapter.replaceAll(" > ", " › ")}` : "");
            const li = el("li");
            if (isWeb(s.source_url)) {
              const a = el("a", null, label);
              a.href = s.source_url;
              li.append(a);
            } else li.textContent = label;
            ul.append(li);
          }
          this.notes.append(ul);
        }
      }
      this.footer.replaceChildren();
      const rating = feedbackControl(answer.answer_id, api);
      if (rating) this.footer.append(rating);
      this.state(refused ? "refused" : answer.status === "error" ? "error" : "done");
      emit("complete", { exit_reason: answer.exit_reason, status: answer.status, answer_id: answer.answer_id });
    }

    fail(message, retryable) {
      this.state("error");
      this.notes.replaceChildren(el("p", "cw-error", message));
      if (retryable) {
        const again = el("button", "cw-retry", "Try again");
        again.type = "button";
        again.addEventListener("click", () => {
          this.root.previousElementSibling?.remove();
          this.root.remove();
          ask(this.question, this.selected);
        });
        this.notes.append(again);
      }
    }

    // A citation opens its page on the docs site when it has one; otherwise the passage, with what the answer quotes
    // highlighted, inside the panel.
    async openCitation(n, opener) {
      const c = (this.answer?.citations ?? []).find((x) => Number(x.n) === n);
      if (!c) return;
      emit("citation", { n, source_url: c.source_url ?? null });
      if (isWeb(c.source_url)) {
        const target = new URL(c.source_url);
        if (target.origin === location.origin) location.assign(target.href); // the conversation is kept
        else window.open(target.href, "_blank", "noopener");
        return;
      }
      await showPassage(c, this.answer, opener);
    }
  }

  // -- the passage view --------------------------------------------------------------------------------------------
  let passageOpener = null;
  async function showPassage(c, answer, opener) {
    passageOpener = opener;
    passageTitle.textContent = c.filename || "Document";
    passageChapter.textContent = (c.chapter || "").replaceAll(" > ", " › ");
    passageBody.replaceChildren(el("p", "cw-muted", "Loading the passage…"));
    passageNote.textContent = "";
    messages.hidden = true;
    passage.hidden = false;
    passageBack.focus();
    let text = answer?.sources?.find((s) => s.chunk_id === c.chunk_id)?.text;
    if (!text) {
      try {
        text = (await getJSON(`/api/chunks/${encodeURIComponent(c.chunk_id)}`, api)).text;
      } catch {
        text = null;
      }
    }
    const mark = renderPassage(passageBody, text || c.snippet || "", text ? c.quote_spans : []);
    passageNote.textContent = mark ? "Highlighted: the text the answer quotes." : text ? "" : "Showing the start of the passage.";
    mark?.scrollIntoView({ block: "center" });
    emit("passage", { n: c.n, highlighted: passageBody.querySelectorAll("mark").length });
  }
  function showConversation() {
    if (passage.hidden) return;
    passage.hidden = true;
    messages.hidden = false;
    if (passageOpener?.isConnected) passageOpener.focus();
    passageOpener = null;
  }
  passageBack.addEventListener("click", showConversation);

  // -- continuity across the docs site's pages -------------------------------------------------------------------
  function slim(answer) {
    // What a restored conversation needs (sources' full texts are fetched again when a passage is opened).
    const keep = ["answer", "status", "exit_reason", "citations", "refusal_reason", "refusal_detail", "closest_sections", "answer_id", "session_id"];
    return Object.fromEntries(keep.map((k) => [k, answer[k]]));
  }
  function load() {
    try {
      return JSON.parse(sessionStorage.getItem(storeKey) || "{}");
    } catch {
      return {};
    }
  }
  function save() {
    try {
      sessionStorage.setItem(storeKey, JSON.stringify({ sessionId: state.sessionId, turns: state.turns }));
    } catch {
      // Storage full or blocked (private mode): the conversation still works, it just won't follow to the next page.
    }
  }

  messages.append(welcome);
  for (const turn of state.turns) {
    welcome.remove();
    messages.append(userBubble(turn.question, turn.selected));
    const view = new Answer(turn.question, turn.selected);
    messages.append(view.root);
    view.complete(turn.answer);
  }
  host.dataset.ready = "1";
  emit("ready", { restored: state.turns.length });
}
