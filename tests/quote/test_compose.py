"""Quote mode's choosing and quoting: verbatim sentences only, chosen for the question, each cited."""

from __future__ import annotations

import hashlib
import re

import pytest

from citewise.agent.constraints import Constraints
from citewise.agent.grounding import ground
from citewise.agent.validator import validate_answer
from citewise.quote import Part, QuestionKind, QuoteAnswer, analyse, answer, question_focus
from citewise.quote import answer as quote_answer
from citewise.quote.sentences import defines, is_anaphoric, is_introduction, is_navigation
from citewise.settings import QuoteSettings
from citewise.text import content_terms, split_sentences, stem
from citewise.types import REFUSAL_TEXT, AnswerStyle, ScoredChunk, make_chunk_id, make_doc_id


def compose_quote_answer(
    question: str,
    chunks,
    *,
    max_sentences: int = 4,
    style: AnswerStyle = AnswerStyle.DEFAULT,
    threshold: float = 0.0,
    corpus=None,
) -> QuoteAnswer:
    """Quote mode on these passages; the decision off (threshold 0) unless a test asks for it: these tests are about
    choosing and quoting."""
    settings = QuoteSettings(max_sentences=max_sentences, threshold=threshold)
    return answer([Part(analyse(question), list(chunks))], settings, style=style, corpus=corpus)


def chunk(text: str, doc: str, *, dense: float | None = 0.7, score: float = 0.3, **extra) -> ScoredChunk:
    doc_id = make_doc_id(doc)
    return ScoredChunk(
        chunk_id=make_chunk_id(doc_id, 0),
        doc_id=doc_id,
        chunk_index=0,
        text=text,
        filename=doc,
        score=score,
        dense_score=dense,
        **extra,
    )


INSTALL = chunk(
    "# Installation\n\n"
    "Orbitron ships as a single daemon, `orbitrond`, and a command-line client, `orbitron`.\n\n"
    "### Linux packages\n\n"
    "Install version 3.2 from the Orbitron apt repository. The daemon listens on port **7433** by default and "
    "stores its journal\nunder `/var/lib/orbitron`.\n\n"
    "```bash\nsudo apt-get install orbitrond=3.2.0\nsudo systemctl enable --now orbitrond\n```\n",
    "install.md",
    dense=0.72,
    chapter="Installation > Linux packages",
)
PORTS = chunk(
    "Changing the port needs a restart of the daemon. The listening port is set with `listen_port` in "
    "orbitrond.toml. The default port is 7433 unless you change it.\n\n"
    "- Firewalls must allow the listening port for workers to connect.\n"
    "- The web console uses the same port.",
    "ports.md",
    dense=0.61,
)
DUPLICATE = chunk(
    "The daemon listens on port 7433 by default and stores its journal under /var/lib/orbitron. Nothing else.",
    "copy.md",
    dense=0.55,
)
QUEUES = chunk(
    "Queues are created explicitly. Enqueueing to a queue that does not exist fails with error ORB-404. "
    "Finished jobs are kept for seven days with the retention flag.",
    "queues.md",
    dense=0.5,
)
CHUNKS = [(1, INSTALL), (2, PORTS), (3, DUPLICATE), (4, QUEUES)]
QUESTION = "Which port does the Orbitron daemon listen on by default?"


def sentences_of(answer: QuoteAnswer) -> list[tuple[int, str]]:
    """(n, sentence) pairs of a default-style or structured quote answer."""
    pairs = []
    for line in answer.text.split("\n\n"):
        for match in re.finditer(r"(?:^|(?<=\] ))(?:- )?(.+?) \[(\d+)\]", line, re.S):
            pairs.append((int(match.group(2)), match.group(1)))
    return pairs


def test_answer_is_verbatim_sentences_each_cited():
    answer = compose_quote_answer(QUESTION, CHUNKS, max_sentences=4)
    assert not answer.refused and answer.reason is None
    pairs = sentences_of(answer)
    assert pairs, answer.text
    texts = dict(CHUNKS)
    for n, sentence in pairs:
        assert sentence in texts[n].text, sentence  # exact substring, not whitespace-normalised
    assert "The daemon listens on port **7433** by default and stores its journal\nunder `/var/lib/orbitron`." in (
        answer.text
    )
    assert answer.used == list(dict.fromkeys(n for n, _ in pairs))


def test_near_duplicate_sentences_are_dropped():
    answer = compose_quote_answer(QUESTION, CHUNKS, max_sentences=4)
    assert "[3]" not in answer.text  # copy.md repeats install.md's sentence
    assert 3 not in answer.used


def test_irrelevant_sentences_stay_out_and_order_is_by_chunk_then_position():
    answer = compose_quote_answer(QUESTION, CHUNKS, max_sentences=4)
    assert "ORB-404" not in answer.text and "Queues are created" not in answer.text
    positions = [(n, dict(CHUNKS)[n].text.index(s)) for n, s in sentences_of(answer)]
    assert positions == sorted(positions)


def test_headings_and_code_are_not_quoted_as_sentences():
    spans = split_sentences(INSTALL.text)
    quoted = [INSTALL.text[s:e] for s, e in spans]
    assert not any(q.startswith("#") or "```" in q or "apt-get" in q for q in quoted)
    assert "Install version 3.2 from the Orbitron apt repository." in quoted
    assert "Firewalls must allow the listening port for workers to connect." in [
        PORTS.text[s:e] for s, e in split_sentences(PORTS.text)
    ]


def test_sentence_splitting_keeps_abbreviations_together():
    text = "Use a queue per tenant, e.g. Billing or Email. Workers poll every 15 s. Done now."
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "Use a queue per tenant, e.g. Billing or Email.",
        "Workers poll every 15 s.",
        "Done now.",
    ]


def test_a_list_run_into_a_paragraph_keeps_each_number_with_its_item():
    # A scraped page writes its numbered list inline ("DEXs: 1\. How …"): "1." ends no sentence, and neither is
    # "2." a sentence of its own. A sentence that ends with a number still ends there.
    text = (
        "You learned the mechanics of DEXs: 1. How pools keep reserves. 2. How the formula prices trades. "
        "The default is 2. Then it stops."
    )
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "You learned the mechanics of DEXs: 1. How pools keep reserves.",
        "2. How the formula prices trades.",
        "The default is 2.",
        "Then it stops.",
    ]
    # a value after a colon is a value, not a list's first number
    text = "Retries: 3. Timeout: 30 seconds. Default: 4. Then it stops."
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "Retries: 3.",
        "Timeout: 30 seconds.",
        "Default: 4.",
        "Then it stops.",
    ]


def test_words_ending_like_an_abbreviation_still_end_a_sentence():
    text = "He has appeared in films. He acts in comedy. Run it first. Then stop, e.g. Friday."
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "He has appeared in films.",
        "He acts in comedy.",
        "Run it first.",
        "Then stop, e.g. Friday.",
    ]


def test_max_sentences_is_respected():
    answer = compose_quote_answer(QUESTION, CHUNKS, max_sentences=1)
    assert len(sentences_of(answer)) == 1
    assert "7433" in answer.text


def test_deterministic():
    runs = {repr(compose_quote_answer(QUESTION, CHUNKS, max_sentences=3)) for _ in range(3)}
    assert len(runs) == 1
    reordered = compose_quote_answer(QUESTION, list(CHUNKS), max_sentences=3)
    digest = hashlib.sha256(reordered.text.encode()).hexdigest()
    assert digest == hashlib.sha256(runs.pop() and reordered.text.encode()).hexdigest()


def test_the_decision_refuses_what_the_model_finds_unlikely():
    refused = compose_quote_answer(QUESTION, CHUNKS, threshold=1.0)
    assert refused.refused and refused.text == REFUSAL_TEXT and refused.used == []
    assert refused.reason and refused.parts[0].probability is not None  # the signals are kept for the trace
    assert not compose_quote_answer(QUESTION, CHUNKS, threshold=0.0).refused


def test_refuses_when_no_sentence_shares_content():
    answer = compose_quote_answer("How do I rotate the encryption keys?", CHUNKS, max_sentences=4)
    assert answer.refused and answer.text == REFUSAL_TEXT
    assert "shares the question's words" in answer.reason


def test_refuses_without_chunks():
    answer = compose_quote_answer(QUESTION, [], max_sentences=4)
    assert answer.refused and answer.reason == "No passages were found for the question."


def test_lexical_only_chunks_are_quoted_too():
    lexical = [
        (1, INSTALL.model_copy(update={"dense_score": None})),
        (2, PORTS.model_copy(update={"dense_score": None})),
    ]
    answer = compose_quote_answer(QUESTION, lexical, max_sentences=2)
    assert not answer.refused and "7433" in answer.text


def test_structured_style():
    answer = compose_quote_answer(QUESTION, CHUNKS, max_sentences=3, style=AnswerStyle.STRUCTURED)
    lines = answer.text.split("\n")
    assert lines[0] == "## Linux packages"
    assert "### Key Points" in lines and "### Why It Matters" in lines
    block = answer.text.split("### Key Points\n\n", 1)[1].split("\n\n### Why It Matters", 1)[0]
    bullets = block[2:].split("\n- ")  # a bullet may wrap: quoted sentences keep the source's line breaks
    assert block.startswith("- ") and bullets
    texts = dict(CHUNKS)
    for bullet in bullets:
        sentence, n = re.fullmatch(r"(.+) \[(\d+)\]", bullet, re.S).groups()
        assert sentence in texts[int(n)].text
    why = answer.text.split("### Why It Matters\n\n", 1)[1]
    sentence, n = re.fullmatch(r"(.+) \[(\d+)\]", why, re.S).groups()
    assert sentence in texts[int(n)].text
    assert sentence not in block  # not a repeat of a key point


def test_quote_answer_grounds_with_spans_and_passes_the_validator():
    answer = compose_quote_answer(QUESTION, CHUNKS, max_sentences=3)
    sources = dict(CHUNKS)
    text, citations = ground(answer.text, sources)
    assert text == answer.text  # nothing to strip or renumber in a composed answer
    assert all(c.quote_spans for c in citations)
    for citation in citations:
        source = next(c for c in sources.values() if c.chunk_id == citation.chunk_id)
        for start, end in citation.quote_spans:
            assert source.text[start:end] in answer.text
    result = validate_answer(
        answer.text,
        sources=sources,
        opened={c.chunk_id for c in sources.values()},
        searches=1,
        constraints=Constraints(exact_quote=True),
    )
    assert result.ok, result.errors


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("configure", "configured"),
        ("configuration", "configuring"),
        ("queues", "queue"),
        ("listens", "listening"),
        # a four-letter word ending in "e" meets its plural and its -ed and -ing forms
        ("file", "files"),
        ("type", "types"),
        ("name", "named"),
        ("code", "coding"),
        ("release", "releases"),
        # Snowball also meets what a suffix list misses
        ("use", "using"),
        ("setting", "set"),
        ("running", "run"),
    ],
)
def test_stemming_joins_word_forms(a, b):
    assert stem(a) == stem(b)


def test_content_terms_drop_stopwords_and_keep_identifiers():
    terms = content_terms("What does the listen_port setting do?")
    assert "listen_port" in terms and stem("listen") in terms and stem("setting") in terms
    assert not terms & {"what", "does", "the", "do"}


CREATE = chunk(
    "## Creating your first queue\n\n"
    "Every queue accepts these settings at creation time:\n\n"
    "Queues are created explicitly and enqueueing to a missing queue fails.\n\n"
    "```bash\norbitron queue create --name emails --retention 7d\n```\n",
    "create.md",
    dense=0.6,
)


def test_a_relevant_code_block_is_quoted_whole_and_lead_ins_are_not():
    answer = compose_quote_answer("How do I create a queue?", [(1, CREATE)], max_sentences=4)
    block = "```bash\norbitron queue create --name emails --retention 7d\n```"
    assert f"{block}\n[1]" in answer.text
    assert "settings at creation time:" not in answer.text  # a lead-in without what it introduces says nothing
    text, [citation] = ground(answer.text, {1: CREATE})
    assert text == answer.text
    assert any(CREATE.text[s:e] == block for s, e in citation.quote_spans)
    result = validate_answer(
        answer.text, sources={1: CREATE}, opened={CREATE.chunk_id}, searches=1, constraints=Constraints()
    )
    assert result.ok, result.errors


def test_structured_style_never_quotes_code_blocks():
    answer = compose_quote_answer(
        "How do I create a queue?", [(1, CREATE)], max_sentences=4, style=AnswerStyle.STRUCTURED
    )
    assert "```" not in answer.text and not answer.refused


def test_refuses_when_the_only_relevant_sentence_is_a_lead_in():
    lead_in = chunk("To rotate the journal keys, run the following steps:\n\nNothing else here at all.", "k.md")
    answer = compose_quote_answer("How do I rotate the journal keys?", [(1, lead_in)])
    assert answer.refused and answer.text == REFUSAL_TEXT


WIKI = chunk(
    "The `` Rammer Jammer Cheer '' is a traditional cheer . The lyrics originate from The Rammer - Jammer , a student "
    "magazine in the 1920s . The term `` yellowhammer '' was used for soldiers from Alabama . Cardinals 3 -- 0 .",
    "wiki.txt",
    dense=0.7,
    title="Rammer Jammer 1925",
)


@pytest.mark.parametrize("style", list(AnswerStyle))
def test_sources_with_odd_quoting_still_ground_and_validate(style):
    question = "Where do the rammer jammer lyrics and the term yellowhammer come from? Cardinals score"
    answer = compose_quote_answer(question, [(1, WIKI)], max_sentences=4, style=style)
    assert not answer.refused
    text, [citation] = ground(answer.text, {1: WIKI})
    assert text == answer.text
    assert len(citation.quote_spans) == len(re.findall(r"\[1\]", answer.text))
    result = validate_answer(
        answer.text, sources={1: WIKI}, opened={WIKI.chunk_id}, searches=1, constraints=Constraints(exact_quote=True)
    )
    assert result.ok, result.errors  # the title in a structured heading is source text too


