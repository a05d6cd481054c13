"""Answer evaluation: index a QA data set's passages, ask every question through the agent, score the answers.

`evaluate_answers` is what `citewise eval answers` runs. The passages are ingested through the normal pipeline
(as in-memory plain-text documents, like `eval retrieval` does), with any docs folders given as `corpus_paths`,
into a home of their own — a temporary one, or,
with `cache_dir`, one keyed by the corpus and the ingest settings, so a rerun on the same corpus skips the ingest
(the pipeline finds every passage unchanged). Questions go through `citewise.agent.runner.Citewise`, exactly as a
user's would, and `citewise.eval.metrics.score_answers` turns the answers into figures.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from citewise.errors import ConfigError
from citewise.errors import ValidationError as CitewiseValidationError
from citewise.eval.formats import AnswerDataset, EvalQuestion, Passage
from citewise.eval.metrics import Judged, best_token_f1, contains_answer, judge, score_answers, score_docs
from citewise.settings import QUOTE_ANSWERER, Settings
from citewise.types import AnswerMode, ParsedDocument, make_chunk_id, make_doc_id

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from citewise.index.embeddings import Embedder

Progress = Callable[[str, int, int], None]  # (stage, done, total), as the ingest pipeline reports

QUOTE_MODES = ("quote", QUOTE_ANSWERER)


def sample_questions(questions: Sequence[EvalQuestion], limit: int | None, seed: int) -> list[EvalQuestion]:
    """`limit` questions drawn with `random.Random(seed)` (the same seed picks the same questions on every machine),
    kept in the data set's order; all of them when `limit` is None or not smaller than the set."""
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    if limit is None or limit >= len(questions):
        return list(questions)
    picked = sorted(random.Random(seed).sample(range(len(questions)), limit))
    return [questions[i] for i in picked]


def answerer(settings: Settings, mode: str) -> tuple[Settings, AnswerMode]:
    """Settings and the `Citewise.ask(mode=...)` value for an `--mode`: quote (alias extractive), local, or
    provider:model."""
    mode = mode.strip()
    if mode in QUOTE_MODES:
        return settings.model_copy(update={"llm": QUOTE_ANSWERER}), AnswerMode.QUOTE
    try:
        checked = Settings.model_validate({**settings.model_dump(), "llm": mode})
    except Exception:
        raise ConfigError(f'Unknown --mode {mode!r}: use quote, local or "provider:model"') from None
    return settings.model_copy(update={"llm": checked.llm}), AnswerMode.AGENT


def _document(passage: Passage) -> ParsedDocument:
    # Same treatment as a BEIR document: plain text, the passage id as source, the data set's title if any (the
    # plain-text loader would otherwise invent one from the first line).
    from citewise.ingest.loaders import parse_plain_text

    doc = parse_plain_text(passage.text, source=f"passage:{passage.id}", filename=f"{passage.id}.txt")
    return doc.model_copy(update={"title": passage.title}) if passage.title else doc


def _eval_settings(settings: Settings, home: Path) -> Settings:
    # Evaluation questions are not user questions: keep them out of the docs-gap log.
    server = settings.server.model_copy(update={"log_questions": False})
    return settings.model_copy(update={"home": home, "server": server})


