"""Composition: the best unit with what it needs to stand, and the text it makes. Pure functions over given scores:
the reader's own scores are tested with the shipped model (test_reader.py, test_answerer.py)."""

from __future__ import annotations

from citewise.quote.compose import LIST_LIMIT, RULES, Candidate, Passage, candidates, choose, order, render
from citewise.text import answer_units
from citewise.types import AnswerStyle, ScoredChunk

ALL = frozenset(RULES)


def passage(text: str, n: int = 1, chapter: str = "Guide") -> Passage:
    chunk = ScoredChunk(
        chunk_id=f"c{n}", doc_id="d", chunk_index=n, text=text, filename="guide.md", chapter=chapter, score=1.0,
        units=answer_units(text),
    )  # fmt: skip
    return Passage(n, chunk)


def scored(p: Passage, scores: dict[int, float], slot: int = 0) -> list[Candidate]:
    """Candidates of one passage with the given scores (unit index → log-odds); the other units score -5."""
    values = [scores.get(i, -5.0) for i in range(len(p.units))]
    ranked = candidates([p], [values])
    return [Candidate(slot, c.n, c.index, c.start, c.end, c.kind, c.score) for c in ranked]


def quoted(p: Passage, chosen) -> list[str]:
    return [p.chunk.text[p.units[c.index][0] : p.units[c.index][1]] for c in sorted(chosen, key=lambda c: c.index)]


def compose(p: Passage, scores: dict[int, float], rules=ALL, cut: float = 2.0) -> tuple[list[str], str]:
    ranked = scored(p, scores)
    chosen, left_out = choose(ranked, [p], max_units=4, relative_cut=cut, min_score=0.0, rules=frozenset(rules))
    text, _, _ = render(order(chosen, ranked), [p], style=AnswerStyle.DEFAULT, left_out=left_out)
    return quoted(p, chosen), text


def test_a_code_block_comes_after_the_sentence_that_introduces_it():
    p = passage("The daemon ships as a package. Install it with:\n\n```bash\npip install orbitron\n```")
    units, text = compose(p, {2: 4.0})
    assert units == ["Install it with:", "```bash\npip install orbitron\n```"]
    assert text == "Install it with: [1]\n\n```bash\npip install orbitron\n```"  # one mark: the lead-in's covers it
    assert compose(p, {2: 4.0}, rules=ALL - {"lead_in"})[0] == ["```bash\npip install orbitron\n```"]


def test_a_sentence_that_announces_a_list_brings_it_and_says_how_many_it_left_out():
    items = "\n".join(f"- backend number {i}" for i in range(LIST_LIMIT + 2))
    p = passage(f"Orbitron stores journals in several backends:\n\n{items}")
    units, text = compose(p, {0: 3.0})
    assert units[0] == "Orbitron stores journals in several backends:" and len(units) == 1 + LIST_LIMIT
    assert text.startswith("Orbitron stores journals in several backends: [1]\n\n- backend number 0\n")
    assert text.endswith("- backend number 7\n\n… and 2 more in the source [1]")
    assert compose(p, {0: 3.0}, rules=ALL - {"announced"})[0] == ["Orbitron stores journals in several backends:"]


def test_a_sentence_that_points_back_brings_what_it_points_to():
    p = passage("The daemon runs in the background. It listens on port 7433 by default. Logs go to syslog.")
    assert compose(p, {1: 3.0})[0] == ["The daemon runs in the background.", "It listens on port 7433 by default."]
    assert compose(p, {1: 3.0}, rules=ALL - {"antecedent"})[0] == ["It listens on port 7433 by default."]


def test_a_sentence_keeps_the_next_one_when_it_negates_or_qualifies_it():
    p = passage("Other tools sync journals to S3. This is not supported by Orbitron. Journals rotate weekly.")
    assert compose(p, {0: 3.0})[0] == ["Other tools sync journals to S3.", "This is not supported by Orbitron."]
    assert compose(p, {0: 3.0}, rules=ALL - {"qualifier"})[0] == ["Other tools sync journals to S3."]


def test_other_units_are_quoted_only_within_the_relative_cut():
    p = passage("Port is 7433. Workers default to four. Journals rotate weekly. Colours are blue.")
    assert compose(p, {0: 5.0, 1: 3.5, 2: 2.5})[0] == ["Port is 7433.", "Workers default to four."]
    assert compose(p, {0: 5.0, 1: 3.5, 2: 2.5}, cut=3.0)[0] == [
        "Port is 7433.",
        "Workers default to four.",
        "Journals rotate weekly.",
    ]


def test_table_rows_are_quoted_under_their_header():
    p = passage("| Setting | Default |\n| --- | --- |\n| port | 7433 |\n| workers | 4 |")
    units, text = compose(p, {0: 4.0, 1: 3.0})
    assert units == ["| port | 7433 |", "| workers | 4 |"]
    assert text == "| Setting | Default |\n| --- | --- |\n| port | 7433 |\n| workers | 4 |\n\n[1]"


def test_ties_keep_reading_order():
    p = passage("One thing is said. Another thing is said.")
    ranked = scored(p, {0: 1.0, 1: 1.0})
    assert [c.index for c in ranked] == [0, 1]


def test_the_same_words_are_never_quoted_twice():
    """A command two pages show alike (a guide and a troubleshooting page) is quoted once, from the better one."""
    guide = passage("Add `--prune`:\n\n```bash\ncitewise ingest docs/ --prune\n```", n=1)
    help_page = passage("Run the ingest again with pruning.\n\n```bash\ncitewise ingest docs/ --prune\n```", n=2)
    ranked = sorted(
        scored(guide, {1: 4.0}) + scored(help_page, {0: 3.0, 1: 3.5}, slot=1), key=lambda c: (-c.score, c.slot)
    )
    chosen, _ = choose(ranked, [guide, help_page], max_units=4, relative_cut=2.0, min_score=0.0, rules=ALL)
    kept = [(c.slot, c.index) for c in chosen]
    assert (0, 1) in kept and (1, 1) not in kept  # the command once, from the guide
    assert (1, 0) in kept  # the other page's own sentence is still quoted