EMBEDDINGS = [
    (
        1,
        chunk(
            "Citewise embeds chunks with a local model by default. To use OpenAI embeddings, set the provider to "
            "`openai` and export your API key before you ingest. Any server that implements the OpenAI embeddings "
            "API works with the `openai` provider.",
            "embeddings.md",
            dense=0.76,
        ),
    ),
    (
        2,
        chunk(
            "Vectors from different models cannot be compared, so every later command checks the configured model "
            "against the index. Switching the model means re-ingesting every document.",
            "models.md",
            dense=0.61,
        ),
    ),
    (
        3,
        chunk(
            "The local model runs on the CPU and needs no network access. Batches of 32 chunks are embedded at a "
            "time; a larger batch is faster on a GPU.",
            "local.md",
            dense=0.55,
        ),
    ),
]


# Conversational phrasing around a question must not sink its coverage: words like "handbook" or "obvious" occur
# in no passage, so as content words they would weigh the most. None of these wrappers is in the composer's code.
@pytest.mark.parametrize(
    "wrapped",
    [
        "According to the user guide, how do I use OpenAI embeddings?",
        "Per the handbook, how do I use OpenAI embeddings?",
        "Sorry if this is obvious, I'm new here. How do I use OpenAI embeddings?",
        "How do I use OpenAI embeddings? Thanks in advance, answer from the docs please.",
        "Hi team! Quick question: how do I use OpenAI embeddings?",
    ],
)
def test_a_question_wrapped_in_conversation_answers_like_the_bare_question(wrapped):
    fitted = QuoteSettings().threshold
    bare = compose_quote_answer("How do I use OpenAI embeddings?", EMBEDDINGS, threshold=fitted)
    answer = compose_quote_answer(wrapped, EMBEDDINGS, threshold=fitted)
    assert not bare.refused and not answer.refused, answer.reason
    assert answer.text == bare.text


@pytest.mark.parametrize(
    ("question", "chunks"),
    [
        ("How do I configure Kubernetes autoscaling?", EMBEDDINGS),
        ("According to the user guide, how do I configure Kubernetes autoscaling?", EMBEDDINGS),
        ("I'm new here. Which Kubernetes operator autoscales the model's workers?", EMBEDDINGS),
        ("How do I configure Kubernetes autoscaling for the Orbitron daemon?", CHUNKS),
    ],
)
def test_an_off_topic_question_still_refuses_with_close_passages(question, chunks):
    # The passages are close (cosine up to 0.76) and share a word or the product's name with the question, not its
    # subject: the corpus never mentions Kubernetes, so the question's heaviest words are unknown.
    answer = compose_quote_answer(question, chunks, threshold=QuoteSettings().threshold, corpus=CORPUS)
    assert answer.refused and answer.text == REFUSAL_TEXT, answer.text


def test_question_focus_drops_conversation_around_the_question():
    assert question_focus("I'm new here. What is stored with each chunk?") == "What is stored with each chunk?"
    assert question_focus("According to the user guide, how do I ingest PDFs?") == "how do I ingest PDFs?"
    assert question_focus("How do I ingest PDFs? Please keep it short.") == "How do I ingest PDFs?"
    assert question_focus("who sang the national anthem at the super bowl") == (
        "who sang the national anthem at the super bowl"
    )


# -- words the corpus hardly knows ------------------------------------------------------------------------------

SETUP = chunk(
    "Citewise works without any configuration. The data directory defaults to `./.citewise` and every setting "
    "can be changed with an environment variable.",
    "configuration.md",
    dense=0.6,
)
KUBERNETES = "How do I configure Kubernetes autoscaling for Citewise?"


class Corpus:
    """Corpus statistics over a made-up corpus of `chunks` chunks: `counts` for the words given, `default` else."""

    def __init__(self, counts: dict[str, int], default: int = 40, chunks: int = 400) -> None:
        self.counts, self.default, self.chunks = counts, default, chunks

    def df(self, word: str) -> int:
        return self.counts.get(word, self.default)

    def stem_df(self, term: str) -> int:
        return next((n for w, n in self.counts.items() if stem(w) == term), self.default)


CORPUS = Corpus({"kubernetes": 0, "autoscaling": 0, "autoscales": 0, "operator": 0})


def test_how_long_or_how_many_is_refused_when_no_quote_states_a_time_or_a_number():
    # The passage shares "long" and "answer" with the question and says nothing of time: whatever the model's
    # probability, an answer to "how long" must state a time.
    evaluation = chunk(
        "## The metrics\n\nLong-form gold answers rarely occur word for word in any answer, so answer recall stays "
        "low however good the answers are.",
        "evaluation.md",
        chapter="Evaluating answers > The metrics",
    )
    refused = compose_quote_answer("How long does an answer take?", [(1, evaluation)])
    assert refused.refused and refused.parts[0].missing_value == "duration"
    assert "how long" in refused.reason
    slow = chunk(
        "## The first ingest is slow\n\nThe first ingest of a large folder takes minutes: expect about 18 chunks per "
        "second on two CPU cores.",
        "troubleshooting.md",
        chapter="Troubleshooting > The first ingest is slow",
    )
    answered = compose_quote_answer("How long does the first ingest take?", [(1, slow)])
    assert not answered.refused and answered.parts[0].missing_value == ""
    # "How many": a number in a sentence, or in the command quoted beside it, is what it asks for.
    workers = chunk(
        "## Workers\n\nThe server runs as many workers as you ask for; set them on the command line:\n\n"
        "```bash\norbit serve --workers 4\n```\n",
        "server.md",
        chapter="Server > Workers",
    )
    assert not compose_quote_answer("How many workers does the server run?", [(1, workers)]).refused
    none = chunk("## Workers\n\nThe server runs workers that share the index.", "server.md", chapter="Server > Workers")
    counted = compose_quote_answer("How many workers does the server run?", [(1, none)])
    assert counted.refused and counted.parts[0].missing_value == "number", counted.text
    # Only what is quoted counts: a number in a block the answer would not show is no answer.
    unrelated = none.model_copy(update={"text": none.text + "\n\n```bash\nexport LOG_LEVEL=3\n```\n"})
    assert compose_quote_answer("How many workers does the server run?", [(1, unrelated)]).refused

    def stated(question: str, text: str) -> bool:
        part = compose_quote_answer(question, [(1, chunk(text, "notes.md"))]).parts[0]
        return part.missing_value == ""

    # Whole numbers, not digits inside the question's own: "4" is new beside "2024", the second "3" beside "3-node".
    assert stated("How many major releases were there in 2024?", "In 2024 there were 4 major releases of the server.")
    assert not stated("How many major releases were there in 2024?", "In 2024 the releases of the server were major.")
    assert stated("How many replicas does a 3-node cluster keep?", "A 3-node cluster keeps 3 replicas of the index.")
    assert stated("How many phones can a user register?", "A user can register one phone at a time.")
    assert stated("How many times is a request retried?", "A failed request is retried twice before it fails.")
    assert stated("How long does a login take?", "A login takes about 200 milliseconds on the server.")
    # Answers without a unit: "how often" by an event, "how long" by "never".
    assert stated("How often is the index reloaded?", "The index is reloaded on every request to the server.")
    assert stated("How long is an API token valid?", "API tokens never expire unless you revoke them.")
    assert stated("We run two servers. How long is an API token valid?", "API tokens never expire unless revoked.")
    # "should" asks the same: how often, not whether. "Once", "2 US regions" state no number, no time.
    assert not stated("How often should I back up the index?", "Back up the index before you upgrade the server.")
    assert not stated("How many workers does the server run?", "Once the server starts, it runs its workers.")
    assert not stated("How long does a job take?", "Jobs run in 2 US regions, close to their data.")
    assert not stated("How long does the server wait?", "Once the server starts, it waits for its workers.")
    # "How much" of a machine's resources asks for an amount too; "how much" of anything else may be answered by
    # "free" or "no limit", and is left to the model.
    assert not stated("How much memory does the server need?", "The server keeps its sessions in memory only.")
    assert stated("How much memory does the server need?", "The index of 10M vectors needs about 20 GB of RAM.")
    assert stated("How much disk space does the journal take?", "The journal has no limit: it grows until pruned.")
    assert stated("How much does a licence cost?", "The server keeps its sessions in memory only.")
    # "space" on a page and CPU ("every core") need no number
    assert stated("How much space does the sidebar take?", "The sidebar takes a third of the page width.")
    assert stated("How much CPU does indexing use?", "Indexing uses every core of the CPU while it runs.")
    # Not for "how long" asking a length, nor for a page the quotes only point to.
    assert stated("How long can a question be?", "A question is at most five hundred characters long.")
    pointer = "See [Server limits](limits.md) for the number of workers the server runs."
    assert stated("How many workers does the server run?", pointer)


def test_a_question_whose_subject_the_corpus_never_mentions_is_refused():
    fitted = QuoteSettings().threshold
    # Only "configure" and the product's name meet the passage ("Citewise works without any configuration."):
    # "Kubernetes" is a name the question hinges on and the passage lacks, so it is refused whatever the model says.
    anchored = compose_quote_answer(KUBERNETES, [(1, SETUP)], threshold=0.0)
    assert anchored.refused and anchored.parts[0].missing_anchors == ["Kubernetes"]
    assert "Kubernetes" in anchored.reason
    # Written in lower case it names no anchor; the corpus statistics say its heaviest words are unknown to the docs,
    # which makes the evidence less likely to answer it than the same words in a corpus that knows them.
    lower = KUBERNETES.lower()
    unknown = compose_quote_answer(lower, [(1, SETUP)], threshold=fitted, corpus=CORPUS).parts[0]
    known = compose_quote_answer(lower, [(1, SETUP)], threshold=fitted, corpus=Corpus({})).parts[0]
    assert unknown.signals["unknown"] > 0.5 and known.signals["unknown"] == 0
    assert unknown.probability < known.probability


def test_url_in_the_question_is_held_by_a_web_address():
    from citewise.quote.compose import missing_anchors

    # "URL" names the kind of value asked for; the Somnia network page says "Faucet <https://…>" and never the
    # word. Anything else the question names must still be there.
    def missing(question: str, text: str) -> tuple[str, ...]:
        return missing_anchors(analyse(question), [(1, chunk(text, "network.md"))], {0}, None)

    faucet = "Testnet Faucet\n\n<https://testnet.example.network/>"
    assert missing("What is the faucet URL?", faucet) == ()
    assert missing("What is the faucet URL?", "The explorer lives at www.explorer-example.net.") == ()
    assert missing("Which URLs does the faucet accept?", faucet) == ()
    assert missing("What is the faucet URL?", "Request tokens from the faucet in the #dev-chat channel.") == ("URL",)
    assert missing("What is the Shannon faucet URL?", faucet) == ("Shannon",)
    # `URL` as code, or "the URL class", names a thing of the docs: a link doesn't hold it
    link = "Read [the ASGI spec](https://asgi.example/spec) first."
    assert missing("What does the `URL` class do?", link) == ("URL",)
    assert missing("What does the URL class do?", link) == ("URL",)
    answered = compose_quote_answer("What is the faucet URL?", [(1, chunk(faucet, "network.md"))], threshold=0.0)
    assert not answered.refused and "https://testnet.example.network/" in answered.text


