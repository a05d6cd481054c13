"""A sentence-transformers model folder → an ONNX file ONNX Runtime runs without torch (and, optionally, int8).

This is the only code that needs torch, and only the `[export]` extra installs it. Two callers:
- `embedder/ship.py` (`make ship-embedder`) makes the embedding model shipped inside the package
  (`citewise/index/model/`) from the packaged all-MiniLM-L6-v2 weights;
- `OnnxEmbedder` exports any other local model (`embeddings = "local:/path/to/model"`), or the bundled one in a
  variant that is not shipped, once per machine into the models cache.

The pipeline of these models (transformer → mean/CLS pooling → L2 normalisation) is small enough to run directly
with `tokenizers` and `onnxruntime` (`OnnxEmbedder`); only the transformer goes into the ONNX file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from citewise.errors import ConfigError, MissingExtraError

# How the int8 variants quantize: the transformer's matrix products only, or those and the word-embedding table
# (a Gather), which is half of the fp32 file. Both dynamic (activations quantized per batch at run time), per
# channel, 7-bit weights (reduce_range: 8-bit products can saturate on CPUs without VNNI).
Quantize = Literal["none", "matmul", "matmul+gather"]


@dataclass(frozen=True)
class Pipeline:
    """What runs around the transformer: pooling ("mean" or "cls"), whether vectors are L2-normalised, and the
    model's input limit in tokens. Read from the model folder's sentence-transformers config."""

    pooling: str
    normalize: bool
    max_seq_length: int

    def as_dict(self) -> dict:
        return asdict(self)


def read_pipeline(model_dir: Path) -> Pipeline:
    """The pipeline of a sentence-transformers model folder; ConfigError when ONNX can't run it."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{model_dir} is not a sentence-transformers model folder (modules.json: {exc}).") from exc
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or not set(kinds[2:]) <= {"Normalize"}:
        raise ConfigError(
            f"The ONNX backend runs Transformer → Pooling (→ Normalize) models; {model_dir} is {kinds}. "
            "Set CITEWISE_EMBEDDINGS_BACKEND=torch for this model."
        )
    pooling_cfg = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
    pooling = "cls" if pooling_cfg.get("pooling_mode_cls_token") else "mean"
    if pooling == "mean" and not pooling_cfg.get("pooling_mode_mean_tokens", True):
        raise ConfigError(f"Unsupported pooling in {model_dir}; set CITEWISE_EMBEDDINGS_BACKEND=torch.")
    max_len = json.loads((model_dir / "sentence_bert_config.json").read_text()).get("max_seq_length", 256)
    return Pipeline(pooling, "Normalize" in kinds, int(max_len))


def export_onnx(model_dir: Path, fp32: Path) -> None:
    """The model's transformer → `fp32` (ONNX, opset 17, dynamic batch and length). Written under a temp name first,
    so a crash never leaves half a model."""
    try:
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise MissingExtraError(f"Exporting the local embedding model {model_dir} to ONNX", "export") from exc
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    hf_logging.disable_progress_bar()
    fp32.parent.mkdir(parents=True, exist_ok=True)
    base = AutoModel.from_pretrained(str(model_dir)).eval()

    class _LastHidden(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    sample = torch.ones((2, 8), dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with _writing(fp32) as tmp, torch.no_grad():
        torch.onnx.export(
            _LastHidden(base),
            (sample, sample, torch.zeros_like(sample)),
            str(tmp),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "last_hidden_state"]},
            opset_version=17,
            dynamo=False,
            do_constant_folding=True,
        )


def quantize(fp32: Path, target: Path, how: Quantize) -> None:
    """`fp32` → `target`, int8 as `how` says (see `Quantize`)."""
    if how == "none":
        raise ValueError("quantize() makes an int8 variant; 'none' is the fp32 file itself")
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:  # onnxruntime's quantizer needs the `onnx` package
        raise MissingExtraError("Quantizing an ONNX model", "export", "onnx") from exc
    with _writing(target) as tmp:
        quantize_dynamic(
            str(fp32),
            str(tmp),
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            op_types_to_quantize=["MatMul", "Gather"] if how == "matmul+gather" else ["MatMul"],
        )


