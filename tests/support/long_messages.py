"""Long messages as people send them: a question with an error log or a traceback pasted around it, built to an exact
length so the tests can stand at the question limit (10,000 characters) and one past it. The question is about the
fixture corpus (tests/fixtures/corpus): creating a queue, which `orbitron queue create` does."""

from __future__ import annotations

QUESTION = "How do I create the queue so that enqueueing to it stops failing?"
ERROR = "enqueue failed: ORB-404 queue 'emails' does not exist"
TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/producer.py", line 42, in <module>
    client.enqueue("emails", job)
  File "/srv/app/.venv/lib/python3.12/site-packages/orbitron/client.py", line 118, in enqueue
    raise QueueError(resp.code, resp.message)
orbitron.errors.QueueError: ORB-404: queue 'emails' does not exist"""


def log_lines(count: int) -> list[str]:
    """`count` lines of a busy worker's log, an enqueue error among them now and then."""
    lines = []
    for i in range(count):
        stamp = f"2024-03-18T10:{i // 60 % 60:02d}:{i % 60:02d}Z"
        if i % 37 == 36:
            lines.append(f"{stamp} ERROR [producer] {ERROR} (attempt {i // 37})")
        else:
            lines.append(f"{stamp} INFO  [worker-{i % 7}] leased job {100000 + i} from queue default, lease=30s")
    return lines


def pasted(chars: int, *, question: str = QUESTION, where: str = "end") -> str:
    """A message of exactly `chars` characters: a log (a traceback at its end) pasted before (`end`), after
    (`start`) or around (`middle`) the question."""
    intro = "Our producer keeps failing. Here is its log:"

    def message(first: str, second: str) -> str:
        if where == "start":
            return f"{question}\n\n{intro}\n```\n{first}{second}\n{TRACEBACK}\n```"
        if where == "middle":
            return f"{intro}\n```\n{first}\n```\n{question}\n```\n{second}\n{TRACEBACK}\n```"
        return f"{intro}\n```\n{first}{second}\n{TRACEBACK}\n```\n\n{question}"

    room = chars - len(message("", ""))
    lines: list[str] = []
    for line in log_lines(room // 50 + 10):
        if sum(len(x) + 1 for x in lines) + len(line) > room:
            break
        lines.append(line)
    half = len(lines) // 2
    first, second = "\n".join(lines[:half]), "\n".join(lines[half:])
    if where != "middle":
        first += "\n"
    text = message(first, second)
    assert len(text) <= chars, (len(text), chars)
    # Spaces at the end of the log's last line make the exact length: inside the message, so trimming it (the web
    # page sends the box's text trimmed) keeps every character.
    return text.replace("\n" + TRACEBACK, " " * (chars - len(text)) + "\n" + TRACEBACK, 1)
