"""Follow-ups over HTTP, in quote mode (the default): `/chat` and `/api/agent/run` with a `session_id`, and a
multi-turn `/v1/chat/completions` (the conversation as its messages), read "Is it enabled by default?" after "How
do I turn on encryption at rest?" as a question about encryption."""

from __future__ import annotations

from citewise.agent.followup import standalone

FIRST = "How do I turn on encryption at rest?"
FOLLOWUP = "Is it enabled by default?"
ABOUT_ENCRYPTION = "off by default"


def test_chat_with_a_session_reads_a_follow_up_with_the_question_before_it(agent_app, started):
    client = started(agent_app())
    first = client.post("/chat", json={"message": FIRST})
    assert first.status_code == 200, first.text
    session = first.json()["session_id"]

    followup = client.post("/chat", json={"message": FOLLOWUP, "session_id": session})
    assert followup.status_code == 200, followup.text
    body = followup.json()
    assert body["status"] == "success" and body["session_id"] == session
    assert ABOUT_ENCRYPTION in body["response"]

    # Without the conversation the same words are about something else.
    alone = client.post("/chat", json={"message": FOLLOWUP}).json()
    assert ABOUT_ENCRYPTION not in alone["response"]


def test_the_run_endpoint_traces_the_standalone_question(agent_app, started):
    client = started(agent_app())
    session = client.post("/api/agent/run", json={"question": FIRST}).json()["session_id"]
    answer = client.post(
        "/api/agent/run", json={"question": FOLLOWUP, "session_id": session, "returnTrace": True}
    ).json()
    assert answer["question"] == FOLLOWUP and ABOUT_ENCRYPTION in answer["answer"]
    step = next(e for e in answer["trace"] if e["type"] == "standalone")
    assert step["data"]["question"] == standalone(FOLLOWUP, [FIRST]).question
    assert step["data"]["from_turns"] == [FIRST]
    search = next(e for e in answer["trace"] if e["type"] == "tool_call")
    assert search["data"]["args"]["query"] == step["data"]["question"]


def test_v1_reads_a_follow_up_with_the_earlier_messages(agent_app, started):
    client = started(agent_app())
    first = client.post(
        "/v1/chat/completions", json={"model": "citewise", "messages": [{"role": "user", "content": FIRST}]}
    ).json()
    earlier = first["choices"][0]["message"]["content"]
    messages = [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": earlier},
        {"role": "user", "content": FOLLOWUP},
    ]
    completion = client.post("/v1/chat/completions", json={"model": "citewise", "messages": messages})
    assert completion.status_code == 200, completion.text
    assert ABOUT_ENCRYPTION in completion.json()["choices"][0]["message"]["content"]

    alone = client.post(
        "/v1/chat/completions", json={"model": "citewise", "messages": [{"role": "user", "content": FOLLOWUP}]}
    ).json()
    assert ABOUT_ENCRYPTION not in alone["choices"][0]["message"]["content"]
