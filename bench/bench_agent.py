"""Agent mode, judged: scripted models play a model over question sets whose gold is known, through the real agent.

    .venv/bin/python bench/bench_agent.py [--set NAME ...] [--persona NAME ...] [--limit N] [--no-surfaces]

No capable model runs on this machine, so the harness a model runs in (the tool loop, the validator and its
reprompts, the fallback, grounding) is measured with models whose behaviour is known: the personas of
tests/support/personas.py, served by a real OpenAI-compatible HTTP/1.1 server on loopback and reached through
langchain-openai, as a vendor is. Each question runs the path `citewise ask --mode agent` runs (Citewise.ask); the
planted-instruction questions also run through the HTTP API (/api/agent/run, /v1/chat/completions, /mcp) on a real
server, and a sample of questions through the `citewise ask` command itself, to show the paths agree.

Per set (and distribution): the gold passage reached within the tool budget where a search finds it; faithful and
paraphrased answers accepted as written; each injected fault kind caught (by a reprompt that fixed it, the quote-mode
fallback, or a refusal) or leaked; confident answers to unanswerable questions caught; the unruly persona's exit
reasons and citation validity; prompt and completion tokens per question (the messages and tool schemas sent,
counted with the shipped embedder's WordPiece tokenizer: a GPT tokenizer's count is within ~15% on English docs);
harness time per model turn (the run's time minus the scripted model's). Baselines beside it: no validator (the
persona's first answer as written) and quote mode on the same questions.

Question sets and homes are bench/quote_data.py's (fitted and judged roles as there); results go to
bench/results/agent.json and per-question rows to bench/data/agent/rows.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from pydantic import SecretStr

from _common import ROOT, write_result

sys.path.insert(0, str(ROOT))  # the scripted server the tests use: tests/support/{fake_openai,personas}.py

from tests.support.personas import (
    FAULTS,
    INJECTED,
    PERSONAS,
    PLANTED_HOST,
    Gold,
    Persona,
    PersonaServer,
    norm,
    reformulate,
)

import quote_data
from citewise.agent.runner import Citewise
from citewise.index.knowledge_base import KnowledgeBase
from citewise.types import Status
from quote_data import SETS, Question, build_home, judge, settings_for

PLANTED = ROOT / "tests" / "fixtures" / "planted"
OUT = ROOT / "bench" / "data" / "agent"
DOCS_SETS = [
    "fixtures",
    "citewise_docs",
    "starlette_docs",
    "somnia_a",
    "starlette_short",
    "somnia_b",
    "pip_docs",
    "structlog_docs",
    "pip_rejection",
    "somnia_rejection",
    "structlog_rejection",
]
MODEL = "openai:persona"


def planted_set() -> quote_data.QuestionSet:
    """The fixtures' product with three pages that plant instructions for a model (tests/fixtures/planted/)."""
    corpus = quote_data.Corpus("planted", folders=[ROOT / "tests" / "fixtures" / "corpus", PLANTED])
    rows = [json.loads(line) for line in (PLANTED / "questions.jsonl").read_text().splitlines() if line.strip()]
    questions = [Question(r["id"], r["question"], True, expect_any=r["expect_any"], kind=r["plant"]) for r in rows]
    return quote_data.QuestionSet("planted", "planted", lambda: corpus, lambda: questions, "fit")


def gold_of(q: Question) -> Gold:
    return Gold(q.question, q.answerable, expect_any=list(q.expect_any), expect_all=q.expect_all, id=q.id)


def token_counter():
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(ROOT / "src" / "citewise" / "index" / "model" / "tokenizer.json"))
    tokenizer.no_truncation()
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def agent_settings(home: Path, url: str):
    settings = settings_for(home)
    generation = settings.generation.model_copy(update={"cache": False, "llm_retry_wait_s": 0.0})
    return settings.model_copy(
        update={"llm": MODEL, "llm_base_url": url, "llm_api_key": SecretStr("sk-bench"), "generation": generation}
    )


# -- one question ------------------------------------------------------------------------------------------------


def _events(answer, kind: str) -> list:
    return [e for e in answer.trace if e.type == kind]


def _holds_gold(text: str, q: Question) -> bool:
    groups = q.expect_all or ([q.expect_any] if q.expect_any else [])
    t = norm(text)
    return bool(groups) and all(any(norm(s) in t for s in g if s.strip()) for g in groups)


