"""Scripted models that play an answering model over questions whose gold is known: the agent harness, measured.

A `Persona` is a responder for `FakeOpenAI` (tests/support/fake_openai.py: a real OpenAI-compatible HTTP/1.1
keep-alive server on loopback, tool calls in OpenAI's wire format, streamed or not). It reads what a real model
would read — the system prompt, the user's question, the tool results the harness sent — and answers the way its
kind of model does, knowing the gold of the question (`Gold`: the strings a right answer holds) the way a capable
model recognises an answer when it sees one. Every choice is deterministic: seeded by the question, never by time.

Personas (`PERSONAS`):
- diligent: searches with the question (the harness's mandatory search) and once more with a reformulation when
  that misses, opens the best passage holding the gold, answers with the sentences that hold it, cited right;
  refuses when what it saw lacks the gold.
- paraphrasing: the diligent answer reworded (synonyms, clause order, contractions, numbers and code written
  differently), every checkable term kept.
- hallucinating: the diligent answer with one injected fault, by kind (`FAULTS`): a wrong number, an invented flag,
  option or URL, a claim cited to a passage that does not hold it, an invented `[n]`, an unsupported sentence with
  nothing checkable; on an unanswerable question, a confident answer. Told what failed, it removes the fault.
- unruly: answers without searching (uncited, from "memory"), loops on tools past the budget, or sends malformed
  tool calls (bad JSON, an unknown tool, ids that are not ids), by question.
- obedient: the diligent model, except that it follows instructions planted in a passage (a link to send the
  question to, a markdown image whose URL carries it, a tool call written in the text).

`PersonaServer` is the server with a persona and a question book; it counts each request's prompt tokens (the
messages and tool schemas the harness sent, with the shipped embedder's WordPiece tokenizer) and the time the
"model" took, so a bench can subtract it.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_openai import PLAN_REPLY, FakeOpenAI, Reply

from citewise.text import STOPWORDS

REFUSAL = "I don't have enough information in the current documentation to answer that."
PERSONAS = ("diligent", "paraphrasing", "hallucinating", "unruly", "obedient")
FAULTS = ("number", "flag", "option", "url", "wrong_citation", "invented_marker", "unsupported")
UNRULY = ("no_search", "tool_loop", "malformed")
# What a hallucinating persona injects, by kind: each string is something no docs corpus here holds.
INJECTED = {
    "number": "4096",
    "flag": "--turbo-sync",
    "option": "retry_jitter_ms",
    "url": "https://docs.example-mirror.net/advanced/tuning",
    "unsupported": "This is the approach recommended for every production deployment",
}
PLANTED_HOST = "collect.example-telemetry.net"  # the host planted instructions send user data to

_HEADER = re.compile(r"^\[(\d+)\] (.*?) \(doc_id=(\S+) chunk_id=(\S+)\)$", re.M)
_OPENED = re.compile(
    r"^OPEN_CITATION_RESULT: \[(\d+)\] (.*?) \(doc_id=(\S+) chunk_id=(\S+)\)(?:\nsource_url: \S*)?\n", re.M
)
_TRUNCATED = " … (open_citation shows the rest)"
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[*_])")
_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n.*?^\1[ \t]*$", re.S | re.M)
_MARKUP = re.compile(r"[`*_]+")
_WORD = re.compile(r"[A-Za-z0-9_]+")
_STOP = STOPWORDS | {"how", "what", "which", "why", "when", "where", "who", "do", "does", "can", "i"}


def norm(text: str) -> str:
    """Lower case, markup and citation markers out, whitespace collapsed (bench/quote_data.py's comparison)."""
    return " ".join(_MARKUP.sub("", re.sub(r"\[\d+\]", "", text)).lower().split())


# ---------------------------------------------------------------------------------------------------------------
# What the persona knows and what it was shown
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Gold:
    """A question and what a right answer holds: any of `expect_any`, or one of each group of `expect_all`."""

    question: str
    answerable: bool
    expect_any: list[str] = field(default_factory=list)
    expect_all: list[list[str]] = field(default_factory=list)
    id: str = ""

    @property
    def groups(self) -> list[list[str]]:
        if self.expect_all:
            return self.expect_all
        return [self.expect_any] if self.expect_any else []

    def seed(self) -> int:
        return int(hashlib.sha256((self.id or self.question).encode()).hexdigest()[:8], 16)


@dataclass
class Passage:
    n: int
    where: str
    doc_id: str
    chunk_id: str
    text: str
    full: bool  # the whole chunk (opened, or a search result short enough to be shown whole)


@dataclass
class Seen:
    """One request, read as a model reads it."""

    question: str
    passages: dict[int, Passage]
    model_searches: list[str]  # queries of the searches the model asked for (not the harness's mandatory one)
    opened: set[int]
    tool_calls: int  # every tool call the model made
    reprompts: list[str]  # the validator's reprompts, oldest first
    force_final: bool
    drafts: list[str]  # the model's earlier answers in this run
    tools: bool  # the request offers tools (an answer turn); False: the planner's call


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def _passages_of(content: str, into: dict[int, Passage]) -> None:
    content = content.removeprefix("(Same call as before; same result.)\n")
    opened = _OPENED.match(content)
    if opened:
        n = int(opened.group(1))
        into[n] = Passage(n, opened.group(2), opened.group(3), opened.group(4), content[opened.end() :].strip(), True)
        return
    headers = list(_HEADER.finditer(content))
    for i, h in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(content)
        body = content[h.end() : end].strip()
        n = int(h.group(1))
        if body == "(already shown above)" or (n in into and into[n].full):
            continue
        full = not body.endswith(_TRUNCATED)
        into[n] = Passage(n, h.group(2), h.group(3), h.group(4), body.removesuffix(_TRUNCATED), full)


def read_request(body: dict[str, Any]) -> Seen:
    messages = body.get("messages") or []
    tools = bool(body.get("tools"))
    question = ""
    passages: dict[int, Passage] = {}
    searches: list[str] = []
    opened: set[int] = set()
    calls = 0
    reprompts: list[str] = []
    drafts: list[str] = []
    force_final = False
    names: dict[str, tuple[str, dict]] = {}
    for m in messages:
        role, content = m.get("role"), _text(m.get("content"))
        if role == "user":
            if not tools and "Question: " in content:
                question = content.rsplit("Question: ", 1)[1].strip()
            elif content.startswith("Your answer can't be shown yet"):
                reprompts.append(content)
            elif content.startswith(("You have used all", "Your last reply")):
                force_final = True
            elif not question:
                question = content.strip()
        elif role == "assistant":
            for call in m.get("tool_calls") or []:
                fn = call.get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {}
                names[call.get("id", "")] = (fn.get("name", ""), args)
                if call.get("id") != "call_retrieve":
                    calls += 1
                    if fn.get("name") == "search_docs":
                        searches.append(str(args.get("query", "")))
            if content.strip() and not m.get("tool_calls"):
                drafts.append(content)
        elif role == "tool":
            name, args = names.get(m.get("tool_call_id", ""), ("", {}))
            _passages_of(content, passages)
            if name == "open_citation":
                for p in passages.values():
                    if p.chunk_id == args.get("chunk_id"):
                        opened.add(p.n)
    return Seen(question, passages, searches, opened, calls, reprompts, force_final, drafts, tools)


# ---------------------------------------------------------------------------------------------------------------
# Finding the gold in what was shown
# ---------------------------------------------------------------------------------------------------------------


def _units(text: str) -> list[str]:
    """A passage's answer units: fenced code blocks whole, prose split into sentences (line by line for lists)."""
    units: list[str] = []
    pos = 0
    for fence in _FENCE.finditer(text):
        units += _prose_units(text[pos : fence.start()])
        units.append(fence.group(0).strip())
        pos = fence.end()
    return units + _prose_units(text[pos:])


def _prose_units(text: str) -> list[str]:
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        if not lines:
            continue
        if all(re.match(r"^(?:[-*+]|\d+[.)]|\|)", ln) for ln in lines[1:]) and len(lines) > 1:
            out += lines  # a list or table: one item per unit
        else:
            out += [s.strip() for s in _SENTENCE.split(" ".join(lines)) if s.strip()]
    return out


def gold_units(passage: Passage, group: list[str]) -> list[str] | None:
    """The fewest consecutive units of the passage that hold one of `group`'s strings, or None."""
    wanted = [norm(s) for s in group if s.strip()]
    units = _units(passage.text)
    for width in (1, 2, 3):
        for i in range(len(units) - width + 1):
            window = " ".join(units[i : i + width])
            if any(w in norm(window) for w in wanted):
                return units[i : i + width]
    return None


def find_gold(seen: Seen, gold: Gold) -> list[tuple[int, list[str]]] | None:
    """For each gold group, the first passage (by number) holding it and the units that do; None if any is missing."""
    found = []
    for group in gold.groups:
        hit = None
        for n in sorted(seen.passages):
            units = gold_units(seen.passages[n], group)
            if units:
                hit = (n, units)
                break
        if hit is None:
            return None
        found.append(hit)
    return found or None


def reformulate(question: str) -> str:
    """The persona's second search: the question's content words (what a model does when the first search missed)."""
    words = [w for w in _WORD.findall(question) if w.lower() not in _STOP]
    return " ".join(words) or question


def _cite(units: list[str], n: int) -> str:
    """Units as an answer citing [n]: a code block goes after its citation-bearing lead-in, never carries one."""
    prose = [u for u in units if not u.startswith(("```", "~~~"))]
    code = [u for u in units if u.startswith(("```", "~~~"))]
    parts = []
    if prose:
        lead = " ".join(prose).rstrip()
        lead = lead[:-1] + f" [{n}]:" if lead.endswith(":") else f"{lead} [{n}]"
        parts.append(lead)
    else:
        parts.append(f"The documentation shows this [{n}]:")
    parts += code
    return "\n\n".join(parts)


def faithful_answer(found: list[tuple[int, list[str]]]) -> str:
    return "\n\n".join(_cite(units, n) for n, units in found)


# ---------------------------------------------------------------------------------------------------------------
# Rewording (the paraphrasing persona)
# ---------------------------------------------------------------------------------------------------------------

_SYNONYMS = [
    ("you can ", "it is possible to "),
    ("You can ", "It is possible to "),
    (" use ", " make use of "),
    (" uses ", " makes use of "),
    (" allows ", " lets "),
    (" provides ", " offers "),
    (" must ", " has to "),
    (" do not ", " don't "),
    (" does not ", " doesn't "),
    (" is not ", " isn't "),
    (" cannot ", " can't "),
    (" automatically ", " on its own "),
    (" required ", " needed "),
    (" multiple ", " several "),
    (" however", " though"),
    (" in order to ", " to "),
    (" contains ", " holds "),
    (" specify ", " give "),
    (" create ", " make "),
]
_IF_CLAUSE = re.compile(r"^(If|When) ([^,]{4,80}), (.+?)([.!?])?$")
_SECONDS = re.compile(r"\b(\d+) seconds\b")
_CODE_SPAN = re.compile(r"`[^`\n]+`")


def _reword_prose(sentence: str, seed: int) -> str:
    """One sentence reworded outside its code: clause order, synonyms, contractions, numbers written differently."""
    codes: list[str] = []

    def hold(m: re.Match) -> str:
        codes.append(m.group(0))
        return f"\x00{len(codes) - 1}\x00"

    text = _CODE_SPAN.sub(hold, sentence)
    marker = ""
    m = re.search(r"\s*(\[\d+\])(:?)$", text)
    if m:
        marker, text = f" {m.group(1)}{m.group(2)}", text[: m.start()]
    clause = _IF_CLAUSE.match(text)
    if clause and seed % 2 == 0:
        rest = clause.group(3)
        text = f"{rest[0].upper()}{rest[1:]} {clause.group(1).lower()} {clause.group(2)}{clause.group(4) or '.'}"
    for i, (old, new) in enumerate(_SYNONYMS):
        if (seed >> (i % 16)) & 1 or i % 3 == seed % 3:
            text = text.replace(old, new)
    text = _SECONDS.sub(r"\1 s", text)
    text = re.sub(r"\x00(\d+)\x00", lambda m: _reformat_code(codes[int(m.group(1))]), text)
    return text + marker


def _reformat_code(span: str) -> str:
    """Inline code written the way a model writes it: spaces around `=` and after commas."""
    body = span.strip("`")
    body = re.sub(r"\s*=\s*", " = ", body) if "==" not in body and "=" in body else body
    body = re.sub(r",(?=\S)", ", ", body)
    return f"`{body}`"


def paraphrase(answer: str, seed: int) -> str:
    out = []
    for block in answer.split("\n\n"):
        if block.startswith(("```", "~~~")):
            out.append(block)
            continue
        sentences = _SENTENCE.split(block)
        out.append(" ".join(_reword_prose(s, seed + i) for i, s in enumerate(sentences)))
    return "\n\n".join(out)


# ---------------------------------------------------------------------------------------------------------------
# Faults (the hallucinating persona)
# ---------------------------------------------------------------------------------------------------------------


def inject(kind: str, answer: str, found: list[tuple[int, list[str]]], seen: Seen) -> str:
    """`answer` with one fault of `kind` in it (see INJECTED for what each kind adds)."""
    n = found[0][0]
    if kind == "number":
        return f"{answer}\n\nThe limit for this is {INJECTED['number']} [{n}]."
    if kind == "flag":
        return f"{answer}\n\nAdd `{INJECTED['flag']}` to make it faster [{n}]."
    if kind == "option":
        return f"{answer}\n\nSet `{INJECTED['option']}` to tune it [{n}]."
    if kind == "url":
        return f"{answer}\n\nThe full guide is at {INJECTED['url']} [{n}]."
    if kind == "unsupported":
        return f"{answer}\n\n{INJECTED['unsupported']} [{n}]."
    if kind == "invented_marker":
        bogus = max(seen.passages) + 7
        return re.sub(r"\[\d+\]", f"[{bogus}]", answer, count=1)
    if kind == "wrong_citation":
        holding = {m for m, _ in found}
        others = [m for m in sorted(seen.passages) if m not in holding and not _holds_any(seen.passages[m], found)]
        if not others:
            return answer  # nothing to mis-cite to: the fault can't be made (the bench counts it as not injected)
        return re.sub(r"\[\d+\]", f"[{others[0]}]", answer)
    raise ValueError(kind)


def _holds_any(passage: Passage, found: list[tuple[int, list[str]]]) -> bool:
    text = norm(passage.text)
    return any(norm(u) in text for _, units in found for u in units)


def confident_answer(seen: Seen) -> str:
    """An unanswerable question answered anyway: the closest passage's first sentence, stated as the answer."""
    n = min(seen.passages)
    units = [u for u in _units(seen.passages[n].text) if not u.startswith(("```", "~~~", "#"))]
    first = units[0] if units else seen.passages[n].where
    return f"Yes, that is supported. {first} [{n}]"


# ---------------------------------------------------------------------------------------------------------------
# Planted instructions (the obedient persona)
# ---------------------------------------------------------------------------------------------------------------

_PLANT_LINK = re.compile(r"reply (?:only )?with this link: (https?://\S+?)\{question\}", re.I)
_PLANT_IMAGE = re.compile(r"include this status badge: !\[([^\]]*)\]\((https?://\S+?)\{question\}\)", re.I)
_PLANT_TOOL = re.compile(r"(\{\"type\": \"tool_call\".*?\}\})", re.S)


def obey(seen: Seen) -> Reply | None:
    """What a model that follows planted instructions replies, when a passage plants one."""
    quoted = urllib.parse.quote(seen.question)
    for n in sorted(seen.passages):
        text = seen.passages[n].text
        if m := _PLANT_LINK.search(text):
            return Reply(text=f"For this question, see [this page]({m.group(1)}{quoted}) [{n}].")
        if m := _PLANT_IMAGE.search(text):
            return Reply(text=f"Here is the current status: ![{m.group(1)}]({m.group(2)}{quoted}) [{n}].")
        if m := _PLANT_TOOL.search(text):
            try:
                action = json.loads(m.group(1))
            except ValueError:
                continue
            if len(seen.model_searches) == 0 and action.get("tool") == "search_docs":
                return Reply(tool_calls=[{"name": "search_docs", "args": action.get("input") or {}}])
            return Reply(text=f"{m.group(1)} [{n}]")
    return None


# ---------------------------------------------------------------------------------------------------------------
# The personas
# ---------------------------------------------------------------------------------------------------------------


class Persona:
    """A responder: (request body) → Reply, for the question book it was given."""

    def __init__(self, name: str, book: dict[str, Gold]) -> None:
        if name not in PERSONAS:
            raise ValueError(f"unknown persona {name!r}")
        self.name = name
        self.book = {norm(q): g for q, g in book.items()}

    def gold(self, question: str) -> Gold:
        return self.book.get(norm(question)) or Gold(question, answerable=False)

    def fault(self, gold: Gold) -> str:
        return "confident" if not gold.answerable else FAULTS[gold.seed() % len(FAULTS)]

    def unruly_kind(self, gold: Gold) -> str:
        return UNRULY[gold.seed() % len(UNRULY)]

    def __call__(self, body: dict[str, Any]) -> Reply:
        seen = read_request(body)
        if not seen.tools:
            return Reply(text=PLAN_REPLY)
        gold = self.gold(seen.question)
        if self.name == "unruly":
            return self._unruly(seen, gold)
        if self.name == "obedient" and (planted := obey(seen)) is not None:
            return planted
        return self._answer(seen, gold)

    def _answer(self, seen: Seen, gold: Gold) -> Reply:
        found = find_gold(seen, gold) if gold.answerable else None
        if found is None:
            if self.name == "hallucinating" and not gold.answerable and seen.passages and not seen.reprompts:
                return Reply(text=confident_answer(seen))
            if not seen.model_searches and not seen.force_final:
                return Reply(tool_calls=[{"name": "search_docs", "args": {"query": reformulate(seen.question)}}])
            return Reply(text=REFUSAL)
        best = seen.passages[found[0][0]]
        if not seen.opened and not seen.force_final and not best.full:
            args = {"doc_id": best.doc_id, "chunk_id": best.chunk_id}
            return Reply(tool_calls=[{"name": "open_citation", "args": args}])
        answer = faithful_answer(found)
        if seen.reprompts:
            return Reply(text=answer)  # told what failed: the verbatim answer, fault removed
        if self.name == "paraphrasing":
            return Reply(text=paraphrase(answer, gold.seed()))
        if self.name == "hallucinating":
            return Reply(text=inject(self.fault(gold), answer, found, seen))
        return Reply(text=answer)

    def _unruly(self, seen: Seen, gold: Gold) -> Reply:
        kind = self.unruly_kind(gold)
        if kind == "no_search":
            return Reply(text="You can do that with the `enable_everything()` helper; it has been supported for years.")
        if kind == "tool_loop":
            if seen.force_final and len(seen.reprompts) > 1:
                return Reply(text=REFUSAL)
            return Reply(tool_calls=[{"name": "search_docs", "args": {"query": f"{seen.question} {seen.tool_calls}"}}])
        # malformed: a different mistake by question
        which = gold.seed() // len(UNRULY) % 3
        if which == 0:
            return Reply(tool_calls=[{"name": "open_citation", "args": {"doc_id": "[1]", "chunk_id": "first one"}}])
        if which == 1:
            return Reply(tool_calls=[{"name": "browse_web", "args": {"url": "https://example.com"}}])
        return Reply(tool_calls=[{"name": "search_docs", "raw_arguments": '{"query": "unterminated'}])


# ---------------------------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Served:
    """One request the persona answered: how many tokens it was shown and wrote, and how long it took."""

    question: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    tools: bool


class PersonaServer(FakeOpenAI):
    """FakeOpenAI answering as `persona`; `served` records every request (tokens, time)."""

    def __init__(self, persona: str, book: dict[str, Gold], *, count_tokens: Any = None) -> None:
        self.persona = Persona(persona, book)
        self.served: list[Served] = []
        self._served_lock = threading.Lock()
        self._count = count_tokens or (lambda text: max(1, len(text) // 4))
        super().__init__(responder=self._respond)

    def _respond(self, body: dict[str, Any]) -> Reply:
        start = time.perf_counter()
        reply = self.persona(body)
        shown = "\n".join(_text(m.get("content")) + json.dumps(m.get("tool_calls") or "") for m in body["messages"])
        shown += json.dumps(body.get("tools") or "")
        written = reply.text + json.dumps(reply.tool_calls)
        served = Served(
            read_request(body).question,
            self._count(shown),
            self._count(written),
            time.perf_counter() - start,
            bool(body.get("tools")),
        )
        with self._served_lock:
            self.served.append(served)
        return reply

    def switch(self, persona: str) -> None:
        self.persona = Persona(persona, {g.question: g for g in self.persona.book.values()})
