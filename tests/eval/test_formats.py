"""The three QA input formats, parsed from small fixtures written for these tests, and their error messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from citewise.errors import ConfigError
from citewise.eval.answers import answerer, sample_questions
from citewise.eval.formats import load_jsonl, load_rgb, load_squad2
from citewise.settings import Settings

FIXTURES = Path(__file__).parent.parent / "fixtures" / "eval"


def test_squad2_every_paragraph_is_a_passage():
    data = load_squad2(FIXTURES / "squad2_tiny.json")
    assert data.format == "squad2"
    assert [p.id for p in data.passages] == ["0000-000", "0000-001", "0001-000"]
    assert [p.title for p in data.passages] == ["Lighthouses", "Lighthouses", "Tides"]
    assert data.passages[1].text == "Its light was first lit on 1 February 1811."
    by_id = {q.id: q for q in data.questions}
    assert list(by_id) == ["lh1", "lh2", "lh3", "td1", "td2"]
    assert by_id["lh1"].answers == ("Robert Stevenson",)  # duplicate gold spans collapse
    assert by_id["lh1"].answerable and by_id["lh1"].passage_ids == ("0000-000",)
    # is_impossible → unanswerable, and plausible_answers are not gold answers
    assert not by_id["lh2"].answerable and by_id["lh2"].answers == ()
    assert not by_id["td2"].answerable
    assert by_id["td1"].answers == ("the gravitational pull of the Moon",)


def test_jsonl_contexts_are_deduplicated_and_empty_answers_unanswerable():
    data = load_jsonl(FIXTURES / "small.jsonl")
    assert data.format == "jsonl"
    assert len(data.questions) == 6
    # 5 contexts, but "backup" and "retention" share theirs; "volcano" has none → 4 passages.
    assert len(data.passages) == 4
    by_id = {q.id: q for q in data.questions}
    assert by_id["backup"].passage_ids == by_id["retention"].passage_ids
    assert by_id["retention"].answers == ("fourteen days", "14 days")
    assert not by_id["volcano"].answerable and by_id["volcano"].passage_ids == ()
    assert not by_id["sourdough"].answerable and len(by_id["sourdough"].passage_ids) == 1
    assert {p.title for p in data.passages} == {"Lumen server", "Lumen backups", "Lumen plugins", ""}


def test_rgb_corpus_is_positives_and_negatives():
    data = load_rgb(FIXTURES / "rgb_tiny.jsonl")
    assert data.format == "rgb"
    # 3 positives + 3 distinct negatives ("first held in 1998" appears twice)
    assert len(data.passages) == 6
    first, second = data.questions
    assert first.question == "Who won the 2031 Lumen Cup?"
    assert first.answers == ("Harbor City", "Harbor City FC") and first.answerable
    assert second.answers == ("16", "sixteen")  # RGB's nested answer lists flatten
    assert len(first.passage_ids) == 2


def test_rgb_rejection_indexes_only_negatives_and_expects_refusals():
    data = load_rgb(FIXTURES / "rgb_tiny.jsonl", rejection=True)
    assert data.format == "rgb-rejection"
    texts = {p.text for p in data.passages}
    assert texts == {
        "The Lumen Cup was first held in 1998.",
        "Tickets for the Lumen Cup went on sale in March.",
        "The 2031 final drew a record crowd.",
    }
    assert all(not q.answerable and q.answers == () for q in data.questions)
    assert data.corpus_hash != load_rgb(FIXTURES / "rgb_tiny.jsonl").corpus_hash


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"question": "q?", "answers": ["a"], "context": "c"}\nnot json\n', "line 2: not valid JSON"),
        ('{"question": "q?", "context": "c"}\n', 'line 1: missing "answers"'),
        ('{"question": "", "answers": [], "context": "c"}\n', 'line 1: expected a non-empty string "question"'),
        ('{"question": "q?", "answers": [1.5, {"x": 1}], "context": "c"}\n', '"answers" must be a string'),
        ('{"question": "q?", "answers": ["a"]}\n', "holds no passages"),
        ("\n", "holds no questions"),
    ],
)
def test_jsonl_errors_name_the_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_jsonl(path)


def test_squad2_and_rgb_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_squad2(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "v2.0"}')
    with pytest.raises(ConfigError, match='"data" list'):
        load_squad2(bad)
    rgb = tmp_path / "rgb.jsonl"
    rgb.write_text('{"query": "q?", "answer": [], "positive": ["p"], "negative": []}\n')
    with pytest.raises(ConfigError, match="use --rejection"):
        load_rgb(rgb)


def test_sampling_is_deterministic_and_keeps_order():
    questions = load_jsonl(FIXTURES / "small.jsonl").questions
    first = sample_questions(questions, 3, seed=7)
    assert first == sample_questions(questions, 3, seed=7)
    assert len(first) == 3
    assert [questions.index(q) for q in first] == sorted(questions.index(q) for q in first)
    assert sample_questions(questions, None, seed=0) == questions
    assert sample_questions(questions, 100, seed=0) == questions
    with pytest.raises(ConfigError, match="at least 1"):
        sample_questions(questions, 0, seed=0)


def test_answerer_modes(tmp_path):
    settings = Settings(home=tmp_path)
    assert answerer(settings, "quote") == (settings.model_copy(update={"llm": "extractive"}), "quote")
    assert answerer(settings, "extractive")[1] == "quote"
    local, mode = answerer(settings, "local")
    assert (local.llm, mode) == ("local", "agent")
    vendor, mode = answerer(settings, "openai:gpt-4o-mini")
    assert (vendor.llm, mode) == ("openai:gpt-4o-mini", "agent")
    with pytest.raises(ConfigError, match="Unknown --mode"):
        answerer(settings, "gpt4")


def test_docs_questions_load_with_their_expectations(tmp_path):
    from citewise.eval.formats import load_questions

    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"question": "How do I change the port?", "answerable": true, "expect_any": ["--port"]}\n'
        '{"question": "What and how?", "answerable": true, "expect_all": [["a"], ["b", "c"]]}\n'
        '{"question": "Who founded it?", "answerable": false}\n'
        '{"question": "What is quote mode?", "answer": "Verbatim sentences."}\n'
    )
    dataset = load_questions(path)
    assert dataset.format == "questions" and not dataset.passages
    first, second, third, fourth = dataset.questions
    assert first.expect_any == ("--port",) and first.answerable
    assert second.expect_all == (("a",), ("b", "c"))
    assert not third.answerable
    assert fourth.answerable and fourth.answers == ("Verbatim sentences.",)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"question": "x"}', 'give "answerable"'),
        ('{"question": "x", "answerable": "yes"}', "true or false"),
        ('{"question": "x", "answerable": false, "expect_any": ["y"]}', "no expected answer"),
        ('{"question": "x", "answerable": true, "expect_all": ["y"]}', "list of lists"),
    ],
)
def test_docs_questions_errors_name_the_line(tmp_path, line, message):
    from citewise.eval.formats import load_questions

    path = tmp_path / "q.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ConfigError, match="line 1") as info:
        load_questions(path)
    assert message in str(info.value)
