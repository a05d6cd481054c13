"""The index's own vocabulary: which words its chunks hold and in how many chunks, per owner.

It serves two needs at query time, for any index size, without asking the full-text engine word by word:

- **spelling correction against the docs** — "how do i delet a documnet from the indx" is searched as "delete a
  document from the index": only words the index has never seen are corrected, and only to a word it holds (the
  closest by optimal-string-alignment distance, which counts a swap of two letters as one edit, starting with the
  same letter, a word the typo left a letter out of first, then the most frequent), so a correctly spelled word is
  never changed; nor is a common English word no document uses (`is_english`): the docs not holding it is what the
  question's answer hinges on (the query side, `citewise.index.retriever`, also leaves names and acronyms alone);
- **corpus statistics** — how many chunks hold a word, which quote mode uses to tell the words a question hinges
  on (rare in the corpus) from the product's name (in most chunks).

Words are counted per owner, so one owner's documents never correct or inform another owner's questions. The
vocabulary is rebuilt from the store after an ingest changed something and kept in `index/vocabulary.json`,
stamped with the store version it was built from: a reader whose store has moved on rebuilds it instead of
trusting it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from citewise.text import STOPWORDS, is_english, stem
from citewise.types import Owner

log = logging.getLogger(__name__)

FILE = "vocabulary.json"
FORMAT = 1
_WORD_RE = re.compile(r"[a-z0-9]+")
MIN_CORRECTED_CHARS = 4  # shorter words are too close to too many others to correct to anything but a stop word
MAX_CORRECTED_CHARS = 40
# A word the docs hold in at most RARE_FORM_MAX chunks may itself be a typo in the docs: it is still corrected to a
# word at least RARE_FORM_RATIO times as frequent (and in at least RARE_FORM_MIN_TARGET chunks).
RARE_FORM_MAX = 2
RARE_FORM_RATIO = 5
RARE_FORM_MIN_TARGET = 10


def _omitted(word: str, candidate: str) -> bool:
    """Whether `word` is `candidate` with letters left out ("limt" of "limit"): the commonest typo."""
    rest = iter(candidate)
    return all(letter in rest for letter in word)


def chunk_terms(text: str) -> set[str]:
    """The words a chunk's indexed text (`store.search_text`: compact identifiers included) contributes, lower-case
    and split the way the full-text index splits them."""
    return set(_WORD_RE.findall(text.lower()))


_QUESTION_WORDS = frozenset({"what", "when", "where", "which", "who", "whom", "whose", "why", "how"})
_SHORT_STOPWORDS = sorted(w for w in STOPWORDS if w.isalpha() and 3 <= len(w) <= 5)


@dataclass
class Vocabulary:
    """Chunk counts per word, per owner. `df(word, owner)` counts the chunks `owner` may see (theirs and public)."""

    version: int = 0
    chunks: dict[str, int] = field(default_factory=dict)  # owner → chunk count
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # owner → word → chunks holding it
    _views: dict[str | None, VocabularyView] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def build(cls, rows: Iterable[tuple[str, str]], version: int) -> Vocabulary:
        """From (owner, indexed text) pairs, one per chunk."""
        counts: dict[str, Counter[str]] = {}
        chunks: Counter[str] = Counter()
        for owner, text in rows:
            chunks[owner] += 1
            counts.setdefault(owner, Counter()).update(chunk_terms(text))
        return cls(version=version, chunks=dict(chunks), counts={o: dict(c) for o, c in counts.items()})

    # -- persistence ---------------------------------------------------------------------------------------------
    @classmethod
    def load(cls, directory: Path) -> Vocabulary | None:
        try:
            data = json.loads((directory / FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return cls.from_payload(data)

    @classmethod
    def from_payload(cls, data: object) -> Vocabulary | None:
        """From what `payload()` made (a file's JSON, or the database's vocabulary row); None for another format."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return None
        return cls(version=int(data["version"]), chunks=data["chunks"], counts=data["counts"])

    def payload(self) -> dict:
        return {"format": FORMAT, "version": self.version, "chunks": self.chunks, "counts": self.counts}

    def save(self, directory: Path) -> None:
        """Atomically (a reader sees the old file or the new one); a home that can't be written keeps none."""
        payload = self.payload()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".vocabulary-", suffix=".json", dir=directory)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(payload, out, separators=(",", ":"), sort_keys=True)
            os.replace(tmp, directory / FILE)
        except OSError:
            pass

    # -- queries -------------------------------------------------------------------------------------------------
    def view(self, owner: Owner | str | None) -> VocabularyView:
        """The words of the documents `owner` sees (`Owner.visible`: public ones plus their own)."""
        owner = Owner.of(owner)
        with self._lock:
            cached = self._views.get(owner.id)
            if cached is None:
                merged: Counter[str] = Counter()
                for name in owner.visible:
                    merged.update(self.counts.get(name, {}))
                total = sum(self.chunks.get(name, 0) for name in owner.visible)
                cached = self._views[owner.id] = VocabularyView(dict(merged), total)
            return cached