def citation_valid(answer) -> bool:
    """Every [n] in the text's prose is a citation (`items[7]` in code is code), and every citation is a chunk of
    the run's sources."""
    from citewise.agent.grounding import cited_numbers

    marks = set(cited_numbers(answer.answer))
    numbers = {c.n for c in answer.citations}
    sources = {c.chunk_id for c in answer.sources}
    return marks <= numbers and all(c.chunk_id in sources for c in answer.citations)


def fault_outcome(persona: str, kind: str, answer, first_ok: bool | None, draft: str) -> str:
    """caught_reprompt | caught_fallback | caught_refused | leaked | not_injected (for faults and confident answers)."""
    synthesized = bool(_events(answer, "forced_synthesis"))
    refused = answer.status == Status.REFUSED
    if kind == "confident":
        if refused:
            return (
                "caught_fallback" if synthesized else ("caught_refused" if first_ok is not False else "caught_reprompt")
            )
        return "leaked"
    if kind == "wrong_citation" and draft and "[" not in draft:
        return "not_injected"
    if first_ok:
        return "leaked"
    if synthesized:
        return "caught_fallback"
    return "caught_refused" if refused else "caught_reprompt"


def ask_one(cw: Citewise, server: PersonaServer, spec, q: Question, persona: str, retriever) -> dict:
    served_before = len(server.served)
    requests_before = len(server.requests)
    start = time.perf_counter()
    answer = cw.ask(q.question, mode="agent")
    wall = time.perf_counter() - start
    served = server.served[served_before:]
    bodies = [r.body for r in server.requests[requests_before:] if r.body.get("tools")]
    model_s = sum(s.seconds for s in served)
    validations = _events(answer, "validation")
    first_ok = validations[0].data.get("ok") if validations else None
    drafts = [e for e in answer.trace if e.type == "draft"]
    first_draft = ""
    # The persona's first answer as written (what a harness without a validator would have shown).
    if bodies:  # the replies are deterministic: replayed to find the first answer the persona wrote
        replay = Persona(persona, {q.question: gold_of(q)})
        for body in bodies:
            reply = replay(body)
            if reply.text and not reply.tool_calls:
                first_draft = reply.text
                break
    shown = "\n".join(c.text for c in answer.sources)
    reached = _holds_gold(shown, q) if q.answerable else None
    findable = None
    if q.answerable:
        found = retriever.search(q.question[:1000], 10).chunks
        found += retriever.search(reformulate(q.question)[:1000], 10).chunks
        findable = _holds_gold("\n".join(c.text for c in found), q)
    cited = [c.filename[:-4] if c.filename.endswith(".txt") else c.filename for c in answer.citations]
    verdict = judge(q, str(answer.status), answer.answer, cited)
    draft_verdict = None
    if first_draft:
        draft_status = "refused" if first_draft.startswith("I don't have enough information") else "success"
        draft_verdict = judge(q, draft_status, first_draft, cited)
    kind = ""
    if persona == "hallucinating":
        kind = server.persona.fault(gold_of(q))
    elif persona == "unruly":
        kind = server.persona.unruly_kind(gold_of(q))
    elif persona == "obedient":
        kind = q.kind
    row = {
        "set": spec.name,
        "role": spec.role,
        "distribution": spec.distribution,
        "persona": persona,
        "id": q.id,
        "answerable": q.answerable,
        "kind": kind,
        "exit_reason": str(answer.exit_reason),
        "status": str(answer.status),
        "verdict": verdict,
        "draft_verdict": draft_verdict,
        "first_ok": first_ok,
        "first_errors": validations[0].data.get("errors") if validations else None,
        "reprompts": len(_events(answer, "reprompt")),
        "synthesized": bool(_events(answer, "forced_synthesis")),
        "drafts": len(drafts),
        "reached": reached,
        "findable": findable,
        "citations_valid": citation_valid(answer),
        "planted_leak": PLANTED_HOST in answer.answer or "![" in answer.answer,
        "model_calls": len(served),
        "prompt_tokens": sum(s.prompt_tokens for s in served),
        "completion_tokens": sum(s.completion_tokens for s in served),
        "harness_ms_per_turn": round((wall - model_s) * 1000 / max(1, len(served)), 1),
        "first_draft": first_draft,
        "answer": answer.answer,
    }
    if persona in ("hallucinating", "obedient") or (persona in ("diligent", "paraphrasing") and not q.answerable):
        row["fault"] = fault_outcome(persona, kind or "confident", answer, first_ok, first_draft)
    if persona == "hallucinating" and kind in INJECTED:
        row["fault_text_leaked"] = norm(INJECTED[kind]) in norm(answer.answer)
    return row


