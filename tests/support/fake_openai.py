"""A real OpenAI-compatible server on loopback, for testing vendor paths end to end.

`FakeOpenAI` serves `POST /v1/chat/completions` over HTTP/1.1 with keep-alive (the standard library's
ThreadingHTTPServer), streaming (`"stream": true`: SSE chunks, chunked transfer encoding) and not, with tool calls.
Point `langchain-openai` at it with `llm="openai:<any name>"`, `llm_base_url=server.url`, any API key.

It also serves `POST /v1/embeddings` (`embeddings="openai:<any name>"`, `embeddings_base_url=server.url`): each
input text gets a hashed bag-of-words vector of `EMBEDDING_DIM` numbers, so texts sharing words are near each other
and a small corpus can be searched. An input that is not a string (token ids, which langchain-openai sends when it
tokenises for OpenAI's own models) is answered 400, as a server with another tokenizer should, and so is a request
with a text holding `refuse_embedding` (a text over the model's limit); one with more than `max_inputs` texts is
answered 413 (a server's batch limit). Queued `Fault`s with a status apply to
embeddings too; a hang-only one is for chat.

What it answers:
- replies queued with `script(...)` first, in order: a `Reply` (text and/or tool calls) or a `Fault` (an HTTP error
  with headers such as Retry-After, a hang, garbage JSON, a truncated stream);
- then `responder(request_json)`, by default `agent_responder`: a plan for the agent's planner call (no tools), and
  for a call with tools a verbatim sentence of passage [1] of the last tool result, cited `[1]` — an answer the
  agent's validator accepts without any knowledge of the question.

Every request is recorded (`requests`: time, JSON body, the client's connection) so tests can check retry timing
and connection reuse. Nothing here is a mock of Citewise: it is the vendor's side of a real HTTP conversation.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PLAN_REPLY = '["Search the docs for the question", "Answer with citations"]'
_PASSAGE_ONE = re.compile(r"^\[1\] [^\n]*\n(?P<text>.+?)(?:\n\n|\Z)", re.S | re.M)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z0-9]+")
EMBEDDING_DIM = 64


@dataclass
class Reply:
    """A successful completion: text, tool calls ({"name", "args"}), or both."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    chunk_delay_s: float = 0.0  # streamed: pause between chunks (a slow model)


@dataclass
class Fault:
    """A misbehaving provider.

    status: an HTTP error status (429, 500, ...) with `headers` and a JSON error body.
    hang_s: sleep this long before answering at all (a timeout on the client side).
    garbage: answer 200 with a body that is not JSON.
    truncate: start a reply and cut the connection halfway (streamed: after one chunk).
    """

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0
    garbage: bool = False
    truncate: bool = False