def test_a_capitalised_common_word_is_a_name_the_passage_must_name():
    from citewise.quote.compose import missing_anchors

    corpus = Corpus({"word": 40, "document": 300})  # a tenth of the chunks say "word"

    def missing(question: str, *texts: str, corpus=corpus, filename="guide.md", **where) -> tuple[str, ...]:
        passages = [(i + 1, chunk(text, f"{i}/{filename}", **where)) for i, text in enumerate(texts)]
        return missing_anchors(analyse(question), passages, set(range(len(passages))), corpus)

    # "Does it support Word documents?" asks about Microsoft Word. A passage using "word" and "documents" in their
    # everyday sense does not name it: refused whatever the model says.
    word = "Does it support Word documents?"
    spelling = "A common English word is never corrected, so a question keeps the words of your documents it uses."
    refused = compose_quote_answer(word, [(1, chunk(spelling, "answers.md"))], corpus=corpus)
    assert refused.refused and refused.parts[0].missing_anchors == ["Word"]
    assert missing(word, "Word documents (`.docx`) are read with their headings and tables.") == ()
    assert missing(word, "Plain text, Markdown and WORD files are supported.") == ()
    assert missing(word, "Exports from Microsoft Word's save dialog are read too.") == ()
    # The same word singular or plural, capitalised or in capitals, names it; a word sharing a stem does not.
    for question, text in (
        ("How do I write a Policy?", "Policies decide who may read a document."),
        ("How do I set a Cookie?", "Cookies are signed with the secret key."),
        ("What is an Alias?", "Aliases point at another index."),
        ("Which characters may a Tag hold?", "Letters, digits and dashes: see TAGS."),
        ("Does it run on a Bus?", "Buses are supported."),
        ("How are Releases numbered?", "Each Release gets a date."),
    ):
        assert missing(question, text) == (), question
    assert missing("Does it work with Express?", "Expressions in templates are evaluated lazily.") == ("Express",)
    assert missing("Can I change my Plan?", "Planes are not supported.") == ("Plan",)
    assert missing(word, "The Wording of a question is kept.") == ("Word",)
    # A title or heading names a page's subject (a passage about "the series" under "Friends"); a title that only
    # repeats the file name ("Words.md" → "Words") names nothing.
    assert missing(word, "Every word of your docs is kept.", chapter="Formats > Word") == ()
    assert missing(word, "Every word of your docs is kept.", title="Word formats") == ()
    assert missing(word, "Every word of your docs is kept.", title="Words", filename="words.md") == ("Word",)
    # In code, a command the word starts counts, as a tool's name is typed; the word as an identifier does not.
    assert missing("Can I install it with Brew?", "On macOS, run `brew install orbitron`.") == ()
    assert missing("Can I install it with Brew?", "On macOS:\n\n```bash\n$ brew install orbitron\n```") == ()
    assert missing(word, "Set `max_words` to cap an answer, or pass `--words 50`.") == ("Word",)
    assert missing(word, "Each token has a `word` field.") == ("Word",)
    assert missing(word, "```python\nword = tokens[0]\n```") == ("Word",)
    # A ```` block may hold a ``` one: the prose after it is no code, though a wrapped line starts with the word.
    nested = "````markdown\n```bash\nls\n```\n````\n\nSpelling keeps every\nword as typed.\n\n```bash\nls\n```"
    assert missing(word, nested) == ("Word",)
    assert missing(word, "Spelling keeps every\nword as typed.") == ("Word",)
    # Fences pair as CommonMark pairs them: a fence closes on one of its own character, at least as long, with
    # nothing after it (spaces aside); an unclosed block runs to the passage's end; "```ls```" is inline code.
    assert missing(word, "```ls -l``` lists files. Spelling keeps every\nword as typed.") == ("Word",)
    assert missing(word, "```bash\nls\n``` \n\nSpelling keeps every\nword as typed.") == ("Word",)
    assert missing(word, "```\nls\n~~~\nword count --all\n```") == ()  # "~~~" closes no "```" block
    assert missing(word, "```\nls\n```python\nword count --all\n```") == ()  # nor does a fence with an info string
    assert missing("Can I install it with Brew?", "~~~\n$ brew install orbitron\n~~~") == ()
    assert missing("Can I install it with Brew?", "Run:\n\n```bash\nbrew install orbitron") == ()
    # A product named with a common word is the corpus's topic when many chunks hold it, as any product name is.
    flask, views = "Does Flask support async views?", "Views may be async functions since version 2.0."
    assert missing(flask, views, corpus=Corpus({"flask": 300})) == ()
    assert missing(flask, views, corpus=Corpus({"flask": 40})) == ("Flask",)
    # A name that is no common word is found in any case, and a common word written in lower case is no anchor.
    assert missing("Can it read Markdown files?", "markdown files are read as they are.") == ()
    assert analyse("Does it support word documents?").anchors == ()


def test_a_paraphrased_word_does_not_sink_an_otherwise_covered_question():
    # "network" is a word no chunk holds, yet one of six: it weighs more, not all.
    question = "Which network port does the Orbitron daemon listen on by default?"
    corpus = Corpus({"network": 0}, default=3)
    answer = compose_quote_answer(question, CHUNKS, threshold=QuoteSettings().threshold, corpus=corpus)
    assert not answer.refused and "7433" in answer.text


# -- code blocks ---------------------------------------------------------------------------------------------------

STALE = chunk(
    "## Deleted files still show up\n\n"
    "**Cause.** Deleted files stay in the index until you prune them.\n\n"
    "**Fix.**\n\n"
    "```bash\norbitron ingest docs/ --prune\n```\n",
    "troubleshooting.md",
    dense=0.6,
)
SEARCH_EXAMPLES = chunk(
    "## Searching\n\n"
    '```bash\norbitron search "How do I remove deleted files from the index?"\norbitron search "port"\n```\n',
    "searching.md",
    dense=0.62,
)


def test_the_command_right_after_a_quoted_sentence_is_quoted_with_it():
    answer = compose_quote_answer("How do I remove deleted files from the index?", [(1, SEARCH_EXAMPLES), (2, STALE)])
    assert not answer.refused, answer.reason
    assert "Deleted files stay in the index until you prune them. [2]" in answer.text
    assert "```bash\norbitron ingest docs/ --prune\n```\n[2]" in answer.text
    # A block from a passage the answer quotes no prose from stays out, however well it matches the question.
    assert "orbitron search" not in answer.text and answer.used == [2]


def test_how_do_i_gets_the_command_under_its_lead_sentence_rather_than_another_passage_s():
    from citewise.quote.compose import _code_block
    from citewise.quote.sentences import candidates

    redirect = chunk(
        "Alternatively you might want to redirect unauthenticated users to a different page.\n\n"
        "```python\n@requires('authenticated', redirect='homepage')\nasync def dashboard(request):\n    ...\n```\n",
        "redirects.md",
    )
    default = chunk(
        "By default 403 responses will be returned when permissions are not granted.\n\n"
        "```python\n@requires(['authenticated', 'admin'], status_code=404)\nasync def dashboard(request):\n"
        "    ...\n```\n",
        "authentication.md",
    )
    chunks = [(1, redirect), (2, default)]
    found = candidates(chunks, code=True)
    lead, _, other, block_403 = found
    question = analyse("How do I send users who aren't logged in to a login page instead of returning a 403?")
    # The answer leads with the redirect sentence and also quotes the 403 one, whose passage's block covers the
    # question better: the command under the lead sentence is the one quoted.
    block = _code_block([lead, other], [block_403], chunks, question)
    assert block is not None and "redirect='homepage'" in block.text
    # When the 403 sentence leads, its own block comes.
    assert _code_block([other, lead], [block_403], chunks, question) == block_403
    # A block worth quoting elsewhere in the lead sentence's passage comes before the other passage's, too.
    redirect_more = chunk(
        redirect.text + "\nWhen redirecting users, the page you redirect them to gets a `next` query param.\n\n"
        "```python\n@requires('authenticated', redirect='login')\nasync def admin(request):\n    ...\n```\n",
        "redirects.md",
    )
    chunks = [(1, redirect_more), (2, default)]
    found = candidates(chunks, code=True)
    lead, other = found[0], next(s for s in found if s.text.startswith("By default"))
    login_block = next(s for s in found if s.code and "redirect='login'" in s.text)
    block_403 = next(s for s in found if s.code and "status_code" in s.text)
    assert _code_block([lead, other], [block_403, login_block], chunks, question) == login_block


def test_a_block_after_a_sentence_about_something_else_is_not_attached():
    answer = compose_quote_answer(QUESTION, CHUNKS, max_sentences=4)
    assert "7433" in answer.text
    assert "apt-get" not in answer.text  # follows the port sentence, but installs the package


# -- readability: sentences that point back or point elsewhere -------------------------------------------------------

QUOTE_QUESTION = "What does quote mode do?"
GENERATION = chunk(
    "Table `[generation]` in `citewise.toml`; environment variables `CITEWISE_GENERATION__<NAME>`. They apply to\n"
    "language model calls, so quote mode ignores them.",
    "configuration.md",
    dense=0.56,
)
ANSWERING = chunk(
    "Which answerer writes the answers of `citewise ask` and the server. See\n"
    "[Asking questions](answers.md) for how quote mode and agent mode work.",
    "configuration.md",
    dense=0.55,
)
QUOTE_MODE = chunk(
    "Quote answers need no language model. It is the default: quote mode copies sentences verbatim, each followed "
    "by its citation.\n\n## Limits\n\nThey bound how long quote mode may search.",
    "answers.md",
    dense=0.45,
)
DEFAULT_MODE = "It is the default: quote mode copies sentences verbatim, each followed by its citation."


def test_a_sentence_pointing_back_at_an_unquoted_sentence_is_left_out():
    answer = compose_quote_answer(QUOTE_QUESTION, [(1, GENERATION), (2, ANSWERING), (3, QUOTE_MODE)])
    assert not answer.refused, answer.reason
    # "They" would refer to the settings table, which shares nothing with the question: not quoted alone, not paired.
    assert "They apply to" not in answer.text and "Table `[generation]`" not in answer.text
    # A heading stands between "They bound …" and any antecedent: left out too.
    assert "They bound" not in answer.text


def test_a_sentence_pointing_back_comes_right_after_its_relevant_predecessor():
    answer = compose_quote_answer(QUOTE_QUESTION, [(1, GENERATION), (2, ANSWERING), (3, QUOTE_MODE)])
    # "It is the default: quote mode …" is the best sentence; its predecessor shares "quote" with the question, so
    # it is quoted first, even though on its own it would fall below the relevance cutoff.
    assert answer.text == f"Quote answers need no language model. [3] {DEFAULT_MODE} [3]"
    for n, sentence in sentences_of(answer):  # still verbatim
        assert sentence in {1: GENERATION, 2: ANSWERING, 3: QUOTE_MODE}[n].text


def test_the_pair_is_only_taken_when_both_fit():
    two = compose_quote_answer(QUOTE_QUESTION, [(3, QUOTE_MODE)], max_sentences=2)
    assert two.text == f"Quote answers need no language model. [3] {DEFAULT_MODE} [3]"
    one = compose_quote_answer(QUOTE_QUESTION, [(3, QUOTE_MODE)], max_sentences=1)
    assert not one.refused and len(sentences_of(one)) == 1
    assert "They bound" not in one.text  # the best sentence that points back, not the first one left over


def test_navigation_sentences_are_dropped_when_other_sentences_exist():
    answer = compose_quote_answer(QUOTE_QUESTION, [(1, GENERATION), (2, ANSWERING), (3, QUOTE_MODE)])
    assert "See\n[Asking questions]" not in answer.text and 2 not in answer.used
    for style in (AnswerStyle.DEFAULT, AnswerStyle.STRUCTURED):
        structured = compose_quote_answer(QUOTE_QUESTION, [(2, ANSWERING), (3, QUOTE_MODE)], style=style)
        assert "[Asking questions]" not in structured.text, structured.text


def test_selection_never_turns_an_answer_into_a_refusal():
    # Only a pointer elsewhere matches the question: quoted rather than refused (the gates decide refusals).
    only_nav = compose_quote_answer(QUOTE_QUESTION, [(1, ANSWERING)])
    assert not only_nav.refused and "[Asking questions](answers.md)" in only_nav.text
    # Only a sentence pointing back at an off-topic one matches: quoted with what it points back to.
    only_dangling = compose_quote_answer(QUOTE_QUESTION, [(1, GENERATION)])
    assert not only_dangling.refused
    assert only_dangling.text == (
        "Table `[generation]` in `citewise.toml`; environment variables `CITEWISE_GENERATION__<NAME>`. [1] They "
        "apply to\nlanguage model calls, so quote mode ignores them. [1]"
    )
    alone = compose_quote_answer(QUOTE_QUESTION, [(1, GENERATION)], max_sentences=1)
    assert alone.text == "They apply to\nlanguage model calls, so quote mode ignores them. [1]"


CACHE = chunk(
    "Most stores tune for reads or for writes. The team built a cache that serves both. This keeps every Orbitron "
    "lookup between 15 and 100 nanoseconds.\n\nOrbitron stores its index in a tree. That makes each Orbitron lookup "
    "cheap.",
    "cache.md",
)


def test_the_best_sentence_holding_the_value_is_quoted_though_it_points_back_at_an_off_topic_one():
    """The sentence holding the value ("This keeps every Orbitron lookup between 15 and 100 nanoseconds") answers
    "how fast …" although "This" points back at a sentence sharing no word with the question: quoted after that
    sentence, in reading order, rather than passed over for a weaker pair that does ("That makes each … cheap")."""
    answer = compose_quote_answer("How fast is an Orbitron lookup?", [(1, CACHE)], max_sentences=2)
    assert answer.text == (
        "The team built a cache that serves both. [1] This keeps every Orbitron lookup between 15 and 100 "
        "nanoseconds. [1]"
    )
    assert answer.parts[0].signals["answer_type"] == 1.0  # the decision reads the sentence holding the value


CHAINED = chunk(
    "The team built a cache. It sits in front of the tree. This keeps every Orbitron lookup between 15 and 100 "
    "nanoseconds.\n\nOrbitron stores its index in a tree. That makes each Orbitron lookup cheap.",
    "cache.md",
)


def test_a_value_that_points_back_through_two_sentences_is_quoted_after_both_in_reading_order():
    answer = compose_quote_answer("How fast is an Orbitron lookup?", [(1, CHAINED)], max_sentences=3)
    assert answer.text == (
        "The team built a cache. [1] It sits in front of the tree. [1] This keeps every Orbitron lookup between 15 "
        "and 100 nanoseconds. [1]"
    )


BIOGRAPHY = chunk(
    "Dilip Joshi is an Indian film and television actor. He has appeared in a number of serials as well as films. "
    "He acts mostly in comedy and currently plays Jethalal Gada in Taarak Mehta Ka Ooltah Chashmah.",
    "joshi.md",
    dense=0.6,
)


def test_a_chain_of_pointing_back_is_quoted_from_its_start():
    answer = compose_quote_answer("Who plays Jethalal in Taarak Mehta Ka Ooltah Chashmah?", [(1, BIOGRAPHY)])
    assert not answer.refused, answer.reason
    assert answer.text == (
        "Dilip Joshi is an Indian film and television actor. [1] He has appeared in a number of serials as well as "
        "films. [1] He acts mostly in comedy and currently plays Jethalal Gada in Taarak Mehta Ka Ooltah Chashmah. [1]"
    )
    two = compose_quote_answer(
        "Who plays Jethalal in Taarak Mehta Ka Ooltah Chashmah?", [(1, BIOGRAPHY)], max_sentences=2
    )
    assert two.text.startswith("He has appeared") and two.text.count("[1]") == 2