def evaluate_answers(
    dataset: AnswerDataset,
    settings: Settings,
    *,
    mode: str = "quote",
    limit: int | None = None,
    seed: int = 0,
    corpus_paths: Sequence[Path] = (),
    cache_dir: Path | None = None,
    details_path: Path | None = None,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
    chat_model: BaseChatModel | None = None,
) -> dict:
    """Ingest `dataset.passages` (and the `corpus_paths` docs folders), ask the (sampled) questions with the chosen
    answerer and return the figures of `score_answers`, `score_docs` ("docs": right / wrong / refused, see
    `metrics.judge`) and the failures (wrong answers, refused answerable and answered unanswerable questions), plus
    what was run:

        {"dataset", "format", "mode", "seed", "limit", "corpus", "chunks", "ingest_s", "ingest_unchanged",
         "questions", "answerable", "unanswerable", "refused", "refusal": {precision, recall, f1, tp, fp, fn, tn},
         "answer_recall", "token_f1", "answer_recall_answered", "token_f1_answered", "citation_validity",
         "citations", "citation_support", "context_citation", "exit_reasons", "statuses", "skipped",
         "latency_p50_ms", "latency_p95_ms"}

    `details_path` gets one JSON line per question (its answer, status, citations and scores) for inspection.
    `embedder` and `chat_model` let a caller share a loaded model or inject one (tests).
    """
    from citewise.agent.runner import Citewise
    from citewise.index.knowledge_base import KnowledgeBase
    from citewise.ingest.pipeline import Ingestor

    report_progress = progress or (lambda stage, done, total: None)
    answer_settings, ask_mode = answerer(settings, mode)
    questions = sample_questions(dataset.questions, limit, seed)

    with ExitStack() as stack:
        if not dataset.passages and not corpus_paths:
            raise ConfigError(f"{dataset.name} has no passages: give a docs folder to index with --corpus")
        if cache_dir is None:
            home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="citewise-eval-answers-")))
        else:
            folders = json.dumps(sorted(str(Path(p).resolve()) for p in corpus_paths))
            key = hashlib.sha256(f"{dataset.corpus_hash}{folders}".encode()).hexdigest()[:16]
            home = Path(cache_dir) / f"{key}-{settings.ingest_fingerprint()}"
        run_settings = _eval_settings(answer_settings, home)
        kb = KnowledgeBase(run_settings, embedder=embedder)
        ingestor = Ingestor(kb, progress=report_progress)
        started = time.perf_counter()
        reports = []
        if dataset.passages:
            reports.append(ingestor.ingest_documents(_document(p) for p in dataset.passages))
        if corpus_paths:
            reports.append(ingestor.ingest_paths(list(corpus_paths), prune=True))
        ingest_s = time.perf_counter() - started
        failures = [f for r in reports for f in r.failures]
        if failures:
            raise ConfigError(
                f"{len(failures)} document(s) could not be indexed, e.g. {failures[0].source}: {failures[0].error}"
            )

        chunk_counts = {r.doc_id: r.chunk_count for r in kb.registry.list()}

        def chunk_ids(passage_ids: Sequence[str]) -> frozenset[str]:
            ids = set()
            for passage_id in passage_ids:
                doc_id = make_doc_id(f"passage:{passage_id}")
                ids.update(make_chunk_id(doc_id, i) for i in range(chunk_counts.get(doc_id, 0)))
            return frozenset(ids)

        citewise = Citewise(run_settings, kb=kb, chat_model=chat_model)
        judged: list[Judged] = []
        details: list[dict] = []
        outcomes: list[tuple[bool, str]] = []
        failures: list[dict] = []
        skipped = 0
        for done, question in enumerate(questions, 1):
            report_progress("answer", done - 1, len(questions))
            asked = time.perf_counter()
            try:
                answer = citewise.ask(question.question, mode=ask_mode, trace=False)
            except CitewiseValidationError as exc:  # e.g. a question over agent.max_question_chars
                skipped += 1
                details.append({"id": question.id, "question": question.question, "skipped": str(exc)})
                continue
            item = Judged(
                answer=answer,
                golds=question.answers,
                answerable=question.answerable,
                latency_ms=(time.perf_counter() - asked) * 1000,
                context_chunk_ids=chunk_ids(question.passage_ids),
            )
            judged.append(item)
            outcome = judge(
                answer,
                answerable=question.answerable,
                expect_any=question.expect_any,
                expect_all=question.expect_all,
                golds=question.answers,
            )
            outcomes.append((question.answerable, outcome))
            if outcome in ("wrong", "answered") or (question.answerable and outcome == "refused"):
                failures.append(_failure(question, answer, outcome))
            if details_path is not None:
                details.append({**_detail(question, item), "outcome": outcome})
        report_progress("answer", len(questions), len(questions))

    if details_path is not None:
        Path(details_path).write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in details))
    return {
        "dataset": dataset.name,
        "format": dataset.format,
        "mode": "quote" if ask_mode == AnswerMode.QUOTE else answer_settings.llm,
        "seed": seed,
        "limit": limit,
        "corpus": len(chunk_counts),  # documents in the index: passages plus --corpus files
        "chunks": sum(chunk_counts.values()),
        "ingest_s": round(ingest_s, 2),
        "ingest_unchanged": sum(r.unchanged for r in reports),
        **score_answers(judged),
        "skipped": skipped,
        "docs": score_docs(outcomes),
        "failures": failures,
    }


def _failure(question: EvalQuestion, answer, outcome: str) -> dict:
    """What a reader needs to see why a question failed: the answer's start, or why it refused."""
    said = answer.refusal_detail or answer.answer if outcome == "refused" else answer.answer
    expected = [list(g) for g in question.expect_all] or list(question.expect_any) or list(question.answers)
    return {
        "id": question.id,
        "question": question.question,
        "outcome": outcome,
        "expected": expected,
        "said": " ".join((said or "").split())[:300],
    }


def _detail(question: EvalQuestion, item: Judged) -> dict:
    answer = item.answer
    return {
        "id": question.id,
        "question": question.question,
        "answerable": question.answerable,
        "golds": list(question.answers),
        "status": str(answer.status),
        "exit_reason": str(answer.exit_reason),
        "answer": answer.answer,
        "refusal_reason": answer.refusal_reason,
        "citations": [{"n": c.n, "chunk_id": c.chunk_id, "filename": c.filename} for c in answer.citations],
        "answer_contains_gold": contains_answer(answer.answer, question.answers),
        "token_f1": round(best_token_f1(answer.answer, question.answers), 4),
        "cites_own_passage": any(c.chunk_id in item.context_chunk_ids for c in answer.citations),
        "latency_ms": round(item.latency_ms, 1),
    }
