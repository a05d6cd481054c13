"""The bundled local model: found without network, converted once, greedy (same prompt → same reply)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from citewise.errors import ConfigError, MissingExtraError
from citewise.llm.local import BUNDLED_NAME, LocalChatModel, _messages_to_chat, bundled_gguf, load_runtime
from citewise.llm.models import LLMClient
from citewise.settings import Settings


@pytest.mark.extras
def test_bundled_gguf_is_found_inside_the_package():
    path = bundled_gguf()
    assert path.suffix == ".gguf" and path.stat().st_size > 10_000_000
    assert "smollm2" in path.name.lower()


def test_importing_the_local_module_does_not_load_torch():
    code = "import sys, citewise.llm.local, citewise.llm.models; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_messages_become_alternating_chat_turns():
    chat = _messages_to_chat(
        [
            SystemMessage("Answer from the docs."),
            HumanMessage("How do I install?"),
            AIMessage("", tool_calls=[{"name": "search_docs", "args": {"query": "install"}, "id": "1"}]),
            ToolMessage("[1] pip install citewise", tool_call_id="1", name="search_docs"),
            HumanMessage("Answer now."),
        ]
    )
    assert [turn["role"] for turn in chat] == ["system", "user", "assistant", "user"]
    assert '"tool": "search_docs"' in chat[2]["content"]
    assert chat[3]["content"].startswith("Tool result (search_docs):\n[1] pip install citewise")
    assert chat[3]["content"].endswith("Answer now.")


def test_missing_local_model_path_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="Local model not found"):
        load_runtime(tmp_path / "nope.gguf", tmp_path)
    (tmp_path / "weights.bin").write_bytes(b"x")
    with pytest.raises(ConfigError, match=r"neither a \.gguf file"):
        load_runtime(tmp_path / "weights.bin", tmp_path)


@pytest.mark.slow
@pytest.mark.extras
def test_smollm2_generates_deterministically(tmp_path):
    settings = Settings(home=tmp_path / "home", llm="local", generation={"max_tokens": 16, "cache": False})
    client = LLMClient(settings)
    assert client.name == "local" and client.native_tools is False
    model = LocalChatModel.from_settings(settings, max_new_tokens=12)
    assert model.max_new_tokens == 12

    question = [SystemMessage("You are concise."), HumanMessage("What is the capital of France?")]
    first = model.invoke(question).content
    second = model.invoke(question).content
    assert first and first == second
    streamed = [chunk.content for chunk in model.stream(question)]
    assert len([piece for piece in streamed if piece]) > 1
    assert "".join(streamed).strip() == first

    # Through the client: a CPU model is never cut off by the (vendor-sized) per-call timeout.
    reply = asyncio.run(client.ainvoke(question, timeout=0.01))
    assert reply.content and client.last_model == "local"

    # Converted once into the models dir; later loads read that folder instead of the GGUF.
    assert (Path(settings.model_cache_dir) / BUNDLED_NAME / "config.json").exists()


def test_the_local_answerer_without_its_extra_says_what_to_install(tmp_path, monkeypatch):
    """transformers (and torch) come only with the local-llm extra: a model folder given without them is a
    MissingExtraError naming the extra, not a bare ImportError."""
    import builtins

    real_import = builtins.__import__

    def without_transformers(name, *args, **kwargs):
        if name == "transformers" or name.startswith("transformers."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_transformers)
    folder = tmp_path / "my-model"
    folder.mkdir()
    with pytest.raises(MissingExtraError, match=r"pip install 'citewise\[local-llm\]'"):
        load_runtime(folder, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()