@pytest.mark.parametrize(
    "text",
    [
        "They apply to language model calls.",
        "It answers with verbatim sentences.",
        "This means the index is rebuilt.",
        "These settings are read at start-up.",
        "That is the default.",
        "Such files are skipped.",
        "In that case the answer is refused.",
        "**It** never calls a model.",
        "Both modes share the index.",
        "Defaults to `9`.",  # an option's default, with the option before it
    ],
)
def test_pointing_back_is_recognised(text):
    assert is_anaphoric(text)


@pytest.mark.parametrize(
    "text",
    [
        "Quote mode needs no language model.",
        "There is one index per home.",
        "Items are ingested in order.",
        "Theirs-free wording: Thesis mode is off.",
        "Italy is not a setting.",
        "Thenceforth nothing changes.",
    ],
)
def test_ordinary_openings_are_not_pointing_back(text):
    assert not is_anaphoric(text)


@pytest.mark.parametrize(
    "text",
    [
        "See [Asking questions](answers.md) for how quote mode and agent mode work.",
        "See\n[Asking questions](answers.md) for how quote mode works.",
        "For more, see the configuration page.",
        "For details on every flag, see [the CLI reference](cli.md).",
        "Read [Ingesting](ingesting.md) to learn which formats are parsed.",
        "(See [The validator](#the-validator).)",
        "Refer to the troubleshooting page when ingest stops.",
    ],
)
def test_navigation_is_recognised(text):
    assert is_navigation(text)


@pytest.mark.parametrize(
    "text",
    [
        "Seeding the index takes a minute.",
        "Read the file with `cat` before ingesting it.",
        "For each chunk, the embedder computes a vector.",
        "Quote mode refuses unless the evidence is strong (see below).",
    ],
)
def test_content_sentences_are_not_navigation(text):
    assert not is_navigation(text)


@pytest.mark.parametrize(
    ("text", "about_the_page"),
    [
        ("This guide will teach you how to deploy a contract.", True),
        ("In this tutorial we'll build a token swap.", True),
        ("Congratulations! You have deployed your first contract.", True),
        ("Congratulations, you have successfully connected MetaMask.", True),
        ("You've successfully built a random number generator.", True),
        ("You’ve successfully integrated ConnectKit.", True),  # a typographic apostrophe, as many sites print it
        ("In this guide, you’ll learn how to verify a contract.", True),
        ("Run `orbitron deploy` to deploy the contract.", False),
        ("Deploying needs 0.1 ORB for gas, paid by the deploying account.", False),
        ("You have to set ORBITRON_KEY before you deploy.", False),
    ],
)
def test_a_pages_introduction_and_conclusion_are_told_from_its_content(text, about_the_page):
    assert is_introduction(text) is about_the_page


def test_the_tail_of_a_sentence_cut_by_the_chunk_overlap_is_not_quoted():
    text = (
        "keeps journal segments in the retention window for fourteen days. "
        "The retention window for journal segments is set with retention_days."
    )
    question = "How long does the retention window keep journal segments?"
    first = chunk(text, "retention.md")
    continuation = first.model_copy(update={"chunk_id": make_chunk_id(first.doc_id, 1), "chunk_index": 1})
    answer = compose_quote_answer(question, [(1, continuation)])
    assert not answer.refused
    assert "keeps journal segments" not in answer.text
    assert "retention_days" in answer.text
    # The same text as a document's first chunk is a real sentence, however it is cased.
    assert "keeps journal segments" in compose_quote_answer(question, [(1, first)]).text


USAGE = chunk(
    "## Usage\n\nIngest reads a folder of documents and indexes every supported file in it.\n\n"
    "| Field | Content |\n| --- | --- |\n| `module` | Top-level folder of an ingested document |\n\n"
    "```bash\n# Index a documentation folder\norbitron ingest docs/\n```\n",
    "ingesting.md",
    dense=0.55,
)
EXAMPLES = chunk(
    '## Searching\n\n```bash\norbitron search "How do I ingest a folder of documents?"\n```\n',
    "searching.md",
    dense=0.6,
)


def test_a_procedure_is_answered_with_its_command_not_a_table_row_or_a_search_example():
    answer = compose_quote_answer("How do I ingest a folder of documents?", [(1, EXAMPLES), (2, USAGE)])
    assert not answer.refused
    assert "orbitron ingest docs/" in answer.text
    assert "| `module` |" not in answer.text  # a table describes; it is no step
    assert "orbitron search" not in answer.text  # the question as a quoted argument answers nothing


SEPARATE = chunk(
    "## Separate indexes\n\nSeparate indexes for two products keep their chunks apart, so each product's answers "
    "quote its own docs. An index cannot mix embedding models.",
    "configuration.md",
    chapter="Configuration > Changing models",
)
RECIPE = chunk(
    "## Several independent indexes\n\n"
    "```bash\norbitron ingest product-a/docs --home ~/indexes/product-a\n"
    "orbitron ingest product-b/docs --home ~/indexes/product-b\n```\n",
    "recipes.md",
    dense=0.6,
    chapter="Recipes > Several independent indexes",
)


def test_how_do_i_gets_the_ranker_s_best_command_even_when_it_repeats_no_question_word():
    # The commands say `--home`, not "separate" or "products", so the block covers little of the question; it stands
    # in a passage of its own, after no quoted sentence. The ranker still places it near the top: for "how do I" the
    # command is the answer, so it is quoted beside the sentence that talks about the question.
    answer = compose_quote_answer("How do I keep separate indexes for two products?", [(1, SEPARATE), (2, RECIPE)])
    assert not answer.refused
    assert "Separate indexes for two products" in answer.text
    assert "--home ~/indexes/product-b" in answer.text
    # A question that asks what something is, not how to do it, is not handed the command.
    answer = compose_quote_answer("What are separate indexes for two products?", [(1, SEPARATE), (2, RECIPE)])
    assert "--home" not in answer.text
    # A program is no command: one holding none of the question's words says nothing about it.
    program = RECIPE.model_copy(
        update={
            "dense_score": 0.75,
            "score": 0.5,
            "text": "## Several independent indexes\n\n```python\n"
            + "".join(f"store_{i} = open_store('~/data/{i}')\n" for i in range(8))
            + "```\n",
        }
    )
    answer = compose_quote_answer("How do I keep separate indexes for two products?", [(1, SEPARATE), (2, program)])
    assert "open_store" not in answer.text, answer.text


@pytest.mark.parametrize(
    "methods",
    [
        "- **Methods.** A method an endpoint does not take is `405` with the `Allow` header.",
        # wrapped: the item's last sentence starts on a line of its own, under the marker's line
        "- **Methods.** Methods are checked first.\n  A method an endpoint does not take is `405` with the `Allow`.",
    ],
)
def test_the_command_is_not_introduced_by_the_last_item_of_a_list_about_other_things(methods):
    limits = chunk(
        "## Limits\n\n"
        "Orbitron bounds what one request may cost.\n\n"
        "- **Body size.** The JSON endpoints take at most 1 MB.\n"
        "- **Time.** A body not complete within 60 s is answered `408`.\n"
        f"{methods}\n\n"
        "```bash\nexport ORBITRON_SERVER__RATE_LIMIT_PER_MINUTE=120\n```\n",
        "server.md",
        chapter="Server > Limits",
    )
    other = chunk(
        "## Rate limits\n\nEach client may make a number of requests per minute; past it, requests get `429`.\n",
        "limits.md",
        chapter="Rate limits",
        dense=0.6,
    )
    answer = compose_quote_answer("How do I set the rate limit per minute?", [(1, limits), (2, other)])
    assert "RATE_LIMIT_PER_MINUTE=120" in answer.text
    assert "Methods" not in answer.text and "405" not in answer.text


def test_the_tail_of_a_sentence_the_chunk_overlap_cut_is_never_quoted_as_an_antecedent():
    # The chunk starts inside "Quote mode first reads what the question asks:"; the list item after it points back
    # ("its kind"), and its antecedent would be half a sentence.
    cut = chunk(
        "mode first reads what the question asks:\n\n"
        '- its **kind**: a definition, a procedure ("How do I change the port?") or a value;\n'
        "- its **subject**: what the question is about.\n",
        "answers.md",
        chapter="Answers > Quote mode",
    ).model_copy(update={"chunk_index": 1})
    port = chunk(
        "## Port in use\n\nStop the other process, or use another port:\n\n```bash\norbitron serve --port 8080\n```\n",
        "troubleshooting.md",
        chapter="Troubleshooting > Port in use",
        dense=0.6,
    )
    answer = compose_quote_answer("How do I change the port?", [(1, cut), (2, port)])
    assert "--port 8080" in answer.text
    assert "mode first reads" not in answer.text


def test_the_tail_of_a_sentence_the_chunk_overlap_cut_is_no_label_either():
    # "…the default port of the daemon" cut after its first words reads like a label over its value "7433".
    cut = chunk(
        "default port of the daemon\n\n7433\n\nThe journal lives under `/var/lib/orbitron`.\n",
        "reference.md",
        chapter="Reference",
    ).model_copy(update={"chunk_index": 1})
    daemon = chunk(
        "## Daemon\n\nThe Orbitron daemon listens on port 7433 unless told otherwise.\n",
        "daemon.md",
        chapter="Daemon",
        dense=0.6,
    )
    answer = compose_quote_answer("What is the default port of the daemon?", [(1, cut), (2, daemon)])
    assert "listens on port 7433" in answer.text
    assert "default port of the daemon" not in answer.text


def test_passages_of_page_furniture_alone_give_way_to_the_next_ones():
    # A scraped page's "Copy" button and breadcrumbs above its first heading make a passage that matches a question
    # by its title and headings and offers nothing to quote: quote mode reads the next passage instead.
    furniture = [
        chunk("Copy\n\n1. [Guides](/guides)\n2. [Widgets](/guides/widgets)\n", f"widgets{i}.md", chapter="Widgets")
        for i in range(5)
    ]
    widget = chunk(
        "## Widgets\n\nA widget is a small panel that shows one metric of the Orbitron daemon.\n",
        "widget.md",
        chapter="Widgets",
    )
    answer = compose_quote_answer("What is a widget?", [(i + 1, c) for i, c in enumerate([*furniture, widget])])
    assert answer.text == "A widget is a small panel that shows one metric of the Orbitron daemon. [6]"


def test_a_numbered_step_still_introduces_the_command_under_it():
    steps = chunk(
        "## Running\n\nOrbitron runs as a daemon.\n\n1. Open a terminal first.\n2. Then bring it up.\n\n"
        "```bash\norbitrond --serve --port 7433\n```\n",
        "run.md",
        chapter="Running",
    )
    answer = compose_quote_answer("How do I run the Orbitron daemon on port 7433?", [(1, steps)])
    assert "Then bring it up." in answer.text
    assert answer.text.index("Then bring it up.") < answer.text.index("orbitrond --serve")


def test_the_ranker_s_best_command_counts_only_when_it_ranks_among_the_first_candidates():
    # A block that clears the relative cut-off far down the ranking (a DAO page's `address public owner;` for "How do
    # I deploy a contract with Hardhat?") is no command worth quoting; ranked second, the same block is.
    from citewise.quote.compose import Scored, select
    from citewise.quote.sentences import candidates

    deploy = chunk(
        "Orbitron deploys smart contracts. It compiles them first. It checks the network next. It signs the "
        "transaction last. It prints the address at the end.\n\n```\naddress public owner;\n```\n",
        "deploy.md",
    )
    passages = [(1, deploy)]
    found = candidates(passages, code=True)
    prose = [s for s in found if not s.code]
    block = next(s for s in found if s.code)
    question = analyse("How do I deploy a smart contract with Orbitron?")

    def blocks_with_the_command_at(position: int):
        ranked = [Scored(0.9 - 0.05 * i, 0.5, s) for i, s in enumerate(prose)]
        ranked.insert(position, Scored(ranked[position - 1].relevance - 0.01, 0.0, block))
        return select(question, passages, ranked, 4, ranked=True)[2]

    assert blocks_with_the_command_at(1) == [block]
    assert blocks_with_the_command_at(3) == [block]  # fourth of four
    assert blocks_with_the_command_at(4) == []  # above the cut-off (0.74 of 0.9), fifth


def test_a_faq_answer_is_quoted_without_its_answer_label():
    faq = chunk(
        "## FAQ\n\nQ: How do I reset my password?\n\nA: Open Settings and click Reset password.\n\n"
        "**Q:** Can I change my username?\n\n**A:** No, usernames are permanent once chosen.\n",
        "faq.md",
        chapter="FAQ",
    )
    answer = compose_quote_answer("How do I reset my password?", [(1, faq)])
    assert answer.text.startswith("Open Settings and click Reset password. [1]")
    answer = compose_quote_answer("Can I change my username?", [(1, faq)])
    assert answer.text.startswith("No, usernames are permanent once chosen. [1]")
    assert "Q:" not in answer.text and "A:" not in answer.text

    def quoted(body: str) -> str:
        snapshots = chunk(f"## FAQ\n\nQ: Are ledger snapshots kept?\n\n{body}\n", "faq.md", chapter="FAQ")
        return compose_quote_answer("Are ledger snapshots kept or deleted?", [(1, snapshots)]).text

    assert quoted("A: **Yes**, pinned snapshots are kept.") == "**Yes**, pinned snapshots are kept. [1]"
    assert quoted("**A**: Pinning keeps a snapshot forever.") == "Pinning keeps a snapshot forever. [1]"
    # Cut, this one would end in an unmatched "**": it keeps its label.
    assert quoted("**A: No, snapshots are deleted.**") == "**A: No, snapshots are deleted.** [1]"
    # An answer line that points back ("It …") points to the question the reader asked: quoted without the "Q:" line.
    answer_line = "It deletes ledger snapshots after thirty days, unless they are pinned."
    assert quoted(f"A: {answer_line}") == f"{answer_line} [1]"
    # The sentence after the answer line still points back to it, label cut or not.
    assert quoted("A: Ledger snapshots are written nightly. They are deleted after thirty days unless pinned.") == (
        "Ledger snapshots are written nightly. [1] They are deleted after thirty days unless pinned. [1]"
    )


