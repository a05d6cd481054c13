// The page's and the widget's only way to the server: the public HTTP API. EventSource can't POST a JSON body or send
// an X-API-Key header, so the stream is read with fetch and parsed here (WHATWG "text/event-stream" rules).
// `base` is the server's root URL ending in "/" (the widget runs on another site's page); the page leaves it out.

export class HttpError extends Error {
  constructor(status, detail, retryAfterS = null) {
    super(detail || `HTTP ${status}`);
    this.status = status;
    this.retryAfterS = retryAfterS;
  }
}

function url(base, path) {
  return (base || "/") + path.replace(/^\//, "");
}

function headers(apiKey, extra = {}) {
  const h = { ...extra };
  if (apiKey) h["X-API-Key"] = apiKey;
  return h;
}

async function errorFrom(response) {
  let detail = "";
  try {
    const body = await response.json();
    if (typeof body.detail === "string") detail = body.detail;
    else if (Array.isArray(body.detail)) detail = body.detail.map((d) => d.msg ?? JSON.stringify(d)).join("; ");
    else detail = body.message || JSON.stringify(body.detail ?? body);
  } catch {
    detail = response.statusText;
  }
  const retryAfter = Number.parseFloat(response.headers.get("Retry-After") ?? "");
  return new HttpError(response.status, detail, Number.isFinite(retryAfter) ? retryAfter : null);
}

// Yields {event, data, id} for each dispatched event. Handles CRLF/CR/LF line ends split across chunks,
// comment lines (": ping") and multi-line data fields.
export async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let type = "";
  let data = [];
  let id = null;
  const lineEnd = /\r\n|\r|\n/;
  try {
    for (let ended = false; !ended; ) {
      const { value, done } = await reader.read();
      ended = done;
      buffer += value ?? "";
      for (;;) {
        const m = lineEnd.exec(buffer);
        // A lone trailing "\r" may be the first half of "\r\n": wait for the next chunk (unless there is none).
        if (!m || (m[0] === "\r" && m.index === buffer.length - 1 && !ended)) break;
        const line = buffer.slice(0, m.index);
        buffer = buffer.slice(m.index + m[0].length);
        if (line === "") {
          if (data.length) yield { event: type || "message", data: data.join("\n"), id };
          type = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        let val = colon === -1 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "event") type = val;
        else if (field === "data") data.push(val);
        else if (field === "id") id = val;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function parseData(raw) {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

// Runs one question. `handlers` gets onTrace/onToken/onDiscard/onCitation as they arrive (onDiscard: forget the
// tokens shown so far, the next ones replace them — the server's one signal for that); resolves with
// {answer} (the `complete` event) or {error} (the `error` event). Throws HttpError for non-2xx replies.
export async function streamAnswer(body, { apiKey, signal, handlers, base }) {
  const response = await fetch(url(base, "/api/agent/stream"), {
    method: "POST",
    headers: headers(apiKey, { "Content-Type": "application/json", Accept: "text/event-stream" }),
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await errorFrom(response);
  for await (const ev of readEvents(response.body)) {
    const data = parseData(ev.data);
    switch (ev.event) {
      case "trace":
        handlers.onTrace?.(data);
        break;
      case "token":
        handlers.onToken?.(typeof data === "string" ? data : (data?.text ?? ""));
        break;
      case "discard":
        handlers.onDiscard?.(data);
        break;
      case "citation":
        handlers.onCitation?.(data);
        break;
      case "complete":
        return { answer: data };
      case "error":
        return { error: typeof data === "string" ? { message: data } : data };
      default:
        break; // unknown events (pings, future additions) are ignored
    }
  }
  return { error: { message: "The connection closed before the answer finished.", retryable: true } };
}

export async function getJSON(path, { apiKey, signal, base } = {}) {
  const response = await fetch(url(base, path), { headers: headers(apiKey, { Accept: "application/json" }), signal });
  if (!response.ok) throw await errorFrom(response);
  return response.json();
}

export async function postJSON(path, body, { apiKey, signal, base } = {}) {
  const response = await fetch(url(base, path), {
    method: "POST",
    headers: headers(apiKey, { "Content-Type": "application/json", Accept: "application/json" }),
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await errorFrom(response);
  return response.json();
}
