"""The reader: a small model trained here that reads a question with a passage and scores each of the passage's
answer units (sentences, list items, table rows, code blocks) as the answer, against "this passage doesn't answer".

    [CLS] question [SEP] heading path ⏎ passage text [SEP]  →  one logit per unit, one "no answer" logit

It is the bundled all-MiniLM-L6-v2 fine-tuned by `reader/` at the repository root (`make train-reader`), exported
to int8 ONNX with the tokenizer beside it and a manifest saying how it was made (`citewise/quote/model/`). Here it
runs on ONNX Runtime alone — no torch — with fixed threads, so the same input gives the same scores everywhere it
runs on the same build. Each window is run alone: the int8 model quantizes its activations per run, so in a padded
batch a passage's scores moved with the passages read beside it (by 0.2 log-odds at the median, the best unit of 6%
of windows changed), and the padding cost twice the time. Alone, a passage's scores are its own.

`Encoder` is shared with training: the token windows a passage is read in are built by the same code both ways. A
passage longer than one window is read in several, cut between units; each unit is scored in the window it starts in,
against that window's "no answer".
"""

from __future__ import annotations

import bisect
import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from citewise.errors import ConfigError
from citewise.onnx_sessions import kept_session

MODEL_DIR = Path(__file__).parent / "model"
MODEL_FILE = "reader.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "manifest.json"
# The model reads at most this many tokens at once; the question keeps at most MAX_QUESTION_TOKENS of them and the
# heading path MAX_HEADING_TOKENS, the passage the rest.
MAX_TOKENS = 320
MAX_QUESTION_TOKENS = 48
MAX_HEADING_TOKENS = 32
THREADS = 2  # fixed, whatever the machine: the same scores on every machine of one ONNX Runtime build


@dataclass(frozen=True)
class Window:
    """One read of (part of) a passage: token ids, segment ids, and the units it scores as (unit index in the
    passage, first token, end token) — a unit's tokens are the ones whose characters lie inside it."""

    ids: tuple[int, ...]
    segments: tuple[int, ...]
    units: tuple[tuple[int, int, int], ...]


