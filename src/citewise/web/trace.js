// A run's trace events (docs/server.md) as steps a reader can follow: what was done, in words, with the detail that
// matters (the query searched, the passages found, what the check said). Unknown event types still get a line.

const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const quote = (text, max = 90) => {
  const s = String(text ?? "");
  return `“${s.length > max ? `${s.slice(0, max)}…` : s}”`;
};
const numbers = (list) => (list?.length ? list.map((n) => `[${n}]`).join(" ") : "");

const STEPS = {
  guard: (d) =>
    ({
      greeting: ["Answered a greeting", "No search needed."],
      empty_input: ["There was no question", ""],
    })[d.outcome] ?? ["Read the question", ""],
  constraints: (d) => {
    const asks = Object.entries(d)
      .filter(([, v]) => v && (!Array.isArray(v) || v.length) && typeof v !== "object")
      .map(([k]) => k.replaceAll("_", " "));
    return ["Worked out what the question asks for", asks.join(", ")];
  },
  standalone: (d) => {
    const before = d.from_turns?.length ? d.from_turns[d.from_turns.length - 1] : "";
    return [
      `Read as: ${quote(d.question, 160)}`,
      before ? `A follow-up, read with the question before it: ${quote(before)}` : "A follow-up, read with the conversation.",
    ];
  },
  plan: (d) => [`Planned ${plural(d.steps?.length ?? 0, "step")}`, (d.steps ?? []).map((s, i) => `${i + 1}. ${s}`).join(" ")],
  tool_call: (d) => {
    if (d.tool === "open_citation") return ["Opened a passage to read it in full", ""];
    const query = d.args?.query ?? d.query;
    if (d.condensed) {
      const chars = Number(d.message_chars ?? 0).toLocaleString("en");
      return [
        `Searched the docs for ${quote(query)}`,
        `The first search always runs; for a long message (${chars} characters) it looks for the question, the errors and the names it holds.`,
      ];
    }
    return [`Searched the docs for ${quote(query)}`, d.mandatory ? "The first search always runs." : ""];
  },
  tool_result: (d) => {
    if (d.tool === "open_citation") return d.found ? [`Read passage [${d.number}]`, ""] : ["That passage is not available", ""];
    const found = d.numbers ?? [];
    return found.length
      ? [`Found ${plural(found.length, "passage")}`, numbers(found)]
      : ["Found nothing close enough to the question", ""];
  },
  spelling: (d) => [
    "Corrected the spelling",
    Object.entries(d.corrections ?? {})
      .map(([from, to]) => `${from} → ${to}`)
      .join(", "),
  ],
  retrieval_failure: (d) => [
    d.kind === "empty_results" ? "No passage passed the minimum score" : "The search did not work",
    d.kind === "empty_results" ? "" : `${String(d.kind ?? "").replaceAll("_", " ")} (after ${plural(d.attempts ?? 1, "attempt")})`,
  ],
  compose: (d) =>
    d.refused
      ? ["Found no sentence that answers it", d.reason ?? ""]
      : [`Chose the sentences to quote`, d.used?.length ? `from passages ${numbers(d.used)}` : ""],
  draft: (d) => ["The model wrote a draft", d.chars ? `${d.chars} characters` : ""],
  validation: (d) => {
    if (d.refusal) return ["Checked the refusal", ""];
    if (d.ok) return ["Checked every claim against its source", "All of them hold."];
    const errors = d.errors ?? [];
    return [`Checked the claims: ${plural(errors.length, "problem")}`, errors.slice(0, 3).join(" · ")];
  },
  reprompt: (d) => ["Sent the draft back to be fixed", d.attempt ? `Attempt ${d.attempt}.` : ""],
  forced_synthesis: (d) => ["Wrote the answer from the passages found", d.used?.length ? `from ${numbers(d.used)}` : ""],
  grounded: (d) => [`Numbered ${plural(d.citations?.length ?? 0, "citation")}`, ""],
  uncited_answer: () => ["Dropped an answer that cited nothing", "An answer must rest on the docs."],
  fallback: (d) => ["Switched to a fallback model", d.answered_by ? `${d.answered_by} answered.` : ""],
  llm_error: (d) => ["The model failed", d.error ?? ""],
  generation_failure: (d) => ["The model gave no usable reply", d.action === "regenerate" ? "Asked again." : "Gave up."],
  invalid_tool_call: (d) => ["Ignored an invalid tool call", d.error ?? ""],
  tool_repeat: () => ["Skipped a search already made", ""],
  tool_budget: (d) => ["Reached the limit of tool calls", d.limit ? `${d.limit} per question.` : ""],
  context: (d) => ["Trimmed the conversation to fit", d.dropped_messages ? `${plural(d.dropped_messages, "message")} left out.` : ""],
  exit: (d) => ["Stopped", d.exit_reason ? String(d.exit_reason).replaceAll("_", " ").toLowerCase() : ""],
};

// {title, detail} for one trace event.
export function describeStep(event) {
  const data = event?.data ?? {};
  const make = STEPS[event?.type];
  if (make) {
    const [title, detail] = make(data);
    return { title, detail: detail ?? "" };
  }
  const title = String(event?.type ?? "step").replaceAll("_", " ");
  return { title: title.charAt(0).toUpperCase() + title.slice(1), detail: "" };
}