class VocabularyView:
    """One owner's view of the vocabulary: word counts, stem counts, and spelling correction."""

    def __init__(self, counts: Mapping[str, int], chunks: int) -> None:
        self.counts = counts
        self.chunks = chunks
        self._stems: dict[str, int] | None = None
        self._choices: list[str] | None = None

    def df(self, word: str) -> int:
        """Chunks holding `word` (a lower-case word or compact identifier)."""
        return self.counts.get(word.lower(), 0)

    def stem_df(self, term: str) -> int:
        """Chunks holding a word with this stem (`citewise.text.stem`), summed over the word's forms: an upper
        bound, exact enough to tell rare from common."""
        if self._stems is None:
            stems: dict[str, int] = {}
            for word, count in self.counts.items():
                key = stem(word)
                stems[key] = stems.get(key, 0) + count
            self._stems = stems
        return self._stems.get(term, 0)

    def correct(self, word: str) -> str | None:
        """The word the index holds that `word` is most likely a misspelling of, or None: when `word` is known, is
        an English word (`is_english`), is no plain word (digits), is too short or long, or nothing that starts with
        its letter is close enough (one edit up to 7 letters, two from 8). Ties go to a word the typo left a letter
        out of, then to the more frequent word, then the alphabetically first, so the result is stable."""
        word = word.lower()
        if word in STOPWORDS or not word.isalpha() or len(word) > MAX_CORRECTED_CHARS:
            return None
        seen = self.counts.get(word, 0)
        if seen > RARE_FORM_MAX:
            return None  # a word the docs use is spelt as they spell it
        from rapidfuzz import process
        from rapidfuzz.distance import OSA

        if len(word) < MIN_CORRECTED_CHARS:  # "wat", "hwo": only a misspelt question word, never a term ("gpu")
            if len(word) < 3:
                return None
            matches = process.extract(word, _SHORT_STOPWORDS, scorer=OSA.distance, score_cutoff=1, limit=None)
            matches = [m for m in matches if m[0][0] == word[0]]
            if not matches or is_english(word):  # "two" is no typo of "too"
                return None
            return min(matches, key=lambda m: (m[1], m[0] not in _QUESTION_WORDS, m[0]))[0]
        if self._choices is None:
            self._choices = sorted(w for w in self.counts if w.isalpha() and len(w) >= MIN_CORRECTED_CHARS - 1)
        limit = 1 if len(word) < 8 else 2
        matches = process.extract(word, self._choices, scorer=OSA.distance, score_cutoff=limit, limit=None)
        # Only a word that starts like the word: a first letter is seldom mistyped, and a word with a prefix is
        # another word ("band" is not "and", "preloading" not "reloading", "unhandled" not "handled"). A word the
        # docs hold once or twice ("indx" in an example of a typo) only for a far more frequent one. Among the
        # closest, a word the typo left letters out of first ("limt": "limit", not "list").
        matches = [
            m
            for m in matches
            if m[0] != word
            and m[0][0] == word[0]
            and (not seen or self.counts[m[0]] >= max(RARE_FORM_RATIO * seen, RARE_FORM_MIN_TARGET))
        ]
        if not matches or is_english(word):  # a word the docs don't use is still a word: "site" is not "size"
            return None  # (asked last: the word list is read only when a near docs word exists)
        return min(matches, key=lambda m: (m[1], not _omitted(word, m[0]), -self.counts[m[0]], m[0]))[0]