def test_a_line_inside_a_quoted_label_line_is_not_quoted_again():
    network = chunk(
        "## Network\n\nThe endpoints below serve the public network.\n\nRPC\n\n"
        "<https://rpc.orbitron.example/>\n\n[https://backup.orbitron.example/](https://backup.orbitron.example/)\n",
        "network.md",
    )
    answer = compose_quote_answer("which rpc url do i use", [(1, network)])
    assert not answer.refused
    assert answer.text.count("backup.orbitron.example/](") == 1


NETWORKS = chunk(
    "## Networks\n\nOrbitron runs two public networks.\n\n"
    "Network\n\nMainnet\n\nTestnet\n\n"
    "Network ID\n\n7433\n\n74330\n\n"
    "Explorer\n\n<https://explorer.orbitron.example>\n\n<https://test.orbitron.example>\n\n"
    "Symbol\n\nORB\n\ntORB\n\n"
    "RPC\n\n<https://rpc.orbitron.example>\n\n<https://rpc.test.orbitron.example>\n\n"
    "Faucet\n\n<https://faucet.orbitron.example>\n",
    "networks.md",
    chapter="Networks",
)


def test_a_row_of_a_flattened_table_is_quoted_under_its_header():
    # A table converted to text (one cell per line, as scraped docs sites leave them): "7433 / 74330" alone doesn't
    # say which network each ID belongs to.
    answer = compose_quote_answer("What is the mainnet network ID?", [(1, NETWORKS)])
    assert not answer.refused
    assert "| Network | Mainnet | Testnet |\n| --- | --- | --- |\n| Network ID | 7433 | 74330 |\n\n[1]" in answer.text
    sources = dict([(1, NETWORKS)])
    _, citations = ground(answer.text, sources)
    quoted = [NETWORKS.text[start:end] for start, end in citations[0].quote_spans]
    assert "Network ID\n\n7433\n\n74330" in quoted and "Network\n\nMainnet\n\nTestnet" in quoted


def test_only_rows_with_a_cell_under_every_header_get_it():
    from citewise.quote.sentences import candidates

    labels = {s.text.split("\n")[0]: s.header.split("\n")[0] for s in candidates([(1, NETWORKS)]) if s.label}
    assert labels["Network ID"] == labels["Explorer"] == "| Network | Mainnet | Testnet |"
    # the table goes on past a row with no value in it ("Symbol / ORB / tORB" is no label run of its own) ...
    assert labels["RPC"] == "| Network | Mainnet | Testnet |"
    # ... but a row that lost a cell can't say which column its value is in; and a header is no label
    assert labels["Faucet"] == "" and "Network" not in labels and "Testnet" not in labels


def test_a_row_without_values_is_no_header_where_the_chunking_cut_the_table():
    from citewise.quote.sentences import candidates

    # The passage begins inside the table: a value left from a row whose label is in the previous chunk, then a
    # row with no value in it. "Symbol / ORB / tORB" is a row, not the column names.
    cut = NETWORKS.text[NETWORKS.text.index("<https://test.orbitron") :]
    labels = [s for s in candidates([(1, chunk(cut, "networks.md"))]) if s.label]
    assert [s.text.split("\n")[0] for s in labels] == ["RPC", "Faucet"]
    assert all(s.header == "" for s in labels)


def test_a_bold_line_under_another_is_no_label_and_value():
    from citewise.quote.sentences import candidates

    text = (
        "DIA oracles provide price feeds on the testnet.\n\n"
        "**Oracle Details**\n\n**Contracts on Somnia**\n\nMode\n\nOn\n"
    )
    found = candidates([(1, chunk(text, "dia.md"))])
    labels = [s.rendered() for s in found if s.label]
    assert labels == ["Mode\n\nOn"]  # "on" is a value alone, not inside "Contracts on Somnia"
    # ... or with a few words about the setting beside it
    for value in ("Off (default)", "Enabled by default", "true, false", "(none)"):
        found = candidates([(1, chunk(f"Cache mode\n\n{value}\n", "cache.md"))])
        assert [s.rendered() for s in found if s.label] == [f"Cache mode\n\n{value}"], value


def test_label_runs_without_a_header_row_stay_plain():
    from citewise.quote.sentences import candidates

    text = "## Limits\n\nThe service has two limits.\n\nMax upload\n\n10 MB\n\n20 MB\n\nTimeout\n\n30 s\n\n60 s\n"
    # the paragraphs above the first run are a sentence and a heading, not column names
    labels = [s for s in candidates([(1, chunk(text, "limits.md"))]) if s.label]
    assert labels and all(s.header == "" for s in labels)
    assert labels[0].rendered() == "Max upload\n\n10 MB\n\n20 MB"


UPLOADS = chunk(
    "## Files\n\n"
    "`UploadFile` has the following `async` methods. They all call the corresponding file methods underneath.\n\n"
    "* `async write(data)`: Writes `data` (`bytes`) to the file.\n"
    "* `async read(size)`: Reads `size` (`int`) bytes of the file.\n"
    "* `async seek(offset)`: Goes to the byte position `offset` (`int`) in the file.\n"
    "* `async close()`: Closes the file.\n\n"
    "As all these methods are `async` methods, you need to await them.\n",
    "requests.md",
)
CONVERTORS = chunk(
    "By default this will capture characters up to the end of the path or the next `/`.\n\n"
    "You can use convertors to modify what is captured. The available convertors are:\n\n"
    "* `str` returns a string, and is the default.\n"
    "* `int` returns a Python integer.\n"
    "* `float` returns a Python float.\n\n"
    "Convertors are used by prefixing them with a colon.\n",
    "routing.md",
)


def test_a_sentence_that_announces_a_list_is_quoted_with_the_list():
    answer = compose_quote_answer("Which async methods does UploadFile provide?", [(1, UPLOADS)])
    assert not answer.refused, answer.reason
    lines = answer.text.splitlines()
    assert lines[0] == "`UploadFile` has the following `async` methods. [1]"
    assert lines[1:] == [
        "- `async write(data)`: Writes `data` (`bytes`) to the file. [1]",
        "- `async read(size)`: Reads `size` (`int`) bytes of the file. [1]",
        "- `async seek(offset)`: Goes to the byte position `offset` (`int`) in the file. [1]",
    ]  # as many items as `max_sentences` leaves room for, in order
    # "The available convertors are:" says nothing alone: for a question asking which, it comes with its items.
    answer = compose_quote_answer("Which convertors are available?", [(1, CONVERTORS)])
    assert "The available convertors are: [1]" in answer.text
    assert "- `str` returns a string, and is the default. [1]" in answer.text
    assert "- `float` returns a Python float. [1]" in answer.text


def test_a_list_announced_at_the_end_of_the_paragraph_comes_with_it_even_when_its_items_are_names():
    # The sentence that matches the question is not the one ending in ":", and the items are links with a name each,
    # too short to be candidates of their own: the list is still the answer to "which … can I use".
    graphql = chunk(
        "GraphQL support was removed in version 0.17.\n\n"
        "You can still use GraphQL with Orbitron via 3rd party libraries. These libraries all have guides to help "
        "you do just that:\n\n"
        "- [Ariadne](https://ariadne.example/orbitron)\n"
        "- [Strawberry](https://strawberry.example/orbitron)\n"
        "- [`tartiflette-asgi`](https://tartiflette.example/)\n",
        "graphql.md",
    )
    answer = compose_quote_answer("Which libraries can I use to add GraphQL to Orbitron?", [(1, graphql)])
    assert not answer.refused
    assert "These libraries all have guides to help you do just that:" in answer.text
    assert "[Ariadne](https://ariadne.example/orbitron)" in answer.text and "Strawberry" in answer.text
    # The same list in the second passage read: its sentences and items belong to that passage, quoted once each,
    # in reading order under the sentence that announces them.
    intro = chunk("Orbitron serves GraphQL through libraries you add to it.", "intro.md")
    question = "Which libraries can I use to add GraphQL to Orbitron?"
    text = compose_quote_answer(question, [(1, intro), (2, graphql)], max_sentences=6).text
    assert text.count("These libraries all have guides") == 1 and text.count("Ariadne") == 1
    lead = "via 3rd party libraries. [2] These libraries all have guides to help you do just that: [2]"
    assert text.index(lead) < text.index("- [Ariadne]") < text.index("- [Strawberry]") < text.index("tartiflette")


def test_the_best_candidate_announcing_a_list_comes_with_it_whatever_the_question_kind():
    # "Which middleware does …" (a mass noun) is neither a list nor a value question, but what its best sentence
    # announces is the answer; alone, "… by default:" would say nothing.
    middleware = chunk(
        "Every Orbitron application automatically includes two pieces of middleware by default:\n\n"
        "* `ServerErrorMiddleware` - Ensures that exceptions return a custom 500 page.\n"
        "* `ExceptionMiddleware` - Adds exception handlers for expected exceptions.\n\n"
        "Middleware is evaluated from top to bottom.\n",
        "middleware.md",
    )
    question = "Which middleware does every Orbitron application include automatically?"
    assert analyse(question).kind not in (QuestionKind.LIST, QuestionKind.PROCEDURE)
    answer = compose_quote_answer(question, [(1, middleware)], threshold=0.0)
    assert "`ServerErrorMiddleware`" in answer.text and "`ExceptionMiddleware`" in answer.text


def test_an_announced_list_never_takes_the_answer_past_max_sentences_nor_leaves_its_lead_in_alone():
    from citewise.quote.compose import _with_list
    from citewise.quote.sentences import candidates

    pair = [(1, CONVERTORS)]
    found = candidates(pair)
    first, second = found[0], found[1]
    lead = next(s for s in found if s.text == "The available convertors are:")
    later = next(s for s in found if s.text.startswith("Convertors are used"))
    # announced by the third of three chosen: one item fits under max_sentences 4
    out = _with_list([first, second, lead], pair, 4)
    assert len(out) == 4 and out[3].text.startswith("`str`")
    # no room at all: a lead-in ending in ":" is dropped rather than quoted alone
    assert _with_list([first, second, later, lead], pair, 4) == [first, second, later]
    # the paragraph announces the list in its last sentence: a sentence before it brings that sentence and the list,
    # and what was chosen below it makes room
    assert _with_list([first, second, later], pair, 4) == [first, second, lead, found[3]]
    assert found[3].text.startswith("`str`")
    # with room for one sentence only, the list's first item stands for the lead-in: never an empty answer
    assert [s.text for s in _with_list([lead], pair, 1)] == ["`str` returns a string, and is the default."]
    answer = compose_quote_answer("Which convertors are available?", [(1, CONVERTORS)], max_sentences=1)
    assert not answer.refused and answer.text.strip()
    # another list item chosen already does not stop the announced list from coming with its lead-in
    custom = chunk(
        "* Custom convertors available to every route are registered with `register_url_convertor`.\n", "c.md"
    )
    pair = [(1, CONVERTORS), (2, custom)]
    found = candidates(pair)
    lead = next(s for s in found if s.text == "The available convertors are:")
    item = next(s for s in found if s.slot == 1)
    out = _with_list([lead, item], pair, 4)
    assert [s.text.split()[0] for s in out] == ["The", "`str`", "`int`", "`float`"]  # the other item makes room


def test_a_list_is_only_the_one_right_under_the_sentence_that_announces_it():
    from citewise.quote.sentences import candidates, list_after

    text = "The available convertors are:\n\nSee the notes first.\n\n* `str` returns a string, and is the default.\n"
    pair = [(1, chunk(text, "routing.md"))]
    lead = candidates(pair)[0]
    assert list_after(lead, pair, 4) == []  # a paragraph between: that list is not the one announced
    pair = [(1, CONVERTORS)]
    lead = next(s for s in candidates(pair) if s.text == "The available convertors are:")
    assert [s.text.split()[0] for s in list_after(lead, pair, 4)] == ["`str`", "`int`", "`float`"]
    plain = next(s for s in candidates(pair) if s.text.startswith("By default"))
    assert list_after(plain, pair, 4) == []  # announces nothing
    # a list right under its line, with no blank line between
    pair = [(1, chunk("The backends are:\n* `sqlite` keeps one file.\n* `postgres` needs a server.\n", "b.md"))]
    assert [s.text for s in list_after(candidates(pair)[0], pair, 4)] == [
        "`sqlite` keeps one file.",
        "`postgres` needs a server.",
    ]
    # an item too long to quote whole gives its first sentence, and its other sentences are no items of their own
    long_item = " ".join(f"It also does thing number {n} for you." for n in range(1, 7))
    text = f"The backends are:\n\n* `sqlite` is the default. {long_item}\n* `postgres` needs a server.\n"
    pair = [(1, chunk(text, "b.md"))]
    assert [s.text for s in list_after(candidates(pair)[0], pair, 4)] == [
        "`sqlite` is the default.",
        "`postgres` needs a server.",
    ]
    # "the following" announces a list only at the end of its sentence
    text = "In the following section we describe how the cache works.\n\n* It keeps 100 entries.\n"
    pair = [(1, chunk(text, "cache.md"))]
    assert list_after(candidates(pair)[0], pair, 4) == []


