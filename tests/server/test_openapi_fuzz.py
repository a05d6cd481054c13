"""The app against its own OpenAPI schema (schemathesis, on Hypothesis): generated requests to every operation, valid
and invalid (positive and negative generation), with and without an API key. No 5xx, and every response — status
code, content type, body, headers — is one the schema documents. Bounded: a fixed number of derandomized examples
per operation and mode, so a run takes well under a minute.

schemathesis' own pytest plugin does not load under this pytest, so the cases are driven with Hypothesis here:
`operation.as_strategy()` generates `Case`s, `case.call_and_validate()` sends them through the ASGI app and runs
schemathesis' checks."""

from __future__ import annotations

import contextlib
import time

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance
from tests.server.conftest import KEYS

from citewise.server import create_app
from citewise.settings import Settings

EXAMPLES = 12  # per operation, per generation mode, per key/no key
# Schema-valid requests the API refuses on purpose, for reasons a JSON schema can't express: an empty or blank
# message (400, the widget contract), a question over agent.max_question_chars (422, a setting), agent mode without
# a model (400). Every other check stays on, not_a_server_error first of all.
EXCLUDED = [positive_data_acceptance]
RUNS: list[dict] = []  # (operation, cases, seconds): bench/chaos.py reads the figures the same way


@pytest.fixture(scope="module")
def fuzz_schema(tmp_path_factory, make_kb_module):
    home = tmp_path_factory.mktemp("fuzz-home")
    settings = Settings(
        home=home,
        api_keys=KEYS,
        # Generated invalid bodies reach past 1 MB (10,000 astral characters × 100 history turns): the body limit's
        # 413 is tested on its own (test_hostile_requests.py); here the schema's own checks must answer.
        server={"rate_limit_per_minute": 0, "auth_failures_per_minute": 0, "log_questions": False, "max_body_mb": 64},
        generation={"cache": False},
    )
    app = create_app(settings, kb=make_kb_module(settings))
    with TestClient(app) as client:  # build the agent once, so no generated case pays for it (and times out)
        client.post("/chat", json={"message": "warm up"}, headers={"Authorization": "Bearer key-alice"})
    return schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.fixture(scope="module")
def make_kb_module(embedder):
    from citewise.index.knowledge_base import KnowledgeBase

    return lambda settings: KnowledgeBase(settings, embedder=embedder)


def operations(schema) -> list:
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
@pytest.mark.parametrize("key", ["key-alice", None], ids=["key", "no-key"])
def test_no_5xx_and_responses_match_the_schema(fuzz_schema, mode, key):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    for operation in operations(fuzz_schema):
        started = time.perf_counter()
        count = 0

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
        def check(case):
            nonlocal count
            count += 1
            case.call_and_validate(headers={**(case.headers or {}), **headers}, excluded_checks=EXCLUDED, timeout=120)

        # Unsatisfiable: nothing to generate in this mode (an operation without parameters has no invalid form).
        with contextlib.suppress(Unsatisfiable):
            check()
        RUNS.append({"operation": operation.label, "cases": count, "seconds": time.perf_counter() - started})
    assert sum(r["cases"] for r in RUNS) > 0
    print(f"schemathesis: {sum(r['cases'] for r in RUNS)} cases so far, {sum(r['seconds'] for r in RUNS):.1f} s")