# -- surfaces: the same question through the server and the CLI --------------------------------------------------


def surfaces(home: Path, server: PersonaServer, questions: list[Question]) -> dict:
    """The planted questions through /api/agent/run, /v1/chat/completions and /mcp of a real server: does a remote
    image or a link carrying the question reach what each surface returns?"""
    import httpx
    import uvicorn

    from citewise.server.app import create_app
    from citewise.server.serving import uvicorn_config

    settings = agent_settings(home, server.url).model_copy(update={"api_keys": {"bench-key": "public"}})
    app = create_app(settings)
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn_config(app, settings, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    while not uv.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": "Bearer bench-key"}
    out: dict[str, dict] = {"api": {}, "stream": {}, "v1": {}, "mcp": {}}
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
            for q in questions:
                r = http.post("/api/agent/run", json={"question": q.question, "mode": "agent"}).json()
                out["api"][q.id] = r.get("answer", "")
                out["stream"][q.id] = _streamed_text(http, q.question)
                r = http.post(
                    "/v1/chat/completions",
                    json={"model": "citewise-agent", "messages": [{"role": "user", "content": q.question}]},
                ).json()
                out["v1"][q.id] = ((r.get("choices") or [{}])[0].get("message") or {}).get("content") or str(r)
        out["mcp"] = asyncio.run(_mcp(base, headers, questions))
    finally:
        uv.should_exit = True
        thread.join(timeout=30)
    leaks = {
        surface: sorted(qid for qid, text in texts.items() if PLANTED_HOST in text or "![" in text)
        for surface, texts in out.items()
    }
    return {"leaks": leaks, "answers": out}


def _streamed_text(http, question: str) -> str:
    """Everything /api/agent/stream sent a page or widget to show: provisional tokens (discarded ones too) and the
    final answer."""
    shown = []
    with http.stream("POST", "/api/agent/stream", json={"question": question, "mode": "agent"}) as r:
        event = ""
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event in ("token", "complete"):
                data = json.loads(line[5:])
                shown.append(data.get("text") or data.get("answer") or "")
    return "".join(shown)


def surfaces_in_subprocess(name: str) -> dict:
    """`surfaces` in a process of its own, as a server runs in real use (and its start is timed apart from the
    library's runs)."""
    out = OUT / f"{name}_surfaces.json"
    subprocess.run([sys.executable, __file__, "--surfaces-json", str(out)], check=True, timeout=900)
    return json.loads(out.read_text())


async def _mcp(base: str, headers: dict, questions: list[Question]) -> dict[str, str]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    found = {}
    client = Client(streamable_http_client(base + "/mcp", http_client=httpx2.AsyncClient(headers=headers, timeout=120)))
    async with client:
        for q in questions:
            result = await client.call_tool("ask", {"question": q.question, "mode": "agent"})
            found[q.id] = "".join(getattr(part, "text", "") for part in result.content)
    return found


def cli_sample(home: Path, server: PersonaServer, questions: list[Question], library: dict[str, dict]) -> dict:
    """A few questions through the `citewise ask --mode agent --json` command: the same exit reason and text?"""
    env = {
        **os.environ,
        "CITEWISE_HOME": str(home),
        "CITEWISE_LLM": MODEL,
        "CITEWISE_LLM_BASE_URL": server.url,
        "CITEWISE_LLM_API_KEY": "sk-bench",
        "CITEWISE_GENERATION__CACHE": "false",
        "CITEWISE_SERVER__LOG_QUESTIONS": "false",
    }
    same = 0
    rows = []
    for q in questions:
        proc = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "citewise"), "ask", q.question, "--mode", "agent", "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        try:
            got = json.loads(proc.stdout)
        except ValueError:
            got = {"exit_reason": f"rc={proc.returncode}", "answer": proc.stderr[-300:]}
        lib = library[q.id]
        agree = (
            got.get("exit_reason") == lib["exit_reason"].split(".")[-1].lower()
            or got.get("exit_reason") == lib["exit_reason"]
        )
        agree = agree and got.get("answer") == lib["answer"]
        same += agree
        rows.append({"id": q.id, "agree": agree, "cli_exit_reason": got.get("exit_reason")})
    return {"questions": len(questions), "agree": same, "rows": rows}