def test_page_furniture_is_never_a_candidate_nor_a_label_s_value():
    from citewise.quote.sentences import candidates, is_date_stamp, is_furniture

    text = (
        "The unlock schedule releases tokens over a period of 48 months.\n\n"
        "Click on Send Tokens\n\n![](https://docs.example.org/~gitbook/image?url=x.png&width=768)\n\n"
        "![The token faucet page](https://docs.example.org/faucet.png)\n\n"
        "[PreviousGas Fees](/concepts/gas-fees)[NextGovernance](/concepts/governance)\n\n"
        "Last updated 2 months ago\n"
    )
    texts = [s.rendered() for s in candidates([(1, chunk(text, "unlocks.md"))])]
    assert texts[0] == "The unlock schedule releases tokens over a period of 48 months."
    assert not [t for t in texts if "![](" in t or "Last updated" in t or "Previous" in t]
    assert is_date_stamp("Last updated on Mar 3, 2024 by Ann") and is_date_stamp("**Last update:** 2024-05-01")
    assert not is_date_stamp("Last updated prices are pushed every hour.")
    # a field named "Last updated" is described, not stamped
    assert not is_date_stamp("Last updated: the time the record was last changed, in UTC.")
    assert not is_date_stamp("Last updated on the dashboard shows when the index was rebuilt.")
    assert is_furniture('![logo](https://example.org/logo.png "Logo")')  # a picture with its title


OPTIONS = chunk(
    "## Compression\n\nThe following arguments are supported:\n\n"
    "* `minimum_size` - Do not compress responses smaller than this size in bytes. Defaults to `500`.\n"
    "* `level` - The compression level, from 1 to 9. Defaults to `9`. Lower is faster.\n"
    "* `exclude` - Content types that are never compressed, such as images and archives, because compressing "
    "them again gains nothing and costs time on every request that asks for one of them. Defaults to a list. "
    "It can be extended with more types or replaced by any sequence of strings, and it is read once at start-up, "
    "so a change to it takes effect only when the application is started again by its process manager.\n",
    "compression.md",
    chapter="Compression",
)


def test_an_option_item_is_quoted_with_its_default():
    answer = compose_quote_answer("Below what size are responses not compressed by default?", [(1, OPTIONS)])
    assert not answer.refused
    assert "`minimum_size` - Do not compress responses smaller than this size in bytes. Defaults to `500`." in (
        answer.text
    )
    assert answer.text.count("Do not compress responses smaller") == 1  # the item, not the item and its sentence


def test_only_short_list_items_of_several_sentences_are_candidates_whole():
    from citewise.quote.sentences import candidates

    whole = [s.text for s in candidates([(1, OPTIONS)]) if s.step and s.index == -1]
    assert whole == [
        "`minimum_size` - Do not compress responses smaller than this size in bytes. Defaults to `500`.",
        "`level` - The compression level, from 1 to 9. Defaults to `9`. Lower is faster.",
    ]  # the third item is over 60 words long: its sentences stay candidates one by one


def test_the_steps_after_a_whole_item_are_not_quoted_twice():
    steps = chunk(
        "## Deploy\n\n1. Build the image. Tag it with the release number.\n"
        "2. Push the image to the registry. Use the `--all-tags` flag.\n"
        "3. Restart the service so it picks up the new image.\n",
        "deploy.md",
        chapter="Deploy",
    )
    answer = compose_quote_answer("How do I build the image?", [(1, steps)], max_sentences=6)
    assert not answer.refused
    for line in ("Build the image.", "Push the image to the registry.", "Restart the service"):
        assert answer.text.count(line) == 1, answer.text


def test_an_item_quoted_whole_is_not_quoted_again_as_the_lead_in_of_its_code_block():
    gzip = chunk(
        "## GZip\n\nThe middleware takes one argument:\n\n"
        "* `minimum_size` - Do not compress responses smaller than this size in bytes. Defaults to `500`.\n\n"
        "```python\napp.add_middleware(GZipMiddleware, minimum_size=1000)\n```\n",
        "gzip.md",
        chapter="GZip",
    )
    for question in ("Below what size are responses not compressed by default?", "What size is not compressed?"):
        answer = compose_quote_answer(question, [(1, gzip)])
        assert answer.text.count("Defaults to `500`.") == 1, answer.text
        structured = compose_quote_answer(question, [(1, gzip)], style=AnswerStyle.STRUCTURED)
        assert structured.text.count("Defaults to `500`.") == 1, structured.text  # not again as "Why It Matters"


def test_a_later_step_chosen_whole_is_not_quoted_again_sentence_by_sentence():
    deploy = chunk(
        "## Deploy\n\nTo deploy a release:\n\n1. Build the release image with the build command.\n"
        "2. Push the image to the registry now.\n"
        "3. Restart the release service on every node. Wait until the release health check passes.\n"
        "4. Check the logs for errors afterwards.\n",
        "deploy.md",
        chapter="Deploy",
    )
    for limit in (4, 6):
        question = "How do I build the release image and restart the release service?"
        answer = compose_quote_answer(question, [(1, deploy)], max_sentences=limit)
        assert answer.text.count("Wait until the release health check passes.") == 1, answer.text
        assert answer.text.count("Build the release image") == 1, answer.text


def test_a_corpus_wide_word_inside_a_longer_name_is_not_required():
    from citewise.quote.compose import missing_anchors

    templates = chunk(
        "## Context processors\n\nA context processor returns a dictionary merged into the Jinja2 template context.",
        "templates.md",
        chapter="Templates > Context processors",
    )
    question = analyse("What is a context processor in Starlette's Jinja2 templates?")
    assert question.anchors == ("Starlette's Jinja2",)
    about_starlette = Corpus({stem("Starlette"): 300})  # every other chunk names the product
    assert missing_anchors(question, [(1, templates)], {0}, about_starlette) == ()
    assert missing_anchors(question, [(1, templates)], {0}, Corpus({stem("Starlette"): 1})) == ("Starlette's Jinja2",)


PLUGINS = [
    (
        1,
        chunk(
            "[GitHub](https://github.com/example/lambdactl)\n\nServerless adapter that runs Orbitron on AWS Lambda.",
            "plugins.md",
            chapter="Plugins > Lambdactl",
        ),
    ),
    (
        2,
        chunk(
            "Send your API token in the `X-Orbitron-Token` header. Orbitron runs the workers as separate processes.",
            "auth.md",
            dense=0.5,
            chapter="Security > Authentication",
        ),
    ),
]
PLUGIN_CORPUS = Corpus({"lambdactl": 1, "authentication": 1})


def test_a_plugin_is_named_by_its_section_when_the_question_asks_for_a_name():
    # A page of plugins gives each a heading and a line about it: the line alone doesn't say which plugin it is.
    answer = compose_quote_answer("Which package runs Orbitron on AWS Lambda?", PLUGINS, corpus=PLUGIN_CORPUS)
    assert not answer.refused
    assert answer.text.startswith("**Lambdactl**: Serverless adapter that runs Orbitron on AWS Lambda. [1]")
    _, citations = ground(answer.text, dict(PLUGINS))
    source = PLUGINS[0][1].text
    assert [source[a:b] for a, b in citations[0].quote_spans] == [
        "Serverless adapter that runs Orbitron on AWS Lambda."
    ]
    named = compose_quote_answer(
        "What is the name of the package that runs Orbitron on AWS Lambda?", PLUGINS, corpus=PLUGIN_CORPUS
    )
    assert named.text.startswith("**Lambdactl**: ")


def test_a_section_name_is_not_quoted_where_it_adds_nothing():
    # the question asks for no name
    answer = compose_quote_answer("How does Orbitron run on AWS Lambda?", PLUGINS, corpus=PLUGIN_CORPUS)
    assert "**Lambdactl**" not in answer.text
    # a sentence that states the value asked for is the answer as it is; and a name most of the corpus holds is a
    # topic, not a thing's name
    for corpus in (PLUGIN_CORPUS, Corpus({"lambdactl": 1})):
        answer = compose_quote_answer("Which header carries the API token?", PLUGINS, corpus=corpus)
        assert "Send your API token in the `X-Orbitron-Token` header." in answer.text
        assert "**Authentication**" not in answer.text
    answer = compose_quote_answer("Which package runs Orbitron on AWS Lambda?", PLUGINS, corpus=Corpus({}))
    assert "**Lambdactl**" not in answer.text


def test_value_less_rows_between_the_header_and_the_first_row_are_climbed_over():
    from citewise.quote.sentences import candidates

    text = (
        "Two networks.\n\nNetwork\n\nMainnet\n\nTestnet\n\nName\n\nOrbitron\n\nOrbitron Test\n\n"
        "Symbol\n\nORB\n\ntORB\n\nNetwork ID\n\n7433\n\n74330\n\nRPC\n\n<https://a.example>\n\n<https://b.example>\n"
    )
    labels = {s.text.split("\n")[0]: s.header.split("\n")[0] for s in candidates([(1, chunk(text, "n.md"))]) if s.label}
    assert labels == {"Network ID": "| Network | Mainnet | Testnet |", "RPC": "| Network | Mainnet | Testnet |"}


def test_a_short_row_is_grounded_and_a_label_line_is_one_key_point():
    fees = chunk(
        "## Fees\n\nFees per network.\n\nFee\n\nMainnet\n\nTestnet\n\nGas\n\n1\n\n2\n\nStorage\n\n3\n\n4\n", "fees.md"
    )
    answer = compose_quote_answer("What is the mainnet gas fee?", [(1, fees)])
    assert "| Fee | Mainnet | Testnet |\n| --- | --- | --- |\n| Gas | 1 | 2 |\n\n[1]" in answer.text
    _, citations = ground(answer.text, {1: fees})
    assert [fees.text[a:b] for a, b in citations[0].quote_spans] == ["Fee\n\nMainnet\n\nTestnet", "Gas\n\n1\n\n2"]
    assert citations[0].snippet.startswith("Gas 1 2")  # the row, not its header
    structured = compose_quote_answer("What is the mainnet gas fee?", [(1, fees)], style=AnswerStyle.STRUCTURED)
    assert "- | Gas | 1 | 2 | [1]" in structured.text


def test_a_section_name_with_markup_inside_is_no_title():
    plugins = [(1, chunk(PLUGINS[0][1].text, "plugins.md", chapter="Plugins > `lambdactl` adapter"))]
    answer = compose_quote_answer("Which package runs Orbitron on AWS Lambda?", plugins, corpus=PLUGIN_CORPUS)
    assert answer.text.startswith("Serverless adapter that runs Orbitron on AWS Lambda. [1]")


def test_parts_answered_by_the_same_sentences_quote_them_once():
    engine = chunk(
        "# Engine\n\nOrbitron's engine is a journal-backed scheduler written in Rust. "
        "It is fast: it schedules jobs in about 40 microseconds and replays the journal after a crash.",
        "engine.md",
        chapter="Engine",
    )
    from citewise.quote import split_parts

    parts = split_parts("What is the Orbitron engine and how fast is it?")
    assert len(parts) == 2
    settings = QuoteSettings(max_sentences=4, threshold=0.0)
    answer = quote_answer([Part(analyse(p), [(1, engine)]) for p in parts], settings)
    assert not answer.refused and not any(p.refused for p in answer.parts)
    # the second part quotes what else answers it ("It is fast …" right after the sentence it points back to)
    assert answer.text.count("It is fast: it schedules jobs in about 40 microseconds") == 1, answer.text
    assert answer.text.count("journal-backed scheduler written in Rust") == 1, answer.text


def test_a_later_part_lists_the_rows_an_earlier_part_did_not_quote():
    wallets = chunk(
        "## Wallets\n\n| Wallet | Supported | Notes |\n| --- | --- | --- |\n"
        "| MetaMask wallet | yes | browser extension wallet |\n| Ledger wallet | yes | hardware wallet |\n"
        "| Phantom wallet | no | Solana wallet |\n",
        "wallets.md",
        chapter="Wallets",
    )
    parts = ["Is the Ledger wallet supported?", "Which wallets are supported?"]
    answer = quote_answer([Part(analyse(p), [(1, wallets)]) for p in parts], QuoteSettings(threshold=0.0))
    # the second part's whole table would repeat the Ledger row: its other rows are quoted instead, not nothing
    assert answer.text.count("| Ledger wallet |") == 1
    assert "| MetaMask wallet |" in answer.text and "| Phantom wallet |" in answer.text


def test_a_sentence_pointing_back_follows_only_the_quote_right_above_it():
    engine = chunk(
        "# Engine\n\nOrbitron's engine is a journal-backed scheduler written in Rust. It is fast: it schedules jobs "
        "in about 40 microseconds.\n\n## Journal\n\nThe journal is an append-only log of job events kept on disk.",
        "engine.md",
        chapter="Engine",
    )
    parts = ["What is the Orbitron engine?", "What is the journal?", "How fast is the Orbitron engine?"]
    answer = quote_answer(
        [Part(analyse(p), [(1, engine)]) for p in parts], QuoteSettings(max_sentences=6, threshold=0.0)
    )
    # not right under the journal sentence, where "It" would read as the journal: after what it points back to,
    # quoted again
    assert answer.text.endswith("written in Rust. [1] It is fast: it schedules jobs in about 40 microseconds. [1]")


def test_structured_parts_do_not_repeat_the_why_sentence():
    from citewise.quote import split_parts

    engine = chunk(
        "# Engine\n\nOrbitron's engine is a journal-backed scheduler written in Rust. It is fast: it schedules jobs "
        "in about 40 microseconds and replays the journal after a crash.",
        "engine.md",
        chapter="Engine",
    )
    parts = split_parts("What is the Orbitron engine and how fast is it?")
    answer = quote_answer(
        [Part(analyse(p), [(1, engine)]) for p in parts],
        QuoteSettings(max_sentences=4, threshold=0.0),
        style=AnswerStyle.STRUCTURED,
    )
    assert answer.text.count("It is fast: it schedules jobs") == 1, answer.text
    assert answer.text.count("## Engine") == 1  # the second part has nothing new to quote