class Encoder:
    """Question + heading path + passage text with its units → token windows (training and inference alike)."""

    def __init__(self, tokenizer_path: Path | str, max_tokens: int = MAX_TOKENS) -> None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.cls = tokenizer.token_to_id("[CLS]")
        self.sep = tokenizer.token_to_id("[SEP]")
        self.pad = tokenizer.token_to_id("[PAD]") or 0

    def tokens(self, texts: Sequence[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        return [(e.ids, e.offsets) for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def windows(
        self,
        question: str,
        heading: str,
        text: str,
        units: Sequence[tuple[int, int, str]] | Sequence[tuple[int, int]],
        *,
        encoded: tuple | None = None,
    ) -> list[Window]:
        """The windows a passage is read in. `encoded`: the three token lists (question, heading, text) with offsets,
        when the caller tokenised many at once."""
        (q_ids, _), (h_ids, _), (t_ids, t_offsets) = encoded or self.tokens([question, heading, text])
        q_ids = q_ids[:MAX_QUESTION_TOKENS]
        h_ids = h_ids[:MAX_HEADING_TOKENS]
        head = [self.cls, *q_ids, self.sep, *h_ids]
        segments_head = [0] * (len(q_ids) + 2) + [1] * len(h_ids)
        budget = max(16, self.max_tokens - len(head) - 1)
        starts = [start for start, _ in t_offsets]
        spans = [(bisect.bisect_left(starts, u[0]), bisect.bisect_left(starts, u[1])) for u in units]  # tokens [a, b)
        order = sorted((span, i) for i, span in enumerate(spans) if span[1] > span[0])
        out: list[Window] = []
        position, k, total = 0, 0, len(t_ids)
        while k < len(order):
            end = min(total, position + budget)
            if end < total:  # cut after the last unit that fits whole, when one does
                fits = [b for (a, b), _ in order[k:] if a >= position and b <= end]
                if fits and max(fits) > position:
                    end = max(fits)
            inside = []
            while k < len(order) and order[k][0][0] < end:
                (a, b), i = order[k]
                inside.append((i, len(head) + a - position, len(head) + min(b, end) - position))
                k += 1
            ids = [*head, *t_ids[position:end], self.sep]
            segments = [*segments_head, *([1] * (end - position + 1))]
            out.append(Window(tuple(ids), tuple(segments), tuple(inside)))
            position = end
        return out


def heading_line(title: str, chapter: str) -> str:
    """The heading path a passage is read under: the page title, then its section's headings (without repeating the
    title when the first heading is the title)."""
    parts = [p for p in chapter.split(" > ") if p] if chapter else []
    if title and (not parts or parts[0].strip().lower() != title.strip().lower()):
        parts.insert(0, title)
    return " > ".join(parts)


@dataclass(frozen=True)
class Scores:
    """A passage's scores: each unit's log-odds against "no answer" in its window (None: the unit has no token),
    and the best "no answer" logit minus the best unit logit of any window (how sure it is there's none; a window
    with no unit in it, inside a unit longer than a window, makes it about 1e9: nothing reads it today)."""

    units: tuple[float | None, ...]
    null: float


class Reader:
    """The shipped reader on ONNX Runtime. Loads on first use; one session per process, shared by threads."""

    def __init__(self, model_dir: Path | str = MODEL_DIR, keep: Path | None = None) -> None:
        """`keep`: a folder of the machine's models cache where ONNX Runtime's optimised graph of the model is kept
        for the next process (`citewise.onnx_sessions`); None optimises in memory every time."""
        self.model_dir = Path(model_dir)
        self._keep = keep
        self._session = None
        self._encoder: Encoder | None = None
        self._lock = threading.Lock()
        self.load_count = 0

    @property
    def manifest(self) -> dict:
        return json.loads((self.model_dir / MANIFEST_FILE).read_text(encoding="utf-8"))

    def _load(self):
        with self._lock:
            if self._session is None:
                model = self.model_dir / MODEL_FILE
                if not model.is_file():
                    raise ConfigError(
                        f"Quote mode's reader model is missing ({model}). Reinstall Citewise, or rebuild it with "
                        "`make train-reader`."
                    )
                try:
                    manifest = self.manifest
                except (OSError, ValueError) as exc:
                    raise ConfigError(
                        f"Quote mode's reader manifest ({self.model_dir / MANIFEST_FILE}) can't be read ({exc}): "
                        "reinstall Citewise."
                    ) from exc
                digest = hashlib.sha256(model.read_bytes()).hexdigest()
                if manifest.get("onnx_sha256") != digest:
                    raise ConfigError(f"{model} does not match its manifest's sha256: reinstall Citewise.")
                import onnxruntime as ort

                try:
                    encoder = Encoder(self.model_dir / TOKENIZER_FILE, int(manifest.get("max_tokens", MAX_TOKENS)))
                    keep = None if self._keep is None else self._keep / f"reader-{digest[:12]}"
                    session = kept_session(ort, model, keep, stamp=digest, threads=THREADS)
                except Exception as exc:  # the tokenizer's and ONNX Runtime's own errors say nothing of what to do
                    raise ConfigError(
                        f"Quote mode's reader in {self.model_dir} can't be loaded ({exc}): reinstall Citewise."
                    ) from exc
                self._encoder, self._session = encoder, session
                self.load_count += 1
        return self._session

    @property
    def encoder(self) -> Encoder:
        self._load()
        assert self._encoder is not None
        return self._encoder

    def score(self, question: str, passages: Sequence[tuple[str, str, Sequence[tuple[int, int, str]]]]) -> list[Scores]:
        """Scores of every (heading line, text, units) passage for `question`."""
        session = self._load()
        encoder = self.encoder
        texts = [question]
        for heading, text, _ in passages:
            texts += [heading, text]
        tokens = encoder.tokens(texts)
        windows: list[tuple[int, Window]] = []
        for p, (_, text, units) in enumerate(passages):
            encoded = (tokens[0], tokens[1 + 2 * p], tokens[2 + 2 * p])
            windows += [(p, w) for w in encoder.windows(question, "", text, units, encoded=encoded)]
        unit_logits: dict[tuple[int, int], float] = {}
        nulls: dict[int, list[tuple[float, float]]] = {}
        for p, window in windows:  # one at a time: no padding, and no passage moves another's scores
            logits, null = run(session, [window], encoder.pad)
            best = -1e9
            for j, (unit, _, _) in enumerate(window.units):
                value = float(logits[0, j]) - float(null[0])
                unit_logits[(p, unit)] = round(value, 4)
                best = max(best, float(logits[0, j]))
            nulls.setdefault(p, []).append((float(null[0]), best))
        out = []
        for p, (_, _, units) in enumerate(passages):
            values = tuple(unit_logits.get((p, i)) for i in range(len(units)))
            null = max((n - b for n, b in nulls.get(p, [])), default=0.0)
            out.append(Scores(values, round(null, 4)))
        return out


def batch_arrays(windows: Sequence[Window], pad: int) -> dict[str, np.ndarray]:
    """The model's inputs for a batch of windows, padded to the longest (tokens) and the most units."""
    width = max(len(w.ids) for w in windows)
    count = max(1, max(len(w.units) for w in windows))
    ids = np.full((len(windows), width), pad, dtype=np.int64)
    segments = np.zeros((len(windows), width), dtype=np.int64)
    mask = np.zeros((len(windows), width), dtype=np.int64)
    units = np.zeros((len(windows), count, width), dtype=np.float32)
    for row, window in enumerate(windows):
        ids[row, : len(window.ids)] = window.ids
        segments[row, : len(window.segments)] = window.segments
        mask[row, : len(window.ids)] = 1
        for j, (_, a, b) in enumerate(window.units):
            units[row, j, a:b] = 1.0
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": segments, "unit_mask": units}


def run(session, windows: Sequence[Window], pad: int) -> tuple[np.ndarray, np.ndarray]:
    """(unit logits [batch, units], no-answer logits [batch]) of one batch of windows."""
    feeds = batch_arrays(windows, pad)
    unit_logits, null_logits = session.run(["unit_logits", "null_logit"], feeds)
    return unit_logits, null_logits
