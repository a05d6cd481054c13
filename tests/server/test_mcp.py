"""The MCP server through the SDK's own client, over both transports: `citewise mcp` as a real stdio subprocess, and
`/mcp` on a real uvicorn server (streamable HTTP) behind the request gate — the API's keys and owners, 401 before
the body is read, the body limit, the rate limit."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from tests.agent.agent_support import ALICE, WORKER_QUESTION
from tests.server.conftest import KEYS, VAULT_QUESTION, VAULT_SECRET, auth
from tests.server.test_openai_api import checkpoints

from citewise.agent.tools import MAX_QUERY_CHARS
from citewise.index.knowledge_base import KnowledgeBase
from citewise.server.schemas import MAX_MESSAGE_CHARS
from citewise.settings import Settings
from citewise.types import MAX_SELECTED_TEXT_CHARS, REFUSAL_TEXT

UNANSWERABLE = "What is the recommended recipe for sourdough bread with rye flour?"
TOOLS = {"search_docs", "open_citation", "ask"}
DOCS = Path(__file__).parents[2] / "docs" / "mcp.md"


def http_client(url: str, key: str | None = None) -> Client:
    headers = auth(key) if key else {}
    return Client(streamable_http_client(url + "/mcp", http_client=httpx2.AsyncClient(headers=headers, timeout=120)))


async def exercise(client: Client) -> dict:
    """What one session finds through every tool and resource."""
    found: dict = {}
    tools = (await client.list_tools()).tools
    found["tools"] = {t.name for t in tools}
    found["inputs"] = {t.name: t.input_schema["properties"] for t in tools}
    search = await client.call_tool("search_docs", {"query": "worker pool threads", "top_k": 3})
    assert not search.is_error, search
    found["search"] = search.structured_content
    chunk_id = search.structured_content["passages"][0]["chunk_id"]
    opened = await client.call_tool("open_citation", {"chunk_id": chunk_id})
    found["opened"] = opened.structured_content
    found["ask"] = await client.call_tool("ask", {"question": WORKER_QUESTION, "mode": "quote"})
    found["refusal"] = await client.call_tool("ask", {"question": UNANSWERABLE})
    listing = await client.read_resource("citewise://documents")
    found["documents"] = json.loads(listing.contents[0].text)
    first = found["documents"][0]["uri"]
    found["document"] = (await client.read_resource(first)).contents[0].text
    found["missing"] = await client.call_tool("open_citation", {"chunk_id": "00000000-0000-0000-0000-000000000000"})
    return found


def check(found: dict) -> None:
    assert found["tools"] == TOOLS
    # The bounds a client is shown are the ones the rest of Citewise applies (one constant each).
    inputs = found["inputs"]
    assert inputs["search_docs"]["query"]["maxLength"] == MAX_QUERY_CHARS
    assert inputs["ask"]["question"]["maxLength"] == MAX_MESSAGE_CHARS
    assert MAX_SELECTED_TEXT_CHARS in [s.get("maxLength") for s in inputs["ask"]["selected_text"]["anyOf"]]
    passages = found["search"]["passages"]
    assert len(passages) == 3 and all(p["chunk_id"] and p["filename"] and p["text"] for p in passages)
    assert found["opened"]["chunk_id"] == passages[0]["chunk_id"] and found["opened"]["text"] == passages[0]["text"]

    ask = found["ask"]
    assert not ask.is_error
    answer = ask.structured_content
    assert answer["status"] == "success" and answer["exit_reason"] == "COMPLETED"
    assert "[1]" in answer["answer"] and "twelve threads" in answer["answer"]
    assert {"n", "filename", "chapter", "source_url", "chunk_id"} <= set(answer["citations"][0])
    text = ask.content[0].text  # what a model reads: the answer, then what each [n] is
    assert text.startswith(answer["answer"]) and "\n\nSources:\n[1] " in text

    refusal = found["refusal"].structured_content
    assert refusal["status"] == "refused" and refusal["answer"].startswith(REFUSAL_TEXT)
    assert refusal["citations"] == [] and refusal["refusal_detail"]
    assert not found["refusal"].is_error  # an honest refusal is a result, not a tool failure

    assert found["documents"] and all(d["uri"].startswith("citewise://documents/") for d in found["documents"])
    assert len(found["document"]) > 100
    assert found["missing"].is_error and "No passage" in found["missing"].content[0].text


def stdio(home: Path, *options: str) -> StdioServerParameters:
    """`citewise mcp --home HOME [options]` as a real subprocess."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")]),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "CITEWISE_SERVER__LOG_QUESTIONS": "false",
    }
    return StdioServerParameters(
        command=sys.executable, args=["-m", "citewise.cli", "mcp", "--home", str(home), *options], env=env
    )


def test_stdio_transport(served_home: Path):
    async def main() -> dict:
        async with Client(stdio(served_home)) as client:
            return await exercise(client)

    check(anyio.run(main))