def test_what_is_x_reads_the_passage_defining_x_although_it_was_found_below_the_ones_read():
    # The search found five passages that mention agent mode before the one that defines it; quote mode reads five.
    mentions = [
        chunk(
            f"The limits bound agent mode; setting {i} applies to quote mode too.",
            f"settings-{i}.md",
            dense=0.8 - i / 100,
            score=0.5 - i / 100,
        )
        for i in range(5)
    ]
    definition = chunk(
        "**Agent mode** (`ORBIT_LLM` set to a model) lets a language model run a bounded loop: it may search again "
        "and writes the answer itself.",
        "answers.md",
        dense=0.6,
        score=0.2,
    )
    chunks = [(n, c) for n, c in enumerate([*mentions, definition], start=1)]
    answer = compose_quote_answer("What is agent mode?", chunks)
    assert answer.text.startswith("**Agent mode** (`ORBIT_LLM` set to a model) lets a language model"), answer.text
    assert answer.parts[0].read[-1] == definition.chunk_id  # in place of the fifth passage
    # A question of another kind reads the first five, as before.
    answer = compose_quote_answer("Which settings apply to agent mode?", chunks)
    assert definition.chunk_id not in answer.parts[0].read
    # A section headed by the subject is about it: nothing is swapped in, least of all what the subject is set to.
    section = mentions[4].model_copy(
        update={"text": "In agent mode, a language model runs a bounded loop.", "chapter": "Modes > Agent mode"}
    )
    setting = definition.model_copy(update={"text": "Agent mode is off by default in every new install."})
    chunks = [(n, c) for n, c in enumerate([*mentions[:4], section, setting], start=1)]
    answer = compose_quote_answer("What is agent mode?", chunks)
    assert setting.chunk_id not in answer.parts[0].read and "off by default" not in answer.text
    chunks = [(n, c) for n, c in enumerate([*mentions, setting], start=1)]
    assert setting.chunk_id not in compose_quote_answer("What is agent mode?", chunks).parts[0].read
    # A state named later in a definition leaves it one.
    tools = definition.model_copy(
        update={"text": "**Agent mode** lets a language model run tools, which are disabled in quote mode."}
    )
    chunks = [(n, c) for n, c in enumerate([*mentions, tools], start=1)]
    assert tools.chunk_id in compose_quote_answer("What is agent mode?", chunks).parts[0].read


def test_a_list_question_gets_its_sections_table_although_a_prose_sentence_matches_better():
    # One section cut into two passages: the table, whose rows never say "format" or "supported" (the heading
    # does), and a prose sentence that holds both words.
    prose = chunk(
        "Files must be UTF-8. Any other extension fails with `unsupported format`.",
        "formats.md",
        chapter="Importing > Supported formats",
        score=0.4,
        dense=0.8,
    )
    table = chunk(
        "| Kind | Extensions |\n| --- | --- |\n| Markdown | `.md` |\n| Orbit plan | `.orb` |\n"
        "| Plain text | `.txt` |\n",
        "formats.md",
        chapter="Importing > Supported formats",
        score=0.3,
    ).model_copy(update={"chunk_id": make_chunk_id(make_doc_id("formats.md"), 1), "chunk_index": 1})
    chunks = [(1, prose), (2, table)]
    listed = quote_answer([Part(analyse("Which formats are supported?"), chunks)], QuoteSettings(threshold=0.0))
    assert not listed.refused
    assert listed.text.startswith("| Kind | Extensions |"), listed.text
    assert "| Orbit plan | `.orb` |" in listed.text and "| Plain text | `.txt` |" in listed.text

    # not for a question of another kind, nor when the section's headings don't hold the question
    other = quote_answer(
        [Part(analyse("What happens to a file with another extension?"), chunks)], QuoteSettings(threshold=0.0)
    )
    assert not other.text.startswith("| Kind |"), other.text
    elsewhere = [
        (1, prose.model_copy(update={"chapter": "Importing > Encoding"})),
        (2, table.model_copy(update={"chapter": "Importing > Kinds"})),
    ]
    unlisted = quote_answer([Part(analyse("Which formats are supported?"), elsewhere)], QuoteSettings(threshold=0.0))
    assert not unlisted.text.startswith("| Kind |"), unlisted.text


def test_how_often_is_answered_by_the_interval_not_by_a_block_or_every_replica():
    # "every" alone is no interval ("shared by every replica"); `30m`, `6h`, `1d` are. A code block that states no
    # interval doesn't say how often, however many of the question's words it holds.
    state = chunk(
        "## Where the state lives\n\n```text\n.orbit/\n  sources.sqlite3   each source's declaration and last sync\n"
        "  git/NAME.git      the mirror of a Git source\n```\n\n"
        "With a server database the same source state is shared by every replica and worker.\n",
        "sources.md",
        chapter="Sources > Where the state lives",
        dense=0.8,
        score=0.5,
    )
    options = chunk(
        "| Option | Applies to | Meaning |\n| --- | --- | --- |\n"
        "| `--every` | all | How often the server syncs the source: `30m`, `6h`, `1d`, `1h30m`. |\n"
        "| `--root` | Git | Folder inside the repository to read. |\n",
        "sources.md",
        chapter="Sources > Commands",
        dense=0.6,
        score=0.3,
    ).model_copy(update={"chunk_id": make_chunk_id(make_doc_id("sources.md"), 1), "chunk_index": 1})
    answer = compose_quote_answer("How often does a Git source sync?", [(1, state), (2, options)])
    assert answer.text.startswith("| Option | Applies to | Meaning |\n| --- | --- | --- |\n| `--every` |"), answer.text
    assert "sources.sqlite3" not in answer.text
    # A unit in a setting's name states an interval: that block stays.
    polling = chunk(
        "## Polling\n\nThe server polls each source on its own schedule.\n\n"
        "```toml\n[sync]\nserver_poll_interval_seconds = 21600\n```\n",
        "config.md",
        chapter="Configuration > Polling",
    )
    assert (
        "server_poll_interval_seconds = 21600"
        in compose_quote_answer("How often does the server poll?", [(1, polling)]).text
    )
    # Nor does "every" alone say how often: the decision reads no interval in the sentence.
    replicas = compose_quote_answer("How often is the source state shared?", [(1, state)])
    assert replicas.parts[0].signals["answer_type"] == -1.0, replicas.text
    assert replicas.refused and replicas.parts[0].missing_value == "duration"


def test_a_list_question_gets_the_table_its_headings_name_not_the_best_rows_table():
    # The options table's `--glob` row says "file" and "supported types" and ranks first, but the table the
    # question asks for is the one under "Supported file types", whose rows name no word of the question.
    usage = chunk(
        "| Option | Default | Meaning |\n| --- | --- | --- |\n| `PATH...` | required | Files or folders to ingest |\n"
        "| `--glob PATTERN` | the supported types | File pattern used when a folder is given |\n"
        "| `--prune` | off | Remove documents whose files are gone |\n",
        "ingesting.md",
        chapter="Ingesting documents > Usage",
        score=0.5,
        dense=0.8,
    )
    types = chunk(
        "| Type | Extensions |\n| --- | --- |\n| Markdown | `.md` |\n| Orbit plan | `.orb` |\n| PDF | `.pdf` |\n",
        "ingesting.md",
        chapter="Ingesting documents > Supported file types",
        score=0.3,
    ).model_copy(update={"chunk_id": make_chunk_id(make_doc_id("ingesting.md"), 1), "chunk_index": 1})
    listed = compose_quote_answer("What file types can I ingest?", [(1, usage), (2, types)])
    assert listed.text.startswith("| Type | Extensions |"), listed.text
    assert "| Orbit plan | `.orb` |" in listed.text

    # A named table too long to quote whole gives way: here to the table of the best candidate's section.
    many = types.model_copy(
        update={
            "text": "| Type | Extensions |\n| --- | --- |\n" + "".join(f"| Kind {i} | `.k{i}` |\n" for i in range(13))
        }
    )
    formats = chunk(
        "Orbit reads Markdown and PDF file types when you ingest a folder.\n\n"
        "| Format | Extension |\n| --- | --- |\n| Markdown | `.md` |\n| PDF | `.pdf` |\n",
        "quickstart.md",
        chapter="Quickstart > Formats",
        dense=0.85,
        score=0.6,
    )
    listed = compose_quote_answer("What file types can I ingest?", [(1, formats), (2, usage), (3, many)])
    assert "| Format | Extension |\n| --- | --- |\n| Markdown | `.md` |\n| PDF | `.pdf` |" in listed.text, listed.text


@pytest.mark.parametrize(
    ("text", "subject", "defining"),
    [
        ("Somnia is an EVM-compatible Layer 1 blockchain.", "Somnia", True),
        ("IceDB: a database that reads in 15-100 nanoseconds.", "IceDB", True),
        ("**Quote mode** (the default, `CITEWISE_LLM=extractive`) needs no language model.", "quote mode", True),
        ("__Agent mode__ lets a language model run a bounded loop.", "agent mode", True),
        # a passive with its agent says who did something, not what the subject is
        ("Somnia is supported by [Improbable](https://improbable.io) and MSquared.", "Somnia", False),
        ("The library is maintained by volunteers.", "library", False),
        ("IceDB is built by the Somnia team.", "IceDB", False),
        ("Starlette is developed and maintained by Encode.", "Starlette", False),
        ("IceDB is also supported by the team.", "IceDB", False),
        # ... while a passive that says what the subject is still defines it
        ("A job is defined by a YAML file.", "job", True),
        ("A job is represented by a row in the jobs table.", "job", True),
        ("Kafka is a platform developed by LinkedIn for event streams.", "Kafka", True),
        # bold that is a label, a bare bold line above a paragraph, or one name of a list defines nothing
        ("**Note:** quote mode is fast.", "quote mode", False),
        ("**Quote mode**", "quote mode", False),
        ("**Quote mode**\nQuote mode answers with verbatim sentences.", "quote mode", False),
        ("**Quote mode** and **agent mode** both cite their sources.", "quote mode", False),
        ("**Quote modes** need no model.", "quote mode", True),
        ("**`quote`** needs no model.", "quote", True),
    ],
)
def test_a_definition_is_told_from_a_sentence_that_only_names_its_subject(text, subject, defining):
    assert defines(text, subject) is defining


def test_what_does_x_do_quotes_the_lead_in_that_says_what_x_does():
    # The section's sentence saying what the command does ends in ":" above a table. A lead-in alone says nothing
    # for most questions, but for "what does X do?" this one is the answer.
    doctor = chunk(
        "```text\norbitron doctor [--repair] [--json]\n```\n\n"
        "`orbitron doctor` reads the journal and the catalogue and reports where they disagree:\n\n"
        "| Problem | What it means |\n| --- | --- |\n| `orphan_rows` | Rows no catalogue entry knows |\n",
        "operations.md",
        dense=0.6,
        chapter="Operations > Checking a node (orbitron doctor)",
    )
    result = compose_quote_answer("What does orbitron doctor do?", [(1, doctor)], threshold=0.0)
    assert "reads the journal and the catalogue and reports where they disagree:" in result.text
    # Another question's lead-in still comes only with what it introduces.
    result = compose_quote_answer("Where do the journal and the catalogue disagree?", [(1, doctor)], threshold=0.0)
    assert "reports where they disagree:" not in result.text


@pytest.mark.parametrize(
    ("text", "describing"),
    [
        ("`orbitron doctor` reads the journal and reports where it disagrees:", True),
        ("Orbitron doctor (the checker) then repairs what it can:", True),
        ("The orbitron doctor is a checker:", True),
        ("orbitron doctor process runs as root:", False),  # "process" is no verb
        ("orbitron doctor class:", False),
        ("Run orbitron doctor like this:", False),
        # a plural noun, alone or before a verb, is no verb
        ("Orbitron doctor flags:", False),
        ("Orbitron doctor errors include:", False),
        ("The orbitron doctor keys are listed below:", False),
    ],
)
def test_a_lead_in_describes_its_subject_when_it_opens_with_it_and_a_verb(text, describing):
    from citewise.quote.sentences import describes

    assert describes(text, "orbitron doctor") is describing


def test_what_is_x_leads_with_the_sentence_that_introduces_x_in_bold():
    modes = chunk(
        "**Quote mode** (the default, `CITEWISE_LLM=extractive`) needs no language model. It answers with verbatim "
        "sentences from the best passages, each followed by its citation.",
        "answers.md",
        dense=0.55,
        chapter="Asking questions > Two answerers",
    )
    threshold = chunk(
        "Quote mode answers when its model finds the probability that the quoted evidence answers the question at "
        "least `quote.threshold`. A lower value answers more questions.",
        "configuration.md",
        dense=0.62,
        chapter="Configuration > Quote mode: answer more, or refuse more",
    )
    result = compose_quote_answer("What is quote mode?", [(1, threshold), (2, modes)])
    assert sentences_of(result)[0] == (
        2,
        "**Quote mode** (the default, `CITEWISE_LLM=extractive`) needs no language model.",
    )


def test_list_items_are_no_label_and_values():
    # Short items of a nested list ("1. verifies the request," / "2. stores the 3 words,") read like a label over
    # its values, as does a line over a short list ("npm or yarn" / "* Hardhat"): each item is quoted as itself.
    from citewise.quote.sentences import candidates

    nested = chunk(
        "3. When the randomness is ready, the wrapper calls `fulfillRandomWords`, the contract:\n\n"
        "   1. verifies the request,\n\n   2. stores the 3 words,\n\n   3. toggles `fulfilled = true`,\n\n"
        "   4. emits RandomNumberFulfilled.\n",
        "vrf.md",
    )
    tools = chunk("You need:\n\nnpm or yarn\n\n* Hardhat\n\n* A `.env` file with the RPC URLs\n", "fork.md")
    for passage in (nested, tools):
        found = candidates([(1, passage)])
        assert not [s.text for s in found if s.label]


