"""The question log: one whole JSON line per question, opt-out, never raising into the caller."""

from __future__ import annotations

import json
import logging
import threading

from citewise.agent.question_log import log_question
from citewise.settings import ServerSettings, Settings
from citewise.types import REFUSAL_TEXT, Answer, ExitReason, Status


def _refused(question: str) -> Answer:
    return Answer(
        question=question,
        answer=REFUSAL_TEXT,
        status=Status.REFUSED,
        exit_reason=ExitReason.COMPLETED,
        insufficiencies=["no page on rate limits"],
        refusal_reason="best source below the minimum score",
        mode="extractive",
    )


def test_appends_one_line_per_question(settings: Settings):
    log_question(settings, _refused("How do I rotate keys?"), ["rotate keys", "key rotation"], owner="alice")
    log_question(settings, _refused("What is the rate limit?"), ["rate limit"])
    lines = settings.questions_log_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["question"] == "How do I rotate keys?"
    assert first["status"] == "refused"
    assert first["exit_reason"] == "COMPLETED"
    assert first["insufficiencies"] == ["no page on rate limits"]
    assert first["refusal_reason"] == "best source below the minimum score"
    assert first["queries"] == ["rotate keys", "key rotation"]
    assert first["owner"] == "alice"
    assert first["timestamp"]
    assert "owner" not in json.loads(lines[1])


def test_opt_out_writes_nothing(tmp_path):
    settings = Settings(home=tmp_path / "home", server=ServerSettings(log_questions=False))
    log_question(settings, _refused("anything"), [])
    assert not settings.questions_log_path.exists()


def test_io_error_is_a_warning_not_an_exception(tmp_path, caplog):
    settings = Settings(home=tmp_path / "home")
    settings.questions_log_path.mkdir(parents=True)  # a folder where the log file should be (a file home is refused)
    with caplog.at_level(logging.WARNING, logger="citewise.agent.question_log"):
        log_question(settings, _refused("anything"), ["q"])  # must not raise
    assert "Could not log the question" in caplog.text


def test_concurrent_appends_keep_lines_whole(settings: Settings):
    long_question = "why " * 2000  # ~8 kB per line: larger than a pipe buffer, so interleaving would show

    def worker(i: int) -> None:
        for j in range(20):
            log_question(settings, _refused(f"{i}-{j} {long_question}"), [f"query {i} {j}"])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = settings.questions_log_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 120
    seen = {json.loads(line)["question"].split(" ", 1)[0] for line in lines}
    assert seen == {f"{i}-{j}" for i in range(6) for j in range(20)}
