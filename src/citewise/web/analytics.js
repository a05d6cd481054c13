// The admin page: what readers asked that the docs could not answer, which answers they marked bad, why Citewise
// refused, and the answer rate over time — from GET /api/analytics (a key with the admin role, for its own owner).

import { HttpError, getJSON } from "./api.js";
import { renderMarkdown } from "./render.js";

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}

function apiKey() {
  try {
    return JSON.parse(localStorage.getItem("citewise.settings") || "{}").apiKey || "";
  } catch {
    return "";
  }
}

const percent = (rate) => (rate == null ? "—" : `${Math.round(rate * 100)}%`);

async function load() {
  const status = $("report-status");
  status.hidden = false;
  status.textContent = "Loading…";
  let report;
  try {
    report = await getJSON(`/api/analytics?days=${$("days").value}`, { apiKey: apiKey() });
  } catch (err) {
    status.textContent =
      err instanceof HttpError && err.status === 403
        ? "Analytics need an admin key: add one in the chat's Settings (the server's admin_keys)."
        : err instanceof HttpError && err.status === 401
          ? "This server needs an API key: add yours in the chat's Settings."
          : "Could not load the analytics.";
    for (const id of ["totals", "rate-section", "gaps-section", "bad-section", "reasons-section"]) $(id).hidden = true;
    return;
  }
  status.hidden = true;
  render(report);
  document.body.dataset.ready = "1";
}

function render(r) {
  const totals = $("totals");
  totals.replaceChildren();
  for (const [label, value] of [
    ["Questions", r.questions],
    ["Answered", r.answered],
    ["Not covered", r.refused],
    ["Failed", r.failed],
    ["Answer rate", percent(r.answer_rate)],
    ["Marked bad", r.ratings?.down ?? 0],
    ["Marked good", r.ratings?.up ?? 0],
  ]) {
    const card = el("div", "report-card");
    card.append(el("span", "report-value", String(value)), el("span", "report-label", label));
    totals.append(card);
  }
  totals.hidden = false;

  const chart = $("rate-chart");
  chart.replaceChildren();
  chart.setAttribute("aria-label", r.by_day.map((d) => `${d.date}: ${percent(d.answer_rate)} of ${d.questions}`).join("; "));
  for (const day of r.by_day) {
    const bar = el("div", "rate-bar");
    bar.title = `${day.date}: ${day.answered} of ${day.questions} answered`;
    const fill = el("span", "rate-fill");
    fill.style.height = `${Math.round((day.answer_rate ?? 0) * 100)}%`;
    bar.append(fill, el("span", "rate-date", day.date.slice(5)));
    chart.append(bar);
  }
  $("rate-section").hidden = !r.by_day.length;

  const gaps = $("gaps");
  gaps.replaceChildren();
  for (const group of r.unanswered) {
    const tr = el("tr");
    const cell = el("td");
    cell.append(el("div", null, group.question));
    for (const other of group.questions.slice(1, 4)) cell.append(el("div", "muted small", other.question));
    if (group.rated_wrong) {
      // Readers expected an answer: the docs may hold it, and the refusal was the mistake, not a missing page.
      const said = (group.rated_wrong_comments ?? []).map((c) => `“${c}”`).join(" ");
      const times = group.rated_wrong > 1 ? ` (${group.rated_wrong} readers)` : "";
      cell.append(el("div", "small rated-wrong", `Refusal rated wrong${times}: the docs may answer it already. ${said}`.trim()));
    }
    tr.append(el("td", "num", String(group.count)), cell);
    gaps.append(tr);
  }
  $("gaps-section").hidden = !r.unanswered.length;

  const bad = $("bad");
  bad.replaceChildren();
  for (const a of r.marked_bad) {
    const item = el("article", "bad-answer");
    item.append(el("h3", null, a.question));
    if (a.comment) item.append(el("blockquote", "bad-comment", a.comment));
    // The answer as the reader saw it: rendered markdown (sanitized), never its raw ** and backticks.
    const text = el("div", "bad-text markdown");
    renderMarkdown(text, a.answer.length > 400 ? `${a.answer.slice(0, 400)}…` : a.answer);
    item.append(text);
    const meta = [a.exit_reason, a.status, `${a.citations.length} sources`, `docs version ${a.docs_version ?? "?"}`, a.rated_at];
    item.append(el("p", "muted small", meta.join(" · ")));
    bad.append(item);
  }
  $("bad-section").hidden = !r.marked_bad.length;

  const reasons = $("reasons");
  reasons.replaceChildren();
  for (const reason of r.refusals_by_reason) {
    const tr = el("tr");
    const cell = el("td");
    cell.append(el("div", null, reason.meaning || reason.reason), el("div", "muted small", reason.reason));
    tr.append(el("td", "num", String(reason.count)), cell);
    reasons.append(tr);
  }
  $("reasons-section").hidden = !r.refusals_by_reason.length;
}

$("days").addEventListener("change", load);
load();