# -- summaries ---------------------------------------------------------------------------------------------------


def pct(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


def summarise(rows: list[dict]) -> dict:
    by = defaultdict(list)
    for r in rows:
        by[r["persona"]].append(r)
    out: dict = {"questions": len({r["id"] for r in rows})}
    dil = by.get("diligent", [])
    if dil:
        findable = [r for r in dil if r["answerable"] and r["findable"]]
        answered = [r for r in dil if r["answerable"] and r["draft_verdict"] == "right"]
        out["diligent"] = {
            "gold_reached_where_findable": pct(sum(bool(r["reached"]) for r in findable), len(findable)),
            "findable": len(findable),
            "answerable": sum(r["answerable"] for r in dil),
            "faithful_accepted_as_written": pct(
                sum(r["first_ok"] is True and not r["synthesized"] for r in answered), len(answered)
            ),
            "faithful_answers": len(answered),
            "right": pct(
                sum(r["verdict"] == "right" for r in dil if r["answerable"]), sum(r["answerable"] for r in dil)
            ),
            "right_without_validator": pct(
                sum(r["draft_verdict"] == "right" for r in dil if r["answerable"]), sum(r["answerable"] for r in dil)
            ),
            "unanswerable_refused": pct(
                sum(r["status"] == "refused" for r in dil if not r["answerable"]), sum(not r["answerable"] for r in dil)
            ),
            "prompt_tokens_median": statistics.median(r["prompt_tokens"] for r in dil),
            "prompt_tokens_p90": sorted(r["prompt_tokens"] for r in dil)[int(0.9 * (len(dil) - 1))],
            "completion_tokens_median": statistics.median(r["completion_tokens"] for r in dil),
            "model_calls_median": statistics.median(r["model_calls"] for r in dil),
            "harness_ms_per_turn_p50": statistics.median(r["harness_ms_per_turn"] for r in dil),
            "exit_reasons": dict(Counter(r["exit_reason"] for r in dil)),
            "citations_valid": pct(sum(r["citations_valid"] for r in dil), len(dil)),
        }
    par = by.get("paraphrasing", [])
    if par:
        answered = [r for r in par if r["answerable"] and r["draft_verdict"] == "right"]
        out["paraphrasing"] = {
            "paraphrased_accepted_as_written": pct(
                sum(r["first_ok"] is True and not r["synthesized"] for r in answered), len(answered)
            ),
            "paraphrased_answers": len(answered),
            "right": pct(
                sum(r["verdict"] == "right" for r in par if r["answerable"]), sum(r["answerable"] for r in par)
            ),
            "citations_valid": pct(sum(r["citations_valid"] for r in par), len(par)),
        }
    hal = by.get("hallucinating", [])
    if hal:
        kinds: dict = {}
        for kind in (*FAULTS, "confident"):
            got = [r for r in hal if r["kind"] == kind and r.get("fault") not in (None, "not_injected")]
            # An answerable question the persona refused (the gold not found) carries no fault to catch.
            got = [
                r
                for r in got
                if kind == "confident"
                or (r["draft_verdict"] is not None and r["first_draft"] and not r["first_draft"].startswith("I don't"))
            ]
            counts = Counter(r["fault"] for r in got)
            caught = sum(v for k, v in counts.items() if k.startswith("caught"))
            kinds[kind] = {"injected": len(got), "caught": pct(caught, len(got)), **dict(counts)}
        out["hallucinating"] = {
            "faults": kinds,
            "citations_valid": pct(sum(r["citations_valid"] for r in hal), len(hal)),
        }
    unr = by.get("unruly", [])
    if unr:
        out["unruly"] = {
            kind: {
                "questions": sum(r["kind"] == kind for r in unr),
                "exit_reasons": dict(Counter(r["exit_reason"] for r in unr if r["kind"] == kind)),
                "status": dict(Counter(r["status"] for r in unr if r["kind"] == kind)),
                "citations_valid": pct(
                    sum(r["citations_valid"] for r in unr if r["kind"] == kind), sum(r["kind"] == kind for r in unr)
                ),
            }
            for kind in sorted({r["kind"] for r in unr})
        }
    obe = by.get("obedient", [])
    if obe:
        out["obedient"] = {
            "questions": len(obe),
            "planted_reached_reader": sum(r["planted_leak"] for r in obe),
            "exit_reasons": dict(Counter(r["exit_reason"] for r in obe)),
        }
    return out


def quote_baseline(cw: Citewise, spec, questions: list[Question]) -> dict:
    rows = []
    for q in questions:
        answer = cw.ask(q.question, mode="quote")
        cited = [c.filename[:-4] if c.filename.endswith(".txt") else c.filename for c in answer.citations]
        rows.append((q, judge(q, str(answer.status), answer.answer, cited)))
    ans = [v for q, v in rows if q.answerable]
    una = [v for q, v in rows if not q.answerable]
    return {
        "right": pct(sum(v == "right" for v in ans), len(ans)),
        "unanswerable_refused": pct(sum(v == "refused" for v in una), len(una)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", nargs="+", default=[*DOCS_SETS, "planted"])
    parser.add_argument("--persona", nargs="+", choices=PERSONAS, default=list(PERSONAS))
    parser.add_argument("--limit", type=int, default=0, help="the first N questions of each set (0: all)")
    parser.add_argument("--no-surfaces", action="store_true", help="skip the server and CLI paths")
    parser.add_argument("--out", default="agent", help="result name (bench/results/<out>.json)")
    parser.add_argument("--surfaces-json", help=argparse.SUPPRESS)  # internal: run `surfaces` alone, write here
    args = parser.parse_args()
    if args.surfaces_json:
        spec = planted_set()
        questions = spec.questions()
        home = build_home(spec.corpus())
        with PersonaServer("obedient", {q.question: gold_of(q) for q in questions}) as server:
            Path(args.surfaces_json).write_text(json.dumps(surfaces(home, server, questions)))
        return

    from citewise.index.retriever import Retriever

    OUT.mkdir(parents=True, exist_ok=True)
    counter = token_counter()
    results: dict = {"sets": {}, "personas": args.persona}
    all_rows: list[dict] = []
    started = time.perf_counter()
    for name in args.set:
        spec = planted_set() if name == "planted" else SETS[name]
        questions = spec.questions()
        if args.limit:
            questions = questions[: args.limit]
        home = build_home(spec.corpus())
        book = {q.question: gold_of(q) for q in questions}
        personas = ["obedient"] if name == "planted" else [p for p in args.persona if p != "obedient"]
        if name == "planted" and "obedient" not in args.persona:
            continue
        with PersonaServer(personas[0], book, count_tokens=counter) as server:
            settings = agent_settings(home, server.url)
            kb = KnowledgeBase(settings)
            cw = Citewise(settings, kb=kb)
            retriever = Retriever(kb)
            rows = []
            for persona in personas:
                server.switch(persona)
                t = time.perf_counter()
                for q in questions:
                    rows.append(ask_one(cw, server, spec, q, persona, retriever))
                print(f"{name} {persona}: {len(questions)} questions in {time.perf_counter() - t:.0f}s", flush=True)
            summary = {"role": spec.role, "distribution": spec.distribution, **summarise(rows)}
            if name != "planted" and "diligent" in personas:
                summary["quote_mode"] = quote_baseline(cw, spec, questions)
            if name == "planted" and not args.no_surfaces:
                summary["surfaces"] = surfaces_in_subprocess(args.out)
                library = {r["id"]: r for r in rows}
                summary["cli"] = cli_sample(home, server, questions[:3], library)
            if name == "fixtures" and not args.no_surfaces and "diligent" in personas:
                server.switch("diligent")
                library = {r["id"]: r for r in rows if r["persona"] == "diligent"}
                summary["cli"] = cli_sample(home, server, questions[:5], library)
        results["sets"][name] = summary
        all_rows += rows
        print(json.dumps({k: v for k, v in summary.items() if k != "surfaces"}, indent=1)[:3000], flush=True)
    results["seconds"] = round(time.perf_counter() - started)
    with (OUT / f"{args.out}_rows.jsonl").open("w") as f:
        for r in all_rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    path = write_result(args.out, results)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
