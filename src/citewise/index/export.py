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

import json
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator
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
    """`model_dir` → `target`: fp32, or int8 made from an fp32 file kept beside it as `model.onnx`."""
    fp32 = target if how == "none" else target.parent / "model.onnx"
    if not fp32.exists():
        export_onnx(model_dir, fp32)
    if how != "none":
        quantize(fp32, target, how)
