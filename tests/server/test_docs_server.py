"""docs/server.md can't drift from the server: every curl example names a real route with the right method, and the
Python streaming example runs against a live server."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

from tests.agent.agent_support import WORKER_QUESTION

PAGE = Path(__file__).parents[2] / "docs" / "server.md"


def _fenced(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), re.S)


def _curl_commands() -> list[list[str]]:
    commands = []
    for block in _fenced("bash"):
        for command in block.replace("\\\n", " ").splitlines():
            if command.strip().startswith("curl "):
                commands.append(shlex.split(command))
    return commands


def _route(args: list[str]) -> tuple[str, str]:
    url = next(a for a in args if "localhost:8000" in a)
    path = url.split("localhost:8000", 1)[1].split("?", 1)[0]
    if "-X" in args:
        method = args[args.index("-X") + 1]
    elif "-d" in args or "-F" in args:
        method = "POST"
    else:
        method = "GET"
    return method.lower(), path


def test_every_curl_example_names_a_real_route(server_settings, make_client):
    spec = make_client(server_settings).get("/openapi.json").json()["paths"]
    commands = _curl_commands()
    assert len(commands) >= 10
    for args in commands:
        method, path = _route(args)
        matches = [
            template
            for template in spec
            if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path) and method in spec[template]
        ]
        assert matches, f"docs/server.md: {method.upper()} {path} is not an endpoint"


def test_python_streaming_example_runs(agent_app, live_server):
    [example] = _fenced("python")
    server = live_server(agent_app())
    code = example.replace("http://127.0.0.1:8000", server.url).replace(
        "Which file types can I ingest?", WORKER_QUESTION
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(PAGE), "exec"), {})
    assert "twelve threads" in printed.getvalue()
    assert printed.getvalue().rstrip().endswith("COMPLETED")