@contextmanager
def _writing(target: Path) -> Iterator[Path]:
    """A scratch file of its own beside `target` (two processes exporting at once never share one), renamed over
    `target` when the block succeeds and removed when it fails, so a crash never leaves half a model. The exporter's
    and quantizer's warnings about their internals, which a user can do nothing about, are kept off the terminal."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}-", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    previous = logging.root.level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.root.setLevel(logging.ERROR)
        try:
            yield tmp
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        finally:
            logging.root.setLevel(previous)
    os.replace(tmp, target)


def export(model_dir: Path, target: Path, how: Quantize) -> None:
    """`model_dir` → `target`: fp32, or int8 made from an fp32 file kept beside it as `model.onnx`; simplified
    (`simplify`) either way."""
    fp32 = target if how == "none" else target.parent / "model.onnx"
    if not fp32.exists():
        export_onnx(model_dir, fp32)
        simplify(fp32)
    if how != "none":
        quantize(fp32, target, how)
        simplify(target)


def simplify(path: Path) -> dict[str, int]:
    """Rewrite an exported transformer (fp32 or int8) in place without what torch's attention export adds that
    changes no output, and say how many nodes of each kind went. Nearly a third of a run of all-MiniLM-L6-v2 went
    there (the int8 reader, one 280-token window on 2 cores: 59 → 43 ms):

    - `Where(IsNaN(p), 0, p)` after every softmax: it zeroes the rows of a query whose keys are all masked, which
      never happen here ([CLS] is never masked), so `p` passes through unchanged;
    - the same additive mask recomputed in every layer, and every other node that repeats one before it (the same
      operator, attributes and inputs, constants compared by value): computed once, used by all.

    Outputs are equal to the bit (the shipped models' golden tests check it); ONNX Runtime's own optimiser does
    neither. Needs the `onnx` package (the `[export]` extra)."""
    try:
        import onnx
    except ImportError as exc:
        raise MissingExtraError("Simplifying an ONNX model", "export", "onnx") from exc
    model = onnx.load(str(path))
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    rename: dict[str, str] = {}

    def source(name: str) -> str:
        while name in rename:
            name = rename[name]
        return name

    def constant(node) -> bytes | None:
        return node.attribute[0].SerializeToString() if node.op_type == "Constant" and node.attribute else None

    seen: dict[tuple, list[str]] = {}
    dropped: dict[str, int] = {}
    kept = []
    outputs = {o.name for o in graph.output}
    for node in graph.node:  # ONNX keeps nodes in topological order: inputs are renamed before they are read
        inputs = [source(name) for name in node.input]
        node.input[:] = inputs
        if outputs.intersection(node.output):  # what the graph returns keeps its name and its node
            kept.append(node)
            continue
        if node.op_type == "Where" and len(inputs) == 3 and inputs[0] in producer:
            test = producer[inputs[0]]
            zero = producer.get(inputs[1])
            if (
                test.op_type == "IsNaN"
                and source(test.input[0]) == inputs[2]
                and zero is not None
                and _is_zero(onnx, zero)
            ):
                rename[node.output[0]] = inputs[2]
                dropped["Where(IsNaN)"] = dropped.get("Where(IsNaN)", 0) + 1
                continue
        if node.domain in ("", "ai.onnx") and node.op_type not in _NOT_PURE and not _has_graph(onnx, node):
            value = constant(node)
            key = (
                node.op_type,
                value if value is not None else tuple(inputs),
                tuple(a.SerializeToString() for a in node.attribute) if value is None else (),
            )
            if key in seen and len(seen[key]) == len(node.output):
                for out, first in zip(node.output, seen[key], strict=True):
                    rename[out] = first
                dropped[node.op_type] = dropped.get(node.op_type, 0) + 1
                continue
            seen[key] = list(node.output)
        kept.append(node)
    used = set(outputs)
    live = []
    for node in reversed(kept):  # then drop what nothing reads any more (the IsNaN tests)
        if any(out in used for out in node.output):
            live.append(node)
            used.update(node.input)
        else:
            dropped[node.op_type] = dropped.get(node.op_type, 0) + 1
    del graph.node[:]
    graph.node.extend(reversed(live))
    mode = path.stat().st_mode
    with _writing(path) as tmp:
        onnx.save(model, str(tmp))
        os.chmod(tmp, mode)
    return dropped


def simplify_checked(path: Path, outputs: Callable[[Path], Sequence]) -> tuple[str, dict[str, int]] | None:
    """`simplify(path)`, kept only when `outputs` (what a model file gives on the caller's inputs: arrays) is equal to
    the bit before and after; otherwise the file is left as it was and None returned. Returns the sha256 of the file
    before the rewrite and what went. How the shipped models are rewritten (reader/train.py, embedder/ship.py)."""
    import numpy as np

    backup = path.with_name(path.name + ".unsimplified")
    shutil.copyfile(path, backup)
    try:
        before = hashlib.sha256(backup.read_bytes()).hexdigest()
        dropped = simplify(path)
        old, new = outputs(backup), outputs(path)
        if len(old) != len(new) or not all(np.array_equal(a, b) for a, b in zip(old, new, strict=True)):
            shutil.copyfile(backup, path)
            return None
        return before, dropped
    finally:
        backup.unlink(missing_ok=True)


# Operators whose two runs on the same inputs may differ (or that have none): never merged.
_NOT_PURE = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"}
)


def _has_graph(onnx, node) -> bool:
    kinds = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    return any(a.type in kinds for a in node.attribute)


def _is_zero(onnx, node) -> bool:
    if node.op_type != "Constant" or not node.attribute:
        return False
    value = onnx.numpy_helper.to_array(node.attribute[0].t) if node.attribute[0].HasField("t") else None
    return value is not None and value.size == 1 and float(value.reshape(-1)[0]) == 0.0
