"""Retrieval evaluation: metrics against hand-computed values, the BEIR loader's errors, and one real run.

The fixture `beir_tiny` has six one-sentence documents on unrelated topics and three queries, each written to
share both words and meaning with exactly one document (q1 also has a partly relevant second document, grade 1).
A fourth query has no qrels and a q2 line has score 0: both must be ignored.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from citewise.errors import ConfigError
from citewise.eval.retrieval import evaluate, load_beir, mrr_at_k, ndcg_at_k, recall_at_k
from citewise.types import RetrievalMode

BEIR_TINY = Path(__file__).parent.parent / "fixtures" / "beir_tiny"

LOG2_3 = math.log2(3)  # 1.5849625…
LOG2_6 = math.log2(6)  # 2.5849625…


# -- metrics -----------------------------------------------------------------------------------------------------
def test_ndcg_with_graded_relevance():
    relevance = {"a": 3, "b": 2, "c": 1}
    ranked = ["x", "b", "a", "y", "c"]
    # DCG@10  = 0/log2(2) + 2/log2(3) + 3/log2(4) + 0/log2(5) + 1/log2(6)
    #         = 0 + 1.2618595 + 1.5 + 0 + 0.3868528 = 3.1487123
    # IDCG@10 = 3/log2(2) + 2/log2(3) + 1/log2(4) = 3 + 1.2618595 + 0.5 = 4.7618595
    # nDCG@10 = 3.1487123 / 4.7618595 = 0.6612359
    assert ndcg_at_k(ranked, relevance, 10) == pytest.approx(0.6612359, abs=1e-6)
    assert ndcg_at_k(ranked, relevance, 10) == pytest.approx((2 / LOG2_3 + 1.5 + 1 / LOG2_6) / (3 + 2 / LOG2_3 + 0.5))
    # Cut at 2: DCG@2 = 2/log2(3) = 1.2618595; IDCG@2 = 3 + 1.2618595 = 4.2618595 → 0.2960819
    assert ndcg_at_k(ranked, relevance, 2) == pytest.approx(0.2960819, abs=1e-6)


def test_ndcg_bounds():
    relevance = {"a": 2, "b": 1}
    assert ndcg_at_k(["a", "b", "x"], relevance, 10) == pytest.approx(1.0)  # the ideal order
    assert ndcg_at_k(["x", "y"], relevance, 10) == 0.0
    assert ndcg_at_k(["a"], {}, 10) == 0.0  # no relevant document: 0, not a division by zero
    # A document listed twice counts once: ["b", "b", "a"] is ["b", "a"].
    # DCG = 1/1 + 2/log2(3) = 2.2618595; IDCG = 2 + 1/log2(3) = 2.6309298 → 0.8597186
    assert ndcg_at_k(["b", "b", "a"], relevance, 10) == pytest.approx(0.8597186, abs=1e-6)


def test_mrr_first_hit_at_rank_three():
    relevance = {"a": 1, "b": 1}
    ranked = ["x", "y", "a", "b"]
    assert mrr_at_k(ranked, relevance, 10) == pytest.approx(1 / 3)  # first relevant at rank 3 → 1/3
    assert mrr_at_k(ranked, relevance, 2) == 0.0  # outside the cut-off
    assert mrr_at_k(["b", "a"], relevance, 10) == 1.0


def test_recall_with_partial_hits():
    relevance = {"a": 2, "b": 1, "c": 1, "d": 1, "z": 0}  # grade 0 is not relevant: 4 relevant documents
    ranked = ["a", "x", "c", "y", "b"]
    assert recall_at_k(ranked, relevance, 3) == pytest.approx(2 / 4)  # a, c
    assert recall_at_k(ranked, relevance, 5) == pytest.approx(3 / 4)  # a, c, b
    assert recall_at_k(ranked, relevance, 1) == pytest.approx(1 / 4)
    assert recall_at_k([], relevance, 10) == 0.0


def test_cut_off_must_be_positive():
    with pytest.raises(ValueError):
        ndcg_at_k(["a"], {"a": 1}, 0)


# -- loader ------------------------------------------------------------------------------------------------------
def test_load_beir_keeps_only_queries_with_relevant_documents():
    data = load_beir(BEIR_TINY)
    assert len(data.corpus) == 6
    assert data.corpus["d1"].title == "Photosynthesis in plants"
    assert set(data.queries) == {"q1", "q2", "q3"}  # q4 has no qrels
    assert data.qrels == {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 2}, "q3": {"d5": 2}}  # the score-0 line is gone


@pytest.fixture
def beir_copy(tmp_path: Path) -> Path:
    target = tmp_path / "beir"
    shutil.copytree(BEIR_TINY, target)
    return target


def test_missing_qrels_split_is_a_config_error(beir_copy: Path):
    with pytest.raises(ConfigError, match=r"dev\.tsv is missing.*available splits: test"):
        load_beir(beir_copy, split="dev")


def test_missing_folder_and_files_are_config_errors(beir_copy: Path, tmp_path: Path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_beir(tmp_path / "nowhere")
    (beir_copy / "queries.jsonl").unlink()
    with pytest.raises(ConfigError, match=r"queries\.jsonl is missing"):
        load_beir(beir_copy)


def test_malformed_json_line_names_file_and_line(beir_copy: Path):
    corpus = beir_copy / "corpus.jsonl"
    lines = corpus.read_text().splitlines()
    lines.insert(2, '{"_id": "d9", "title": "broken", "text": ')  # becomes line 3
    corpus.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"corpus\.jsonl, line 3: not valid JSON"):
        load_beir(beir_copy)


def test_malformed_qrels_line_names_file_and_line(beir_copy: Path):
    qrels = beir_copy / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text() + "q3\td6\thigh\n")  # line 7
    with pytest.raises(ConfigError, match=r"test\.tsv, line 7: score 'high' is not an integer"):
        load_beir(beir_copy)


# -- a real run --------------------------------------------------------------------------------------------------
def test_evaluate_end_to_end(settings, embedder):
    stages: list[tuple[str, int, int]] = []
    results = evaluate(
        settings, load_beir(BEIR_TINY), list(RetrievalMode), embedder=embedder, progress=lambda *s: stages.append(s)
    )

    assert results["queries"] == 3
    assert results["corpus"] == 6
    assert results["chunks"] == 6  # every document is far below the chunk size
    assert results["ingest_failed"] == 0
    assert results["ingest_s"] > 0
    assert 0 < results["query_p50_ms"] <= results["query_p95_ms"]
    assert set(results["modes"]) == {"hybrid", "dense", "lexical"}
    for figures in results["modes"].values():
        assert set(figures) == {"ndcg@10", "recall@10", "recall@100", "mrr@10", "query_p50_ms", "query_p95_ms"}
        assert all(0.0 <= figures[m] <= 1.0 for m in ("ndcg@10", "recall@10", "recall@100", "mrr@10"))
    # Each query shares words and meaning with exactly one document: every mode must put it first.
    for mode in ("hybrid", "dense", "lexical"):
        assert results["modes"][mode]["mrr@10"] == 1.0, mode
    assert results["modes"]["hybrid"]["recall@10"] == 1.0
    assert results["modes"]["hybrid"]["ndcg@10"] > 0.9

    assert ("query", 9, 9) in stages  # 3 queries x 3 modes, reported for the CLI's progress bar
    assert not settings.home.exists()  # the temporary home was used, not the configured one