def test_stdio_owner_reads_its_own_and_public_documents_only(served_home: Path):
    """`citewise mcp --owner bob`: Alice's document is neither listed nor readable by its URI (the retriever's
    lookup puts the owner rule in the store's query), while a public one reads in full."""
    (alice_doc,) = KnowledgeBase(Settings(home=served_home)).registry.list(owner=ALICE)

    async def main() -> tuple[list[dict], str, str]:
        async with Client(stdio(served_home, "--owner", "bob")) as client:
            listed = json.loads((await client.read_resource("citewise://documents")).contents[0].text)
            public = (await client.read_resource(listed[0]["uri"])).contents[0].text
            try:
                await client.read_resource(f"citewise://documents/{alice_doc.doc_id}")
            except MCPError as exc:
                return listed, public, str(exc)
        return listed, public, "read it"

    listed, public, refused = anyio.run(main)
    assert alice_doc.doc_id not in {d["doc_id"] for d in listed}
    assert len(public) > 100 and "No document" in refused


def test_http_transport_is_the_apis_keys_and_owners(agent_app, live_server, served_home):
    server = live_server(agent_app(api_keys=KEYS))
    kept = checkpoints(served_home)

    async def main() -> tuple:
        async with http_client(server.url, "key-bob") as client:
            found = await exercise(client)
            bob = await client.call_tool("ask", {"question": VAULT_QUESTION, "mode": "quote"})
        async with http_client(server.url, "key-alice") as client:
            alice = await client.call_tool("ask", {"question": VAULT_QUESTION, "mode": "quote"})
            docs = json.loads((await client.read_resource("citewise://documents")).contents[0].text)
        return found, bob, alice, docs

    found, bob, alice, docs = anyio.run(main)
    check(found)
    assert checkpoints(served_home) == kept  # an MCP question has no conversation to keep: no LangGraph thread
    assert VAULT_SECRET not in str(bob.structured_content)
    assert VAULT_SECRET in alice.structured_content["answer"]  # her own notes, through her key
    assert {d["filename"] for d in docs} - {d["filename"] for d in found["documents"]} == {"vault-notes.md"}

    # Bob can't read Alice's document by its URI either: the owner scope is part of the query.
    alice_doc = next(d["uri"] for d in docs if d["filename"] == "vault-notes.md")

    async def bob_reads() -> str:
        async with http_client(server.url, "key-bob") as client:
            try:
                await client.read_resource(alice_doc)
            except MCPError as exc:
                return str(exc)
        return "read it"

    assert "No document" in anyio.run(bob_reads)

    # search_docs and open_citation are owner-scoped too: Alice's passage is found by her key only.
    async def search_as(key: str, chunk_id: str | None = None) -> tuple[list[dict], bool | None]:
        async with http_client(server.url, key) as client:
            found = await client.call_tool("search_docs", {"query": VAULT_QUESTION, "top_k": 10})
            opened = await client.call_tool("open_citation", {"chunk_id": chunk_id}) if chunk_id else None
        return found.structured_content["passages"], opened.is_error if opened else None

    alices, _ = anyio.run(search_as, "key-alice")
    vault = next(p for p in alices if p["filename"] == "vault-notes.md")
    bobs, bob_opened = anyio.run(search_as, "key-bob", vault["chunk_id"])
    assert all(p["filename"] != "vault-notes.md" for p in bobs) and VAULT_SECRET not in str(bobs)
    assert bob_opened is True  # the same "No passage" as an id that does not exist


def test_http_transport_passes_the_gate(agent_app, live_server):
    server = live_server(agent_app(api_keys=KEYS, server={"max_body_mb": 0.01, "rate_limit_per_minute": 3}))
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, timeout=60) as http:
        # No key: 401 from the headers alone; an over-long body is never read (413 from Content-Length).
        assert http.post("/mcp", json=body, headers=headers).status_code == 401
        big = http.post("/mcp", content=b"x" * 20_000, headers={**headers, **auth("key-alice")})
        assert big.status_code == 413
        # The key's rate limit covers /mcp like every route (the 413 above counted as one request).
        codes = [http.post("/mcp", json=body, headers={**headers, **auth("key-alice")}).status_code for _ in range(3)]
        assert codes[:2] == [200, 200] and codes[2] == 429


def test_the_docs_http_example_runs(agent_app, live_server):
    """docs/mcp.md's Python client example, as written, against a live server with the example's key."""
    [example] = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    server = live_server(agent_app(api_keys={"k-3f9a0c": "alice"}))
    question = "How do I rotate the API key?"
    assert question in example
    code = example.replace("http://127.0.0.1:8000", server.url).replace(question, WORKER_QUESTION)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(DOCS), "exec"), {})
    text = printed.getvalue()
    assert "twelve threads" in text and "\n\nSources:\n[1] " in text
    assert text.rstrip().endswith("COMPLETED")