def test_the_answer_comes_first_and_what_was_chosen_above_it_follows():
    """A troubleshooting page's symptom scored close to its fix: the fix, which answers, leads."""
    p = passage(
        "Symptom. The server stops with exit code 3. Fix. Use another port:\n\n```bash\ncitewise serve --port 8080\n```"
    )
    _, text = compose(p, {1: 3.0, 3: 2.0, 4: 4.0})
    assert text.startswith("Use another port: [1]\n\n```bash\ncitewise serve --port 8080\n```\n\n")
    assert text.endswith("The server stops with exit code 3. [1]")


def test_one_mark_per_source_and_group():
    """A list nobody introduced is cited once, after its last item; a code block standing alone gets its mark."""
    p = passage("- first option\n- second option\n\nText between.\n\n```bash\nrun me\n```")
    _, text = compose(p, {0: 4.0, 1: 3.9, 3: 3.8})
    assert text == "- first option\n- second option [1]\n\n```bash\nrun me\n```\n[1]"


def test_the_best_item_brings_the_short_list_its_lead_in_announces():
    p = passage("Orbitron supports three backends:\n\n- sqlite\n- postgres\n- s3\n\nJournals rotate weekly.")
    units, text = compose(p, {2: 4.0})
    assert units == ["Orbitron supports three backends:", "sqlite", "postgres", "s3"]
    assert text == "Orbitron supports three backends: [1]\n\n- sqlite\n- postgres\n- s3"
    assert compose(p, {2: 4.0}, rules=ALL - {"announced"})[0] == ["Orbitron supports three backends:", "postgres"]


def test_a_lead_in_whose_block_is_not_quoted_is_not_an_answer_of_its_own():
    """Below the best unit, a sentence ending on a colon with nothing after it would end the answer mid-thought."""
    p = passage("Port is 7433 by default. See the table below:\n\n## Other\n\nUnrelated.")
    assert compose(p, {0: 4.0, 1: 3.5})[0] == ["Port is 7433 by default."]


def test_a_table_or_list_quoted_in_part_says_how_much_more_the_source_holds():
    """Lists and tables come whole or with an honest "… and N more": one row of a settings table is the answer."""
    table = passage("| Setting | Default |\n| --- | --- |\n| port | 7433 |\n| workers | 4 |\n| journal | /var/lib |")
    _, text = compose(table, {0: 4.0})
    assert text == "| Setting | Default |\n| --- | --- |\n| port | 7433 |\n\n… and 2 more in the source [1]"
    items = passage("Options:\n\n- `--prune` removes deleted files\n- `--glob` picks files\n\n## Other\n\nText.")
    _, text = compose(items, {2: 4.0}, rules=ALL - {"announced"})
    assert text == "Options: [1]\n\n- `--glob` picks files\n\n… and 1 more in the source [1]"


def test_the_whole_list_is_the_announced_one_not_the_next_list_on_the_page():
    p = passage("Backends:\n\n- sqlite\n- postgres\n\n## Other things\n\n- red\n- blue")
    units, _ = compose(p, {2: 4.0})
    assert units == ["Backends:", "sqlite", "postgres"]


def test_two_tables_alike_in_one_passage_stay_two_tables():
    p = passage(
        "| Setting | Default |\n| --- | --- |\n| port | 7433 |\n\nFor the worker:\n\n"
        "| Setting | Default |\n| --- | --- |\n| threads | 4 |"
    )
    _, text = compose(p, {0: 4.0, 2: 3.5})
    assert text.count("| Setting | Default |") == 2, text


def test_a_sentence_announces_its_own_list_not_the_next_one_on_the_page():
    p = passage("Backends:\n\n- sqlite\n- postgres\n\n## Other things\n\n- red\n- blue")
    units, text = compose(p, {0: 4.0})
    assert units == ["Backends:", "sqlite", "postgres"] and "more in the source" not in text


def test_a_table_row_brings_the_sentence_that_introduces_its_table():
    """The table's header lines stand between its lead-in and its first row; they don't part the two."""
    table = "| Setting | Default |\n| --- | --- |\n| port | 7433 |\n| workers | 4 |"
    p = passage(f"Orbitron reads these settings:\n\n{table}")
    units, text = compose(p, {1: 4.0, 2: 3.0})
    assert units == ["Orbitron reads these settings:", "| port | 7433 |", "| workers | 4 |"]
    assert text == (
        "Orbitron reads these settings: [1]\n\n| Setting | Default |\n| --- | --- |\n| port | 7433 |\n| workers | 4 |"
    )
    units, _ = compose(p, {0: 4.0})  # and the sentence brings the table it announces
    assert units == ["Orbitron reads these settings:", "| port | 7433 |", "| workers | 4 |"]


def test_an_item_counted_in_and_n_more_is_not_quoted_after_it():
    """A list cut at LIST_LIMIT says "… and 2 more"; one of those two, ranked well on its own, is not quoted after
    that line as if it were something else."""
    items = "\n".join(f"- backend number {i}" for i in range(LIST_LIMIT + 2))
    p = passage(f"Orbitron stores journals in several backends:\n\n{items}")
    units, text = compose(p, {0: 3.0, LIST_LIMIT + 2: 2.5})
    assert f"- backend number {LIST_LIMIT + 1}" not in text and "backend number 9" not in units
    assert text.endswith("… and 2 more in the source [1]")
