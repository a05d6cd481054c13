// Thumbs up/down with an optional comment under an answer: the chat page and the widget both use it.
// A rating is sent at once; the comment, if the reader writes one, follows with the same rating (it replaces it).

import { postJSON } from "./api.js";

const THUMB =
  '<svg viewBox="0 0 24 24" aria-hidden="true"><path d="M7 10v10H4V10zM7 10l4-7a2 2 0 0 1 3 2l-1 5h6a2 2 0 0 1 2 ' +
  '2.3l-1.3 7A2 2 0 0 1 17.7 21H7" fill="none" stroke="currentColor" stroke-width="1.7" stroke-linejoin="round"/></svg>';

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}

// The control for one answer; `api` is {apiKey, base} for postJSON. Returns null when the answer has no id (the
// server keeps no answers: feedback.enabled is off).
export function feedbackControl(answerId, api) {
  if (!answerId) return null;
  const root = el("div", "feedback");
  root.setAttribute("role", "group");
  root.setAttribute("aria-label", "Rate this answer");
  const ask = el("span", "feedback-q", "Helpful?");
  const up = el("button", "feedback-btn feedback-up");
  const down = el("button", "feedback-btn feedback-down");
  for (const [button, label] of [
    [up, "Yes, this answer helped"],
    [down, "No, this answer did not help"],
  ]) {
    button.type = "button";
    button.innerHTML = THUMB;
    button.setAttribute("aria-label", label);
    button.setAttribute("aria-pressed", "false");
    button.title = label;
  }
  const status = el("span", "feedback-status");
  status.setAttribute("role", "status");
  const form = el("form", "feedback-comment");
  form.hidden = true;
  const label = el("label", "feedback-label", "What was wrong or missing? (optional)");
  const box = el("textarea", "feedback-text");
  box.rows = 2;
  box.maxLength = 2000;
  const id = `fb-${answerId}`;
  box.id = id;
  label.htmlFor = id;
  const send = el("button", "feedback-send", "Send");
  send.type = "submit";
  form.append(label, box, send);
  root.append(ask, up, down, status, form);

  let rating = null;
  const post = async (comment) => {
    status.textContent = "Sending…";
    try {
      await postJSON("/api/feedback", { answer_id: answerId, rating, comment: comment || null }, api);
      status.textContent = comment ? "Thanks, sent." : "Thanks!";
      root.dispatchEvent(new CustomEvent("citewise:feedback", { bubbles: true, composed: true, detail: { rating, comment } }));
      return true;
    } catch (err) {
      status.textContent = err?.status === 404 ? "This answer can no longer be rated." : "Could not send. Try again.";
      return false;
    }
  };
  const choose = async (value) => {
    rating = value;
    up.setAttribute("aria-pressed", String(value === "up"));
    down.setAttribute("aria-pressed", String(value === "down"));
    root.dataset.rating = value;
    label.textContent = value === "down" ? "What was wrong or missing? (optional)" : "Anything to add? (optional)";
    form.hidden = false;
    if (await post(null)) box.focus();
  };
  up.addEventListener("click", () => choose("up"));
  down.addEventListener("click", () => choose("down"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const comment = box.value.trim();
    if (!comment) return;
    if (await post(comment)) form.hidden = true;
  });
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  return root;
}
