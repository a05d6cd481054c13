"""Follow-ups in a conversation, in quote mode: asked after their first question, beside the same question made whole.

    .venv/bin/python bench/bench_followups.py [--set NAME ...]

Each pair of bench/questions/followups_<set>.jsonl is a first question, an elliptic follow-up ("How do I change
it?"), the follow-up as a self-contained question (its standalone form, written by hand) and the strings a right
answer holds. Each pair is asked four ways, in quote mode, on the set's home (bench/quote_data.py builds and reuses
them):

- **follow-up in a session**: the first question, then the follow-up, in one session (a checkpointer, as `/chat`,
  the web page and `citewise chat` keep one), so the follow-up is read with the question before it
  (`citewise.agent.followup`);
- **follow-up alone**: the follow-up with no conversation, which is how quote mode answered it in a session before
  follow-ups were read with the conversation (quote mode searched and answered the message alone);
- **standalone alone**: the hand-written standalone form, with no conversation: what a reader who spells the question
  out gets;
- **standalone in a session**: the standalone form after the first question: a self-contained question must pass
  unchanged (`kept`), and be answered as well as alone.

Sets: citewise (Citewise's own guide as bench/quote_data.py pins it) and starlette (Starlette's docs) are fitted
on — the follow-up rules were written and adjusted while reading their results; pip (Debian's copy of pip's docs) was
written from the pages alone and is only judged (BENCHMARKS.md says what was seen of it). Writes
bench/results/followups.json.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections import Counter
from pathlib import Path

import quote_data
from _common import RESULTS, write_result
from citewise.agent.runner import Citewise
from citewise.index.knowledge_base import KnowledgeBase

QUESTIONS = quote_data.QUESTIONS
SETS = {
    # name: (role, the quote_data set whose corpus it is asked of, that corpus's pages, description)
    "citewise": (
        "fit",
        "citewise_docs",
        quote_data.citewise_docs_pages,
        f"Citewise's own guide (docs/ as of {quote_data.CITEWISE_DOCS_COMMIT})",
    ),
    "starlette": (
        "fit",
        "starlette_docs",
        quote_data.starlette_pages,
        f"Starlette's docs ({quote_data.STARLETTE_SDIST.removesuffix('.tar.gz')})",
    ),
    "pip": (
        "judge",
        "pip_docs",
        quote_data.pip_pages,
        "pip's docs (Debian's python3-pip copy); written from the pages alone, never tuned on",
    ),
}
WAYS = ("followup_in_session", "followup_alone", "standalone_alone", "standalone_in_session")


def pairs(name: str) -> list[dict]:
    """The set's pairs, once every expected string still occurs in one of the pages it names."""
    _, _, pages, _ = SETS[name]
    texts = pages()
    rows = [json.loads(line) for line in (QUESTIONS / f"followups_{name}.jsonl").read_text().splitlines() if line]
    for row in rows:
        held = quote_data._norm("\n".join(texts.get(s, "") for s in row["source"]))
        if not any(quote_data._norm(e) in held for e in row["expect_any"]):
            raise SystemExit(f"{row['id']}: none of {row['expect_any']} occurs in {row['source']}")
    return rows


def _verdict(row: dict, answer) -> str:
    question = quote_data.Question(id=row["id"], question="", answerable=True, expect_any=row["expect_any"])
    return quote_data.judge(question, str(answer.status), answer.answer, [])


def _read_as(answer) -> dict | None:
    step = next((e for e in answer.trace if e.type == "standalone"), None)
    return dict(step.data) if step else None


def run_set(name: str) -> dict:
    from langgraph.checkpoint.memory import InMemorySaver

    role, corpus_set, _, description = SETS[name]
    rows = pairs(name)
    home = quote_data.build_home(quote_data.SETS[corpus_set].corpus())
    settings = quote_data.settings_for(home)
    cw = Citewise(settings, kb=KnowledgeBase(settings), checkpointer=InMemorySaver())

    def in_session(first: str, then: str):
        session = f"bench-{uuid.uuid4().hex[:12]}"
        cw.ask(first, mode="quote", session_id=session)
        return cw.ask(then, mode="quote", session_id=session)

    out = []
    started = time.perf_counter()
    for row in rows:
        asked = {
            "followup_in_session": in_session(row["first"], row["followup"]),
            "followup_alone": cw.ask(row["followup"], mode="quote"),
            "standalone_alone": cw.ask(row["standalone"], mode="quote"),
            "standalone_in_session": in_session(row["first"], row["standalone"]),
        }
        read_as = _read_as(asked["followup_in_session"])
        out.append(
            {
                "id": row["id"],
                "kind": row.get("kind", ""),
                "first": row["first"],
                "followup": row["followup"],
                "standalone": row["standalone"],
                "read_as": read_as["question"] if read_as else None,
                "reason": read_as["reason"] if read_as else None,
                "standalone_kept": _read_as(asked["standalone_in_session"]) is None,
                **{way: _verdict(row, answer) for way, answer in asked.items()},
                "answer": asked["followup_in_session"].answer,
            }
        )
    n = len(out)

    def rate(way: str) -> float:
        return round(100 * sum(r[way] == "right" for r in out) / n, 1)

    summary = {
        "role": role,
        "corpus": corpus_set,
        "description": description,
        "pairs": n,
        "right": {way: rate(way) for way in WAYS},
        "refused": {way: round(100 * sum(r[way] == "refused" for r in out) / n, 1) for way in WAYS},
        "read_as_followup": round(100 * sum(r["read_as"] is not None for r in out) / n, 1),
        "standalone_kept": round(100 * sum(r["standalone_kept"] for r in out) / n, 1),
        "reasons": dict(Counter(r["reason"] or "not read as one" for r in out)),
        "seconds": round(time.perf_counter() - started, 1),
        "rows": out,
    }
    print(
        f"{name} ({role}, {n} pairs): right — follow-up in session {summary['right']['followup_in_session']}%, "
        f"alone {summary['right']['followup_alone']}%, standalone {summary['right']['standalone_alone']}% "
        f"(in session {summary['right']['standalone_in_session']}%); read as a follow-up "
        f"{summary['read_as_followup']}%, standalone kept {summary['standalone_kept']}%"
    )
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", nargs="+", choices=sorted(SETS), default=list(SETS))
    args = parser.parse_args()
    earlier = RESULTS / "followups.json"
    sets = json.loads(earlier.read_text())["sets"] if earlier.is_file() else {}  # the sets not asked this time
    sets.update({name: run_set(name) for name in args.set})
    path = Path(write_result("followups", {"sets": {name: sets[name] for name in SETS if name in sets}}))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