@dataclass
class Recorded:
    at: float  # time.monotonic() when the request arrived
    body: dict[str, Any]
    client: tuple[str, int]  # the client's address: the same port means the same (kept-alive) connection

    @property
    def streamed(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def has_tools(self) -> bool:
        return bool(self.body.get("tools"))


def _last_tool_result(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "tool":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content or "")
    return ""


def agent_responder(body: dict[str, Any]) -> Reply:
    """A plan for the planner; for an answer turn, the first sentence of passage [1] of the last tool result."""
    if not body.get("tools"):
        return Reply(text=PLAN_REPLY)
    match = _PASSAGE_ONE.search(_last_tool_result(body))
    if match is None:
        return Reply(text="I don't have enough information in the current documentation to answer that.")
    first = _SENTENCE.split(match.group("text").strip().splitlines()[0].strip())[0].rstrip(" …")
    return Reply(text=f"{first} [1]")


def bag_of_words(text: str) -> list[float]:
    """The fake embedding: word counts hashed into EMBEDDING_DIM buckets, unit length (deterministic across runs)."""
    vector = [0.0] * EMBEDDING_DIM
    for word in _WORD.findall(text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % EMBEDDING_DIM] += 1.0
    norm = sum(v * v for v in vector) ** 0.5
    return [v / norm for v in vector] if norm else [1.0] + [0.0] * (EMBEDDING_DIM - 1)


class FakeOpenAI:
    """An OpenAI-compatible HTTP/1.1 server on 127.0.0.1 (see the module docstring). Use as a context manager."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply | Fault] = agent_responder) -> None:
        self.responder = responder
        self.requests: list[Recorded] = []
        self.refuse_embedding: str | None = None  # an input holding this is answered 400, as an over-long one is
        self.max_inputs: int | None = None  # a request with more texts is answered 413, as TEI's batch limit is
        self._script: list[Reply | Fault] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def script(self, *replies: Reply | Fault) -> FakeOpenAI:
        with self._lock:
            self._script.extend(replies)
        return self

    def clear_script(self) -> None:
        with self._lock:
            self._script.clear()

    @property
    def connections(self) -> int:
        """Distinct client connections seen (fewer than requests: keep-alive connections were reused)."""
        return len({r.client for r in self.requests})

    def _take(self, body: dict[str, Any], client: tuple[str, int]) -> Reply | Fault | None:
        """Record the request and take the next queued reply, if any."""
        with self._lock:
            self.requests.append(Recorded(time.monotonic(), body, client))
            return self._script.pop(0) if self._script else None

    def next_reply(self, body: dict[str, Any], client: tuple[str, int]) -> Reply | Fault:
        queued = self._take(body, client)
        return queued if queued is not None else self.responder(body)

    def next_embedding_fault(self, body: dict[str, Any], client: tuple[str, int]) -> Fault | None:
        """A queued Fault for this embeddings request, if any (a queued Reply means "answer normally")."""
        queued = self._take(body, client)
        return queued if isinstance(queued, Fault) else None


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (a cancelled run, a timeout on its side) is part of the job, not an error.
        pass


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its connection between calls

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            route = self.path.rstrip("/")
            if not route.endswith(("/chat/completions", "/embeddings")):
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._json(400, {"error": {"message": "invalid JSON", "type": "invalid_request_error"}})
                return
            if route.endswith("/embeddings"):
                self._embeddings(body)
                return
            reply = fake.next_reply(body, self.client_address)
            if isinstance(reply, Fault) and reply.hang_s and reply.status is None and not reply.garbage:
                time.sleep(reply.hang_s)  # a slow answer, then the normal one
                reply = fake.responder(body)
            if isinstance(reply, Fault):
                self._fault(reply, streamed=bool(body.get("stream")))
            elif body.get("stream"):
                self._stream(body, reply)
            else:
                self._json(200, _completion(body, reply))

        def _embeddings(self, body: dict[str, Any]) -> None:
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else texts
            fault = fake.next_embedding_fault(body, self.client_address)
            if fault is not None:
                self._fault(fault, streamed=False)
            elif not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
                message = "input must be a string or a list of strings (this server has its own tokenizer)"
                self._json(400, {"error": {"message": message, "type": "invalid_request_error"}})
            elif fake.max_inputs is not None and len(texts) > fake.max_inputs:
                message = f"batch size {len(texts)} > maximum allowed batch size {fake.max_inputs}"
                self._json(413, {"error": {"message": message, "type": "invalid_request_error"}})
            elif fake.refuse_embedding and any(fake.refuse_embedding in t for t in texts):
                message = "This model's maximum context length is 512 tokens"
                self._json(400, {"error": {"message": message, "type": "invalid_request_error"}})
            else:
                data = [{"object": "embedding", "index": i, "embedding": bag_of_words(t)} for i, t in enumerate(texts)]
                usage = {"prompt_tokens": 1, "total_tokens": 1}
                self._json(200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage})

        def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _fault(self, fault: Fault, *, streamed: bool) -> None:
            if fault.hang_s:
                time.sleep(fault.hang_s)
            if fault.status is not None:
                kind = "rate_limit_exceeded" if fault.status == 429 else "server_error"
                self._json(fault.status, {"error": {"message": f"fake {fault.status}", "type": kind}}, fault.headers)
            elif fault.garbage:
                data = b"<html>this is not json"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif fault.truncate:
                self.send_response(200)
                if streamed:
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self._chunk(_sse(_chunk_payload({"role": "assistant", "content": "Half an ans"})))
                else:
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "4096")
                    self.end_headers()
                    self.wfile.write(b'{"id": "chatcmpl-fake", "choices": [')
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _stream(self, body: dict[str, Any], reply: Reply) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._chunk(_sse(_chunk_payload({"role": "assistant", "content": ""})))
            for word in re.findall(r"\s*\S+\s*|\s+", reply.text):
                if reply.chunk_delay_s:
                    time.sleep(reply.chunk_delay_s)
                self._chunk(_sse(_chunk_payload({"content": word})))
            for i, call in enumerate(reply.tool_calls):
                delta = {"tool_calls": [{"index": i, **_tool_call(call, i)}]}
                self._chunk(_sse(_chunk_payload(delta)))
            finish = "tool_calls" if reply.tool_calls else "stop"
            self._chunk(_sse(_chunk_payload({}, finish=finish)))
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")  # the last chunk: the connection stays open for the next request

    return Handler


def _tool_call(call: dict[str, Any], i: int) -> dict[str, Any]:
    return {
        "id": call.get("id") or f"call_fake_{i}",
        "type": "function",
        # `raw_arguments`: the arguments exactly as a model wrote them (malformed JSON included)
        "function": {
            "name": call["name"],
            "arguments": call.get("raw_arguments") or json.dumps(call.get("args") or {}),
        },
    }


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [_tool_call(c, i) for i, c in enumerate(reply.tool_calls)]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _chunk_payload(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()