def test_a_sentence_of_an_emphasised_paragraph_is_quoted_without_a_stray_marker():
    # A bold or italic paragraph of several sentences: the first opens the emphasis, the last closes it; quoted
    # alone, each would show a "**" or "_" that nothing closes.
    notice = chunk(
        "## Test tokens\n\n"
        "**Developers who deploy contracts on the testnet need test tokens, tORB. Join the Discord and ask in the "
        "#dev-chat channel for test tokens.**\n\n"
        "_Forking copies the state of a live network at a block. It runs on your own machine._\n",
        "tokens.md",
        chapter="Test tokens",
    )
    answer = compose_quote_answer("Where do I ask for test tokens?", [(1, notice)])
    assert "Join the Discord and ask in the #dev-chat channel for test tokens. [1]" in answer.text
    assert "**" not in answer.text
    answer = compose_quote_answer("What does forking copy?", [(1, notice)])
    assert "Forking copies the state of a live network at a block." in answer.text
    assert "_Forking" not in answer.text


@pytest.mark.parametrize(
    "text",
    [
        "**SDK**s let you call the API. They are typed.",  # bold closes inside the word
        "_id is the primary key. It is unique.",
        "*.txt files are ignored. The rest are read.",
        "**kwargs are forwarded. The rest are kept.",
        "Everything is read. Except what matches build/**",
    ],
)
def test_a_marker_that_is_text_or_closes_in_its_sentence_stays(text):
    from citewise.quote.sentences import candidates

    quoted = [s.text for s in candidates([(1, chunk(text, "page.md"))])]
    assert quoted == [text[a:b] for a, b in split_sentences(text)]


def test_a_long_first_item_in_bold_still_starts_the_list_a_sentence_announces():
    from citewise.quote.sentences import candidates, list_after

    steps = chunk(
        "The steps are:\n\n1. **Install the CLI with the package manager of your system. Then check that it runs. "
        "Then log in with your account token. Then pick a region for the cluster. Then wait a minute.**\n\n"
        "2. Create the project with the init command.\n",
        "steps.md",
    )
    lead = candidates([(1, steps)])[0]
    items = list_after(lead, [(1, steps)], 4)
    assert [s.text for s in items] == [
        "Install the CLI with the package manager of your system.",
        "Create the project with the init command.",
    ]


def test_a_picture_s_caption_is_not_quoted():
    from citewise.quote.sentences import candidates

    # The caption under a picture the loader left out describes what the reader can't see.
    page = chunk(
        "## Accelerated execution\n\n"
        "_Diagram showing the difference between sequential execution (left) and parallel execution (right)_\n\n"
        "Orbitron compiles hot contracts to native code, so sequential execution runs at the speed of the CPU.\n",
        "execution.md",
        chapter="Accelerated execution",
    )
    answer = compose_quote_answer("What is accelerated sequential execution?", [(1, page)])
    assert "compiles hot contracts to native code" in answer.text
    assert "Diagram showing" not in answer.text
    # nor a caption of two sentences, nor one that abbreviates "Figure"
    for caption in ("*Figure 2: The write path. Data flows from the client to the journal.*", "*Fig. 3: Two paths.*"):
        found = candidates([(1, chunk(f"Orbitron writes to a journal first.\n\n{caption}\n", "journal.md"))])
        assert [s.text for s in found] == ["Orbitron writes to a journal first."]


EXIT_REASONS = chunk(
    "| `exit_reason` | Status | Retryable | Message shown | When |\n"
    "| --- | --- | --- | --- | --- |\n"
    "| `COMPLETED` | success or refused | no | (the answer itself) | The run answered, refused, or greeted. |\n"
    "| `MAX_TURNS_REACHED` | error | no | I couldn't finish answering within the allowed number of steps. Please "
    "rephrase or narrow your question. | The model used `agent.max_turns` (6) turns without a final answer. |\n"
    "| `MAX_TOOL_CALLS_REACHED` | success or refused | no | I reached the limit of documentation lookups for one "
    "question. Here is what I found so far. | The model asked for more than `agent.max_tool_calls` distinct lookups. "
    "It then had to answer from what it had gathered, and that answer is returned. |\n"
    "| `MAX_CONTEXT_REACHED` | error | no | This conversation has grown too long for me to keep track of. Please "
    "start over with a new conversation. | The conversation plus this run's lookups exceed "
    "`agent.max_context_chars` (12,000). |\n"
    "| `EMPTY_INPUT` | error | no | Please type a question about the documentation. | The question was empty or "
    "only whitespace. No search, no model call. |\n"
    "| `LLM_GENERATION_FAILURE` | success, refused or error | yes | The language model did not produce a usable "
    "answer. Please try again or rephrase. | The model replied with nothing. It is asked once more for a final "
    "answer; if that one is usable it is returned (still with this exit reason), else the message. |\n",
    "answers.md",
    chapter="Asking questions > Exit reasons",
).model_copy(update={"chunk_index": 19})


def test_a_question_naming_one_code_gets_its_row_not_the_rows_of_the_others():
    answer = compose_quote_answer("When does a run end with MAX_TURNS_REACHED?", [(1, EXIT_REASONS)])
    assert "| `MAX_TURNS_REACHED` | error |" in answer.text
    assert "MAX_CONTEXT_REACHED" not in answer.text  # a row about another exit reason


def test_a_row_after_prose_that_names_the_setting_is_still_quoted():
    # The rule is about rows beside a leading row: a config table lists keys without their section's prefix.
    agent = chunk(
        "## [agent]\n\nThe `agent.max_turns` setting caps how many turns the model may take.\n\n"
        "| Key | Default | Meaning |\n| --- | --- | --- |\n| `max_turns` | 6 | Turns before the run stops. |\n"
        "| `max_tool_calls` | 8 | Lookups per question. |\n",
        "config.md",
    )
    answer = compose_quote_answer("What is the default value of agent.max_turns?", [(1, agent)])
    assert "| `max_turns` | 6 |" in answer.text


INGEST_SETTINGS = chunk(
    "## Ingest settings\n\n"
    "| Setting | Default | Description |\n| --- | --- | --- |\n"
    "| `chunk_overlap` | `150` | Characters of the previous chunk repeated at the start of the next one. |\n"
    "| `embed_batch_size` | `8` | Chunks per forward pass of a local model. |\n"
    "| `chunk_size` | `1000` | Target size of a chunk, in characters. |\n"
    "| `commit_every` | `512` | Chunks embedded between two commits to the index. |\n",
    "configuration.md",
    chapter="Configuration > Ingest settings",
)


def test_a_question_naming_a_rows_first_cell_gets_that_row_not_its_neighbours():
    # "chunk size" names the `chunk_size` row by its first cell; the other rows share words with the question
    # ("chunk", "default") but describe other settings.
    prose = chunk(
        "Sections are packed into chunks of about 1,000 characters (`ingest.chunk_size`, default `1000`).",
        "ingesting.md",
        dense=0.75,
    )
    answer = compose_quote_answer("What is the default chunk size?", [(1, prose), (2, INGEST_SETTINGS)])
    assert "| `chunk_size` | `1000` |" in answer.text
    for other in ("chunk_overlap", "embed_batch_size", "commit_every"):
        assert f"| `{other}` |" not in answer.text
    # A question no first cell names leaves the rows to relevance, as before.
    answer = compose_quote_answer("How many chunks are embedded between two commits?", [(1, INGEST_SETTINGS)])
    assert "| `commit_every` | `512` |" in answer.text

    # The chunker splits a long table and repeats its header: the rows of the other passage are its rows too.
    head = "## Ingest settings\n\n| Setting | Default | Description |\n| --- | --- | --- |\n"
    rows = INGEST_SETTINGS.text.split("| --- | --- | --- |\n", 1)[1].splitlines(keepends=True)
    first = INGEST_SETTINGS.model_copy(update={"text": head + "".join(rows[:2])})
    second = INGEST_SETTINGS.model_copy(
        update={
            "text": head + "".join(rows[2:]),
            "chunk_id": make_chunk_id(INGEST_SETTINGS.doc_id, 1),
            "chunk_index": 1,
        }
    )
    answer = compose_quote_answer("What is the default chunk size?", [(1, prose), (2, first), (3, second)])
    assert "| `chunk_size` | `1000` |" in answer.text
    assert "| `embed_batch_size` |" not in answer.text and "| `chunk_overlap` |" not in answer.text

    # One word of a first cell is no name: "missing" does not make the question about the "Missing index" row.
    problems = chunk(
        "## Troubleshooting\n\n| Problem | Cause | Fix |\n| --- | --- | --- |\n"
        "| Missing index | `orbit ask` ran before any ingest | Run `orbit ingest` first. |\n"
        "| Authentication error | The API key is missing or wrong | Set `ORBIT_API_KEYS` on the server. |\n",
        "troubleshooting.md",
        chapter="Troubleshooting",
    )
    answer = compose_quote_answer("What happens when the API key is missing?", [(1, problems)])
    assert "| Authentication error | The API key is missing or wrong |" in answer.text, answer.text
    # Two rows named, neither more than the other: both stay.
    client = chunk(
        "## Client\n\n| Setting | Default |\n| --- | --- |\n| `timeout` | 30 |\n| `retry_limit` | 5 |\n"
        "| `workers` | 4 |\n",
        "config.md",
        chapter="Config > Client",
    )
    answer = compose_quote_answer("What are the default timeout and retry limit?", [(1, client)])
    assert "| `timeout` | 30 |" in answer.text and "| `retry_limit` | 5 |" in answer.text, answer.text
    assert "| `workers` |" not in answer.text


def test_a_structured_answer_gives_no_row_of_another_code_as_why_it_matters():
    answer = compose_quote_answer(
        "When does a run end with MAX_TURNS_REACHED?", [(1, EXIT_REASONS)], style=AnswerStyle.STRUCTURED
    )
    assert "MAX_TURNS_REACHED" in answer.text
    assert "MAX_CONTEXT_REACHED" not in answer.text


def test_a_heading_that_lost_its_markup_is_not_quoted():
    # A scraped page's heading can come through as a plain line ("Deploy Contract."), here at a passage's end, over
    # the section that continues in the next passage: it names what follows and says none of it.
    build = chunk(
        "## Deploy with Forge\n\nRun `forge build` to compile the contracts before you deploy them.\n\n"
        "You can read more about the flags in the Forge book.\n\nDeploy Contract.\n",
        "forge.md",
        chapter="Deploy with Forge",
    )
    answer = compose_quote_answer("How do I deploy a contract with Forge?", [(1, build)])
    assert "Deploy Contract." not in answer.text
    assert "forge build" in answer.text
    # nor as a label's value, nor as what "This" points back to
    for after in ("Run `forge create` to deploy the contract.", "This deploys the contract with a funded wallet."):
        page = chunk(f"Smart Contracts\n\nDeploy Contract.\n\n{after}\n", "deploy.md", chapter="Deploy")
        answer = compose_quote_answer("How do I deploy a contract?", [(1, page)])
        assert "Deploy Contract." not in answer.text and after in answer.text, answer.text
    # while steps and a FAQ's answer of two capitalised words stay quotes
    steps = chunk(
        "## Get test tokens\n\nTo get tORB from the faucet, follow these steps:\n\n"
        "1. Connect Wallet.\n2. Request Tokens.\n3. Confirm Transaction.\n",
        "faucet.md",
        chapter="Get test tokens",
    )
    answer = compose_quote_answer("How do I get tORB tokens from the faucet?", [(1, steps)])
    assert "- Connect Wallet. [1]\n- Request Tokens. [1]" in answer.text, answer.text
    faq = chunk("## Wallets\n\n**Q: Which wallet does Orbitron recommend?**\n\nA: Rabby Wallet.\n", "faq.md")
    assert "Rabby Wallet." in compose_quote_answer("Which wallet does Orbitron recommend?", [(1, faq)]).text


def test_a_copy_of_a_quoted_sentence_on_another_page_is_not_quoted_again():
    # Docs sites repeat a guide's prerequisites on two pages, once with a link more.
    one = chunk(
        "## Prerequisites\n\n- Forge is installed and set up on your local machine. See [Guide](https://forge.dev/)\n",
        "deploy-a.md",
        chapter="Deploy with Forge > Prerequisites",
    )
    two = chunk(
        "## Prerequisites\n\n- Forge is installed and set up on your local machine.\n",
        "deploy-b.md",
        chapter="Deploy with Forge > Prerequisites",
        dense=0.69,
    )
    for first, second in ((0.7, 0.69), (0.69, 0.7)):  # whichever ranks first
        passages = [
            (1, one.model_copy(update={"dense_score": first})),
            (2, two.model_copy(update={"dense_score": second})),
        ]
        answer = compose_quote_answer("What do I need before I deploy with Forge?", passages)
        assert answer.text.count("Forge is installed and set up on your local machine.") == 1, answer.text


def test_a_lead_in_copied_on_another_page_is_quoted_once():
    # Two pages repeat a guide: the lead-in of the command the answer quotes must not come again, from the other
    # page, without its command.
    guide = (
        "## Build\n\nForge compiles every contract of the project in one go.\n\n"
        "To compile the Smart Contract, run the command:\n\n```bash\nforge build\n```\n"
    )
    one = chunk(guide, "deploy-a.md", chapter="Deploy with Forge > Build")
    two = chunk(guide, "deploy-b.md", chapter="Deploy with Forge > Build", dense=0.69)
    answer = compose_quote_answer("How do I compile a contract with Forge?", [(1, one), (2, two)])
    assert answer.text.count("To compile the Smart Contract, run the command:") == 1, answer.text
    assert "forge build" in answer.text
