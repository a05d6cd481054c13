"""The `citewise` command line: thin wrappers over the library, all built from the same Settings.

Heavy modules (the index engine, the embedding model) are imported inside the commands that need them, so
`citewise --help` and `citewise docs list` start instantly.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import re
import sys
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError as PydanticValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from citewise import __version__
from citewise.errors import CitewiseError
from citewise.types import AnswerMode, AnswerStyle, DocStatus, RetrievalMode

if TYPE_CHECKING:
    from citewise.settings import Settings

# Typer shows "<bool>" as the type of every flag (--json, --trace, --help): a flag takes no value, so show none.
_option_type = typer.core.TyperOption.display_type_rich


def _flag_type(option: typer.core.TyperOption, ctx) -> str | None:
    return None if option.is_flag else _option_type(option, ctx)


typer.core.TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]

app = typer.Typer(
    name="citewise",
    help="Grounded documentation Q&A: ingest your docs, ask with citations, serve the API and web chat, evaluate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
docs_app = typer.Typer(help="Inspect and manage ingested documents.", no_args_is_help=True)
eval_app = typer.Typer(help="Measure retrieval and answer quality on your own data.", no_args_is_help=True)
sources_app = typer.Typer(
    help="Docs where they live: websites, Git repositories and folders, declared once and kept in sync.",
    no_args_is_help=True,
)
db_app = typer.Typer(help='The PostgreSQL schema (store = "postgres").', no_args_is_help=True)
app.add_typer(docs_app, name="docs")
app.add_typer(sources_app, name="sources")
app.add_typer(eval_app, name="eval")
app.add_typer(db_app, name="db")

# emoji=False: Rich would print the docs' ":date:" as a calendar emoji; a quote shows the characters the docs hold.
out = Console(emoji=False)
err = Console(stderr=True, emoji=False)

HomeOpt = Annotated[
    Path | None,
    typer.Option("--home", help="Data directory (default ./.citewise, or $CITEWISE_HOME).", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object as the last line of stdout.")]
OwnerOpt = Annotated[str | None, typer.Option("--owner", help="Owner id (letters, digits, _ . @ -).")]
NoWaitOpt = Annotated[
    bool,
    typer.Option("--no-wait", help="Fail at once (exit 2) if another writer is using the home, instead of waiting."),
]


def _waiting(message: str) -> None:
    say(err, "[yellow]{}[/]", message, soft_wrap=True)  # one line: scripts grep it for the pid


# C0 and C1 control characters except tab and newline: an ANSI escape in a file name must not reach the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(value: object) -> str:
    """Text that came from a document, a path, a user or an error, made safe to print: control characters are
    written as visible \\xNN escapes and Rich markup is escaped, so `[/api/v1]` prints as itself."""
    return escape(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value)))


def say(console: Console, template: str, *values: object, **options) -> None:
    """Print `template` (Rich markup written here, in the code) with every `{}` filled by a value passed through
    `shown`: the one way the CLI prints anything that did not come from its own source code."""
    console.print(template.format(*(shown(v) for v in values)), highlight=False, **options)


def _settings(home: Path | None, **overrides) -> Settings:
    from citewise.settings import Settings  # pydantic-settings: not needed for --help

    try:
        settings = Settings(**({"home": home} if home is not None else {}))
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        raise CitewiseError(f"Invalid configuration: {first['loc']}: {message}") from exc
    for section, values in overrides.items():
        if values:
            settings = settings.model_copy(update={section: getattr(settings, section).model_copy(update=values)})
    return settings


def _require_documents(settings: Settings, home: Path | None) -> None:
    """`ask`, `search` and `chat` read what was ingested. On a home where nothing is, every question would be refused
    as if the docs lacked its answer (exit 0): say so instead, in one line with what to run (exit 2). It only reads,
    so a mistyped --home is never created. With `store = "postgres"` the documents are the database's: the local
    folder may well be empty."""
    from citewise.errors import NothingIngestedError
    from citewise.index.registry import open_registry

    run = "citewise ingest PATH" + (f" --home {home}" if home is not None else "")
    if not settings.uses_postgres and not settings.home.exists():
        raise NothingIngestedError(
            f"No Citewise home at {settings.home.resolve()}: nothing was ever ingested there. Check --home (or "
            f"CITEWISE_HOME), or add documents first with `{run}`."
        )
    counts = open_registry(settings).counts()
    if counts.get(DocStatus.INDEXED) or counts.get(DocStatus.PENDING):
        return  # a PENDING document may be one being re-ingested, its last version still searchable
    where = "the PostgreSQL database" if settings.uses_postgres else str(settings.home.resolve())
    failed = counts.get(DocStatus.FAILED, 0)
    if failed:
        raise NothingIngestedError(
            f"No document is indexed in {where}: all {failed} failed to ingest (`citewise docs list --status FAILED` "
            "says why)."
        )
    raise NothingIngestedError(f"Nothing is ingested in {where} yet: add documents with `{run}`.")


def _eval_settings() -> Settings:
    """An eval indexes its data set into a throwaway embedded home: never into a shared PostgreSQL database."""
    return _settings(None).model_copy(update={"store": "lancedb"})


@contextmanager
def _progress(enabled: bool):
    """A Rich progress display fed by (stage, done, total) callbacks; silent when stdout is for JSON."""
    if not enabled:
        yield lambda stage, done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # writers only

    labels = {
        "parse": "Reading files",
        "embed": "Embedding chunks",
        "write": "Writing to the index",
        "optimize": "Updating indexes",
        "query": "Querying",
    }
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
    ) as progress:
        tasks: dict[str, int] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(labels.get(stage, stage.capitalize()), total=total)
            progress.update(tasks[stage], completed=done, total=max(total, done))

        yield update


@contextmanager
def _composing(*, enabled: bool):
    """A spinner on stderr while an answer is being composed (a cold start and the run itself take a second or
    more, a model longer). Only on a terminal, and never with --json: stdout stays the answer alone."""
    if not enabled or not err.is_terminal:
        yield
        return
    with err.status("Composing the answer…", spinner="dots"):
        yield


def _run(fn: Callable[[], int | None], *, one_question: bool = False) -> None:
    """Run a command's work: its CitewiseError as one clean message and exit code 2. A command that answers one
    question (search, ask) runs to its end with the garbage collector paused (see `main`); every other one may run
    for hours (ingest, serve, chat) and collects as usual."""
    if not one_question:
        gc.enable()
    try:
        code = fn() or 0
    except CitewiseError as exc:
        # The message is plain text ("pip install 'citewise[openai]'" must survive), never Rich markup.
        say(err, "[bold red]Error:[/] {}", exc)
        raise typer.Exit(2) from None
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        out.print(f"citewise {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    pass


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to ingest.", show_default=False)],
    owner: OwnerOpt = None,
    prune: Annotated[bool, typer.Option("--prune", help="Remove documents under PATHS whose files are gone.")] = False,
    glob: Annotated[
        list[str] | None,
        typer.Option("--glob", help="Pattern inside folders (repeatable); default: all supported."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="Published docs URL; source_url = base + relative path.")
    ] = None,
    slugs: Annotated[
        str | None,
        typer.Option("--slugs", help="With --base-url: the site's heading anchors, github or mkdocs (default github)."),
    ] = None,
    reassign_owner: Annotated[
        bool,
        typer.Option("--reassign-owner", help="Give documents already indexed under another owner to --owner."),
    ] = False,
    no_wait: NoWaitOpt = False,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add or update documents in the index. Unchanged files are skipped without embedding anything."""

    def go() -> int:
        from citewise.index.knowledge_base import KnowledgeBase
        from citewise.ingest.pipeline import Ingestor
        from citewise.types import PUBLIC_OWNER

        if slugs not in (None, "github", "mkdocs"):
            raise CitewiseError(f"--slugs must be github or mkdocs, not {slugs!r}.")
        linked = {"base_url": base_url} if base_url else {}
        settings = _settings(home, ingest={**linked, **({"slugs": slugs} if slugs else {})} or None)
        if slugs and not settings.ingest.base_url:  # anchors are made only for links to a published site
            raise CitewiseError(
                "--slugs names the anchors of a published site's headings: give the site with --base-url (or set "
                "ingest.base_url)."
            )
        kb = KnowledgeBase(settings)
        with _progress(not as_json) as progress:
            ingestor = Ingestor(
                kb,
                owner=owner or PUBLIC_OWNER,
                progress=progress,
                reassign_owner=reassign_owner,
                wait_s=0 if no_wait else None,
                on_wait=_waiting,
            )
            report = ingestor.ingest_paths(paths, prune=prune, globs=glob)
        if as_json:
            print(report.model_dump_json())
        else:
            for note in report.skipped:
                say(err, "[yellow]Skipped[/] {}", note)
            for failure in report.failures:
                say(err, "[red]FAILED[/] {}: {}", failure.source, failure.error)
            if report.chunks_embedded == 0 and not report.indexed and not report.pruned:
                summary = f"Nothing to embed: {report.unchanged} unchanged document(s)."
            else:
                summary = (
                    f"Indexed {report.indexed} document(s) ({report.chunks_total} chunks: {report.chunks_embedded} "
                    f"embedded, {report.chunks_reused} reused); {report.unchanged} unchanged"
                )
                summary += f"; {report.pruned} pruned." if report.pruned else "."
            if report.failed:
                summary += f" {report.failed} failed (see `citewise docs list --status FAILED`)."
            say(out, "{} [dim]{}s, home {}[/]", summary, f"{report.elapsed_s:.1f}", settings.home)
        return 1 if report.failed else 0

    _run(go)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.", show_default=False)],
    k: Annotated[
        int | None,
        typer.Option("--k", help="Chunks to return, 1-10 (default: retrieval.top_k).", show_default=False),
    ] = None,
    mode: Annotated[RetrievalMode | None, typer.Option("--mode", help="hybrid (default), dense or lexical.")] = None,
    owner: OwnerOpt = None,
    module: Annotated[str | None, typer.Option("--module", help="Only chunks from this top-level folder.")] = None,
    selected_text: Annotated[
        Path | None, typer.Option("--selected-text", help="Search only inside this file's text (nothing is stored).")
    ] = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rank the chunks that best match QUERY (hybrid dense + BM25 by default)."""

    def go() -> int:
        from citewise.index.knowledge_base import KnowledgeBase
        from citewise.index.retriever import Retriever

        text = None
        if selected_text is not None:
            try:
                text = selected_text.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CitewiseError(f"Cannot read --selected-text {selected_text}: {exc}") from exc
        settings = _settings(home)
        kb = KnowledgeBase(settings)
        retriever = Retriever(kb)
        if text is not None:
            from citewise.ingest.selection import search_selected

            result = search_selected(retriever, query, k, text=text, mode=mode)
        else:
            result = retriever.search(query, k, owner=owner, mode=mode, filters={"module": module} if module else None)
        if result.empty and text is None:
            _require_documents(settings, home)  # nothing found because nothing is there: say so (exit 2)
        if as_json:
            print(result.model_dump_json())
            return 0
        if result.empty:
            out.print(f"No chunk is relevant enough (minimum similarity {settings.retrieval.min_score}).")
            return 0
        for rank, chunk in enumerate(result.chunks, 1):
            where = chunk.filename + (f" p.{chunk.page}" if chunk.page else "")
            scores = f"score {chunk.score:.4f}" + (f", dense {chunk.dense_score:.2f}" if chunk.dense_score else "")
            say(out, "[bold]{}. {}[/] — {}  [dim]({})[/]", rank, where, chunk.chapter or chunk.title, scores)
            snippet = " ".join(chunk.text.split())
            say(out, "   {}", snippet if len(snippet) <= 320 else snippet[:320] + "…")
        return 0

    _run(go, one_question=True)


# -- ask / chat (agent stream) ------------------------------------------------------------------------------------


ModeOpt = Annotated[
    AnswerMode | None,
    typer.Option("--mode", help="quote (verbatim sentences, no model) or agent (CITEWISE_LLM). Default: CITEWISE_LLM."),
]
StyleOpt = Annotated[AnswerStyle | None, typer.Option("--style", help="default or structured.")]


def _read_selected_text(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CitewiseError(f"Cannot read --selected-text {path}: {exc}") from exc


def _print_answer(answer, *, shown: str = "", traced: bool = False) -> None:
    """The answer (unless it was streamed verbatim already), then its numbered sources and any caveats."""
    if answer.answer.strip() != shown.strip():
        if shown:
            out.print("\n[dim]Checked answer:[/]")
        if out.is_terminal:  # reflow the markdown for the terminal; pipes and files get the exact answer text
            from rich.markdown import Markdown

            out.print(Markdown(_CONTROL.sub("", answer.answer)))  # Markdown is not markup; escapes still are
        else:
            say(out, "{}", answer.answer)
    if answer.citations:
        out.print("\n[bold]Sources[/]")
        for c in answer.citations:
            where = c.filename + (f" › {c.chapter}" if c.chapter else "")
            url = f"  {c.source_url}" if c.source_url else ""
            commit = f"  (commit {c.revision[:12]})" if c.revision else ""
            say(out, "  {} {}{}{}", f"[{c.n}]", where, url, commit)
    for conflict in answer.conflicting_info:
        values = "; ".join(f"{v.value} ({v.filename}{', ' + v.date if v.date else ''})" for v in conflict.values)
        resolved = f" — newest says {conflict.resolved_value}" if conflict.resolved_value else ""
        say(err, "[yellow]Sources disagree on {}:[/] {}{}", conflict.subject, values, resolved)
    if answer.status == "refused":
        if answer.refusal_detail:
            say(err, "[dim]Why: {}[/]", answer.refusal_detail)
        if answer.closest_sections:  # places to read, not citations: the answer rests on none of them
            err.print("[dim]Closest sections in the docs (not an answer):[/]", highlight=False)
            for section in answer.closest_sections:
                where = section.filename + (f" › {section.chapter}" if section.chapter else "")
                url = f"  {section.source_url}" if section.source_url else ""
                say(err, "[dim]  - {}{}[/]", where, url)
        if not traced:
            err.print("[dim]Run the question again with --trace to see each step of the search.[/]", highlight=False)
    for gap in answer.insufficiencies:
        say(err, "[yellow]Not covered:[/] {}", gap)
    if answer.exit_reason != "COMPLETED" or answer.status == "error":
        err.print(f"[dim]exit_reason {answer.exit_reason} (status {answer.status})[/]", highlight=False)


def _trace_line(event: dict) -> str:
    data = {k: v for k, v in (event.get("data") or {}).items() if v not in (None, [], {}, "")}
    return f"· {event.get('node', '')}: {event.get('type', '')} " + json.dumps(data, ensure_ascii=False)[:300]


async def _stream_run(cw, request, *, show_tokens: bool, show_trace: bool):
    """Run through astream_events: tokens to stdout as they arrive, trace steps to stderr; returns (Answer, text
    streamed)."""
    shown: list[str] = []
    answer = None
    async for event in cw.astream_events(request):
        kind = event["event"]
        if kind == "on_chat_model_stream" and show_tokens:
            text = event["data"]["chunk"].content
            if isinstance(text, str) and text:
                shown.append(text)
                say(out, "{}", text, end="", soft_wrap=True)
        elif kind == "on_custom_event" and event.get("name") == "trace" and show_trace:
            say(err, "{}", _trace_line(event["data"]))
        elif kind == "on_chain_end" and "answer" in (event["data"].get("output") or {}):
            answer = event["data"]["output"]["answer"]
    if shown:
        out.print()
    return answer, "".join(shown)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="Your question about the ingested docs.", show_default=False)],
    as_json: JsonOpt = False,
    trace: Annotated[bool, typer.Option("--trace", help="Show each step of the run (stderr; also in --json).")] = False,
    stream: Annotated[bool, typer.Option("--stream", help="Print the model's tokens as they arrive.")] = False,
    selected_text: Annotated[
        Path | None, typer.Option("--selected-text", help="Answer only from this file's text (nothing is stored).")
    ] = None,
    mode: ModeOpt = None,
    style: StyleOpt = None,
    owner: OwnerOpt = None,
    home: HomeOpt = None,
) -> None:
    """Answer QUESTION from the ingested docs, citing every claim, or say the docs don't cover it.

    Exit code 0 for an answer or an honest refusal, 1 when the run failed (see exit_reason), 2 for bad input or a
    home with nothing ingested.
    """

    def go() -> int:
        live = (stream or trace) and not as_json  # tokens or steps are printed as they come: no spinner over them
        with _composing(enabled=not live and not as_json):
            from citewise.agent.runner import Citewise
            from citewise.agent.sync import run_sync

            settings = _settings(home)
            cw = Citewise(settings)
            request = cw.request(
                question, owner=owner, selected_text=_read_selected_text(selected_text), style=style, mode=mode,
                trace=trace,
            )  # fmt: skip
            if request.selected_text is None:  # a selected text is all an answer about it needs
                _require_documents(settings, home)
            if as_json and trace:
                answer, shown = run_sync(_stream_run(cw, request, show_tokens=False, show_trace=False))
            elif not live:
                answer, shown = run_sync(cw.arun(request)), ""
        if live:
            answer, shown = run_sync(_stream_run(cw, request, show_tokens=stream, show_trace=trace))
        if as_json:
            print(answer.model_dump_json())
        else:
            _print_answer(answer, shown=shown, traced=trace)
        return 1 if answer.status == "error" else 0

    _run(go, one_question=True)


@app.command()
def chat(
    mode: ModeOpt = None,
    style: StyleOpt = None,
    owner: OwnerOpt = None,
    trace: Annotated[bool, typer.Option("--trace", help="Show each step of every run (stderr).")] = False,
    home: HomeOpt = None,
) -> None:
    """Talk to the docs: a REPL that streams each answer and lists its sources. Type `exit` (or Ctrl-D) to leave."""

    def go() -> int:
        import uuid

        from langgraph.checkpoint.memory import InMemorySaver

        from citewise.agent.runner import Citewise
        from citewise.agent.sync import run_sync

        settings = _settings(home)
        _require_documents(settings, home)  # before the prompt: no question could be answered
        cw = Citewise(settings, checkpointer=InMemorySaver())
        session = f"cli-{uuid.uuid4().hex[:12]}"
        options = {"owner": owner, "style": style, "mode": mode}
        out.print("[dim]Ask about the docs. `exit` or Ctrl-D leaves; the conversation is kept until then.[/]")
        while True:
            try:
                question = input("\n> ")
            except (EOFError, KeyboardInterrupt):
                out.print()
                return 0
            if question.strip().lower() in ("exit", "quit", ":q"):
                return 0
            if not question.strip():
                continue
            try:
                # Every question on the same loop (agent/sync.py): a vendor's HTTP client outlives one question.
                request = cw.request(question, session_id=session, **options)
                answer, shown = run_sync(_stream_run(cw, request, show_tokens=True, show_trace=trace))
            except CitewiseError as exc:  # a bad question must not end the conversation
                say(err, "[bold red]Error:[/] {}", exc)
                continue
            _print_answer(answer, shown=shown, traced=trace)

    _run(go)


@docs_app.command("list")
def docs_list(
    owner: OwnerOpt = None,
    status: Annotated[DocStatus | None, typer.Option("--status", help="Only documents in this state.")] = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show ingested documents with their status and chunk counts."""

    def go() -> int:
        from citewise.index.registry import open_registry

        settings = _settings(home)
        registry = open_registry(settings)
        records = registry.list(owner=owner, status=status)
        if as_json:
            print(json.dumps([r.model_dump(mode="json", exclude={"file_hash"}) for r in records]))
            return 0
        if not registry.exists:  # a read-only command never creates a home, so a mistyped --home is visible
            say(out, "No Citewise home at {} (nothing was ever ingested there).", settings.home.resolve())
            return 0
        if not records:
            out.print("No documents. Add some with `citewise ingest PATH`.")
            return 0
        # Ids are shown by their first characters, as Git shows commits: a full id (36 characters) folded over two
        # lines in an 80-column terminal. `docs remove` takes any unique start of one; --json has them whole.
        width = _id_width([r.doc_id for r in records])
        table = Table()
        table.add_column("id", no_wrap=True)
        for column in ("file", "owner", "status", "chunks", "error"):
            table.add_column(column, overflow="fold")
        colours = {DocStatus.INDEXED: "green", DocStatus.FAILED: "red", DocStatus.PENDING: "yellow"}
        for r in records:
            table.add_row(
                shown(r.doc_id[:width]),
                shown(r.filename),
                shown(r.owner),
                f"[{colours[r.status]}]{r.status}[/]",
                str(r.chunk_count),
                shown(r.error or ""),
            )
        out.print(table)
        return 0

    _run(go)


def _id_width(ids: list[str], least: int = 8) -> int:
    """The shortest id prefix, from `least` characters, that tells every id in `ids` apart."""
    for width in range(least, 37):
        if len({i[:width] for i in ids}) == len(set(ids)):
            return width
    return 36


def _resolve_doc_id(kb, prefix: str) -> str:
    """The document id `prefix` starts (a whole id, or the start `docs list` shows); an error when none or several."""
    prefix = prefix.strip().lower()
    if len(prefix) == 36 or not prefix:
        return prefix
    matches = [r.doc_id for r in kb.registry.list() if r.doc_id.startswith(prefix)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise CitewiseError(f"{prefix!r} starts {len(matches)} document ids; give more of it (`citewise docs list`).")
    return prefix  # the removal itself says there is no such document (after checking the home)


@docs_app.command("remove")
def docs_remove(
    doc_id: Annotated[
        str, typer.Argument(help="Id (or its start, as `citewise docs list` shows it).", show_default=False)
    ],
    no_wait: NoWaitOpt = False,
    home: HomeOpt = None,
) -> None:
    """Delete one document and its chunks from the index."""

    def go() -> int:
        from citewise.index.knowledge_base import KnowledgeBase
        from citewise.ingest.pipeline import remove_document

        kb = KnowledgeBase(_settings(home))
        record = remove_document(kb, _resolve_doc_id(kb, doc_id), wait_s=0 if no_wait else None, on_wait=_waiting)
        say(out, "Removed {} ({} chunks).", record.source, record.chunk_count)
        return 0

    _run(go)


@app.command()
def doctor(
    repair: Annotated[
        bool, typer.Option("--repair", help="Fix what can be fixed (holds the home's write lock).")
    ] = False,
    no_wait: NoWaitOpt = False,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check that the index and the registry agree: duplicate chunks, orphan chunks, chunk counts; and show what
    the home holds on disk, part by part.

    Exit code 0 when nothing is wrong (or everything found was repaired), 1 when problems remain.
    """

    def go() -> int:
        from citewise.index.doctor import DoctorReport, check, home_usage
        from citewise.index.knowledge_base import KnowledgeBase

        settings = _settings(home)
        kb = KnowledgeBase(settings)
        if not repair and not kb.registry.exists:
            usage = home_usage(settings)
            if as_json:
                print(DoctorReport(home_usage=usage).model_dump_json())
            else:
                say(out, "No Citewise home at {} (nothing was ever ingested there).", settings.home.resolve())
                _print_home_usage(usage)
            return 0
        report = check(kb, repair=repair, wait_s=0 if no_wait else None, on_wait=_waiting)
        report.home_usage = home_usage(settings)
        home_dir = "the PostgreSQL database" if settings.uses_postgres else settings.home
        if as_json:
            print(report.model_dump_json())
        else:
            say(out, "Checked {} document(s), {} chunk row(s) in {}.", report.documents, report.chunk_rows, home_dir)
            if report.problems:
                table = Table()
                for column in ("problem", "doc_id", "detail", "repair"):
                    table.add_column(column, overflow="fold")
                for p in report.problems:
                    table.add_row(shown(p.kind), shown(p.doc_id), shown(p.detail), shown(p.fixed or "-"))
                out.print(table)
            remaining = len(report.remaining)
            if not report.problems:
                say(out, "[green]No problems found.[/]")
            elif remaining:
                hint = "" if repair else " Run `citewise doctor --repair` to fix them."
                say(out, "[red]{} problem(s) remain.[/]{}", remaining, hint)
            else:
                say(out, "[green]Repaired {} problem(s).[/]", len(report.problems))
            _print_home_usage(report.home_usage)
        return 1 if report.remaining else 0

    _run(go)


def _print_home_usage(usage) -> None:
    """The home's size by part (`citewise doctor`), then the total."""
    from citewise.index.doctor import HOME_PARTS, human_bytes

    if usage is None:
        return
    say(out, "On disk in {}:", usage.home)
    table = Table()
    table.add_column("part")
    table.add_column("size", justify="right")
    for part, size in usage.parts.items():
        table.add_row(HOME_PARTS[part], human_bytes(size))
    table.add_section()
    table.add_row("total", human_bytes(usage.total))
    out.print(table)


# -- sources -------------------------------------------------------------------------------------------------------


@sources_app.command("add")
def sources_add(
    name: Annotated[str, typer.Argument(help="A name for the source (lowercase, digits, _ -).", show_default=False)],
    url_or_path: Annotated[
        str, typer.Argument(help="Site URL, Git clone URL or repository path, or a folder.", show_default=False)
    ],
    owner: OwnerOpt = None,
    include: Annotated[
        list[str] | None,
        typer.Option("--include", help="Glob or URL prefix documents must match (repeatable).", show_default=False),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude", help="Glob or URL prefix of documents to leave out (repeatable).", show_default=False
        ),
    ] = None,
    every: Annotated[
        str | None, typer.Option("--every", help="`citewise serve` syncs it this often: 6h, 30m, 1d.")
    ] = None,
    ref: Annotated[str | None, typer.Option("--ref", help="Git: branch or tag (default: HEAD).")] = None,
    root: Annotated[str, typer.Option("--root", help="Git: folder inside the repository to read.")] = "",
    url_template: Annotated[
        str | None,
        typer.Option("--url-template", help="Git: citation URL with {ref} {commit} {path} {page}."),
    ] = None,
    slugs: Annotated[
        str, typer.Option("--slugs", help="Heading anchors of the rendered pages: github or mkdocs.")
    ] = "github",
    kind: Annotated[str | None, typer.Option("--kind", help="web, git or folder (default: from the URL).")] = None,
    allow_private_network: Annotated[
        bool,
        typer.Option("--allow-private-network", help="Allow loopback, private and link-local addresses."),
    ] = False,
    max_pages: Annotated[int | None, typer.Option("--max-pages", help="Web: most pages per sync.")] = None,
    max_depth: Annotated[int | None, typer.Option("--max-depth", help="Web: most links followed from a seed.")] = None,
    home: HomeOpt = None,
) -> None:
    """Declare a source in citewise.toml and the home. `citewise sources sync NAME` then brings it in."""

    def go() -> int:
        from citewise.settings import SourceKind, SourceSpec
        from citewise.sources.config import all_specs, check_name, config_path, kind_of, redact_url, write_to_config
        from citewise.sources.fetch import check_scheme
        from citewise.sources.state import open_source_state

        settings = _settings(home)
        check_name(name)
        if name in all_specs(settings):
            raise CitewiseError(f"A source named {name!r} exists already; `citewise sources remove {name}` first.")
        values = dict(
            url=url_or_path, kind=kind, owner=owner or "public", include=tuple(include or ()),
            exclude=tuple(exclude or ()), every=every, ref=ref, root=root, url_template=url_template, slugs=slugs,
            allow_private_network=allow_private_network, max_pages=max_pages, max_depth=max_depth,
        )  # fmt: skip
        try:
            spec = SourceSpec(**{k: v for k, v in values.items() if v is not None})
        except PydanticValidationError as exc:
            error = exc.errors()[0]
            raise CitewiseError(f"Invalid source: {'.'.join(map(str, error['loc']))}: {error['msg']}") from exc
        spec.kind = kind_of(spec)
        if "://" not in spec.url and not spec.url.startswith("git@"):
            spec.url = str(Path(spec.url).expanduser().resolve())  # a server started elsewhere finds it too
        if spec.kind == SourceKind.WEB:
            check_scheme(spec.url)
        if spec.kind == SourceKind.FOLDER and spec.url_template:
            raise CitewiseError(
                "A folder source links like `citewise ingest`: set ingest.base_url, not --url-template."
            )
        path = config_path()
        write_to_config(path, name, spec)
        open_source_state(settings).save_spec(name, spec)
        say(out, "Added source {} ({}: {}) to {}.", name, spec.kind, redact_url(spec.url), path)
        schedule = f" `citewise serve` syncs it every {spec.every}." if spec.every else ""
        say(out, "Bring it in with `citewise sources sync {}`.{}", name, schedule)
        return 0

    _run(go)


@sources_app.command("list")
def sources_list(home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Show every source: last sync, documents, failures, next scheduled run."""

    def go() -> int:
        from citewise.sources.config import redact_url
        from citewise.sources.sync import next_run, runs

        found = runs(_settings(home))
        rows = []
        for run in found:
            upcoming = next_run(run)
            rows.append(
                {
                    "name": run.name,
                    "kind": str(run.spec.kind or ""),
                    "url": redact_url(run.spec.url),
                    "owner": run.spec.owner,
                    "every": run.spec.every,
                    "last_sync": run.last_finished,
                    "last_ok": run.last_ok,
                    "last_error": run.last_error,
                    "last_success": run.last_success,
                    "documents": run.documents,
                    "failures": run.report.get("failed", 0),
                    "next_run": upcoming.isoformat(timespec="seconds") if upcoming else None,
                }
            )
        if as_json:
            print(json.dumps(rows))
            return 0
        if not rows:
            out.print("No sources. Add one with `citewise sources add NAME URL_OR_PATH`.")
            return 0
        table = Table()
        for column in ("name", "kind", "url", "owner", "every", "last sync", "documents", "failures", "next run"):
            table.add_column(column, overflow="fold")
        for row in rows:
            if row["last_ok"] is None:
                last = "never"
            elif row["last_ok"]:
                last = f"[green]ok[/] {shown(row['last_sync'] or '')}"
            else:
                last = f"[red]failed[/] {shown(row['last_sync'] or '')}: {shown(row['last_error'] or '')}"
            table.add_row(
                shown(row["name"]), row["kind"], shown(row["url"]), shown(row["owner"]), row["every"] or "by hand",
                last, str(row["documents"]), str(row["failures"]), row["next_run"] or "-",
            )  # fmt: skip
        out.print(table)
        return 0

    _run(go)


@sources_app.command("sync")
def sources_sync(
    name: Annotated[str | None, typer.Argument(help="The source to sync (default: every source).")] = None,
    no_wait: NoWaitOpt = False,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Bring sources up to date: new and changed documents indexed, gone ones removed. Exit 1 if a sync failed."""

    def go() -> int:
        from citewise.index.knowledge_base import KnowledgeBase
        from citewise.sources.config import all_specs, spec_of
        from citewise.sources.sync import sync_source

        settings = _settings(home)
        names = [name] if name else list(all_specs(settings))
        if name:
            spec_of(settings, name)
        if not names:
            raise CitewiseError("No sources to sync. Add one with `citewise sources add NAME URL_OR_PATH`.")
        kb = KnowledgeBase(settings)
        reports = []
        for each in names:
            with _progress(not as_json) as progress:
                report = sync_source(kb, each, progress=progress, wait_s=0 if no_wait else None, on_wait=_waiting)
            reports.append(report)
            if not as_json:
                _print_sync(report)
        if as_json:
            print(json.dumps([r.model_dump(mode="json") for r in reports]))
        return 0 if all(r.ok for r in reports) else 1

    _run(go)


def _print_sync(report) -> None:
    if not report.ok:
        say(err, "[bold red]{}: sync failed:[/] {}", report.source, report.error or "")
        return
    for failure in report.failures:
        say(err, "[red]FAILED[/] {}: {}", failure.document, failure.error)
    parts = [
        f"{report.added} added", f"{report.updated} updated", f"{report.unchanged} unchanged",
        f"{report.removed} removed",
    ]  # fmt: skip
    if report.failed:
        parts.append(f"{report.failed} failed")
    detail = f"{report.chunks_embedded} chunks embedded, {report.chunks_reused} reused"
    if report.kind == "web":
        detail += f"; {report.requests} requests, {report.not_modified} not modified"
    if report.revision:
        detail += f"; commit {report.revision[:12]}"
    out.print(
        f"{shown(report.source)}: {', '.join(parts)} ({shown(detail)}). [dim]{report.elapsed_s:.1f}s[/]",
        highlight=False,
    )
    for note in report.notes:
        say(err, "[yellow]Note:[/] {}", note)


@sources_app.command("remove")
def sources_remove(
    name: Annotated[str, typer.Argument(help="The source to remove.", show_default=False)],
    no_wait: NoWaitOpt = False,
    home: HomeOpt = None,
) -> None:
    """Remove a source and its documents from the index, the home and citewise.toml."""

    def go() -> int:
        from citewise.index.knowledge_base import KnowledgeBase
        from citewise.sources.sync import remove_source

        removed = remove_source(KnowledgeBase(_settings(home)), name, wait_s=0 if no_wait else None, on_wait=_waiting)
        say(out, "Removed source {} and its {} document(s).", name, removed)
        return 0

    _run(go)


@eval_app.command("retrieval")
def eval_retrieval(
    beir: Annotated[Path, typer.Option("--beir", help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv.")],
    split: Annotated[str, typer.Option("--split", help="Which qrels file to use.")] = "test",
    mode: Annotated[str, typer.Option("--mode", help="hybrid, dense, lexical or all.")] = "all",
    as_json: JsonOpt = False,
) -> None:
    """nDCG@10, Recall@10/100 and MRR@10 per retrieval mode, on a BEIR-format dataset (in a temporary home)."""

    def go() -> int:
        from citewise.eval.retrieval import evaluate, load_beir

        if mode == "all":
            modes = list(RetrievalMode)
        else:
            try:
                modes = [RetrievalMode(mode)]
            except ValueError:
                raise CitewiseError(f"Unknown --mode {mode!r}; use hybrid, dense, lexical or all") from None
        dataset = load_beir(beir, split)
        with _progress(not as_json) as progress:
            results = evaluate(_eval_settings(), dataset, modes, progress=progress)
        if as_json:
            print(json.dumps(results))
            return 0
        table = Table(title=shown(f"{beir.name} ({results['queries']} queries, {results['corpus']} documents)"))
        metrics = ["ndcg@10", "recall@10", "recall@100", "mrr@10"]
        for column in ["mode", *metrics]:
            table.add_column(column, justify="right")
        for name, figures in results["modes"].items():
            table.add_row(name, *(f"{figures[m]:.4f}" for m in metrics))
        out.print(table)
        out.print(
            f"ingest {results['ingest_s']:.1f}s · query p50 {results['query_p50_ms']:.1f} ms · "
            f"p95 {results['query_p95_ms']:.1f} ms"
        )
        return 0

    _run(go)


@eval_app.command("answers")
def eval_answers(
    squad2: Annotated[
        Path | None, typer.Option("--squad2", help="SQuAD v2 JSON: every paragraph becomes a document.")
    ] = None,
    jsonl: Annotated[
        Path | None,
        typer.Option("--jsonl", help='JSON lines {"question", "answers": [...]|[], "context"?}; [] = unanswerable.'),
    ] = None,
    rgb: Annotated[
        Path | None, typer.Option("--rgb", help='RGB-style JSON lines {"query", "answer", "positive", "negative"}.')
    ] = None,
    rejection: Annotated[
        bool,
        typer.Option("--rejection", help="With --rgb: index only the negative passages; every answer should refuse."),
    ] = False,
    questions: Annotated[
        Path | None,
        typer.Option(
            "--questions",
            help='Docs questions, JSON lines {"question", "answerable", "expect_any": [...]} or {"question", '
            '"answer"}; asked against --docs.',
            show_default=False,
        ),
    ] = None,
    corpus: Annotated[
        list[Path] | None,
        typer.Option("--docs", "--corpus", help="Ingest this docs folder or file (repeatable).", show_default=False),
    ] = None,
    mode: Annotated[str, typer.Option("--mode", help='Answerer: quote, local or "provider:model".')] = "quote",
    limit: Annotated[
        int | None, typer.Option("--limit", help="Ask only N questions, sampled with --seed.", show_default=False)
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the --limit sample.")] = 0,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            "--cache-dir", help="Keep the index here between runs (reruns skip the ingest).", show_default=False
        ),
    ] = None,
    details: Annotated[
        Path | None,
        typer.Option("--details", help="Write one JSON line per question to this file.", show_default=False),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Refusal precision/recall/F1, answer recall, token F1, citation validity and support, exit reasons, latency."""

    def go() -> int:
        from citewise.eval.answers import evaluate_answers
        from citewise.eval.formats import load_jsonl, load_questions, load_rgb, load_squad2

        sets = (("--squad2", squad2), ("--jsonl", jsonl), ("--rgb", rgb), ("--questions", questions))
        given = [name for name, value in sets if value]
        if len(given) != 1:
            raise CitewiseError(
                "Give exactly one data set: --squad2 FILE, --jsonl FILE, --rgb FILE or --questions FILE --docs DIR"
            )
        if rejection and not rgb:
            raise CitewiseError("--rejection only applies to --rgb")
        if questions and not corpus:
            raise CitewiseError("--questions asks about a docs folder: give it with --docs DIR")
        need = not corpus  # with a docs folder as the corpus, the file may bring questions only
        if questions:
            dataset = load_questions(questions)
        elif squad2:
            dataset = load_squad2(squad2, require_passages=need)
        elif jsonl:
            dataset = load_jsonl(jsonl, require_passages=need)
        else:
            dataset = load_rgb(rgb, rejection=rejection, require_passages=need)
        with _progress(not as_json) as progress:
            report = evaluate_answers(
                dataset,
                _eval_settings(),
                mode=mode,
                limit=limit,
                seed=seed,
                corpus_paths=corpus or (),
                cache_dir=cache_dir,
                details_path=details,
                progress=progress,
            )
        if as_json:
            print(json.dumps(report))
            return 0
        _print_answer_report(report)
        return 0

    _run(go)


FAILURES_SHOWN = 20


def _print_answer_report(r: dict) -> None:
    def show(value: float | None) -> str:
        return "–" if value is None else f"{value:.4f}"

    refusal = r["refusal"]
    table = Table(
        title=shown(
            f"{r['dataset']} ({r['format']}): {r['questions']} questions ({r['answerable']} answerable, "
            f"{r['unanswerable']} unanswerable) over {r['corpus']} documents · mode {r['mode']}"
        )
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("what it means")
    rows = [
        ("refusal precision", show(refusal["precision"]), "refused questions that were unanswerable"),
        ("refusal recall", show(refusal["recall"]), "unanswerable questions that were refused"),
        ("refusal F1", show(refusal["f1"]), f"tp {refusal['tp']} · fp {refusal['fp']} · fn {refusal['fn']}"),
        ("answer recall", show(r["answer_recall"]), "answerable: a gold answer appears in the answer"),
        ("token F1", show(r["token_f1"]), "answerable: SQuAD token overlap with the best gold answer"),
        ("citation validity", show(r["citation_validity"]), f"of {r['citations']} citations, point to a source"),
        ("citation support", show(r["citation_support"]), "answerable: a cited chunk holds a gold answer"),
        ("own-passage citation", show(r["context_citation"]), "answerable: cites the question's own passage"),
    ]
    if r["format"] == "questions":  # judged by expected strings: the SQuAD-style figures would mean nothing here
        keep = {"citation validity"} | (
            {"refusal precision", "refusal recall", "refusal F1"} if r["unanswerable"] else set()
        )
        rows = [row for row in rows if row[0] in keep]
    docs = r.get("docs") or {}
    answerable, unanswerable = docs.get("answerable") or {}, docs.get("unanswerable") or {}
    if answerable.get("questions"):
        rows[:0] = [
            (
                "right",
                show(answerable["right_share"]),
                f"answerable: {answerable['right']} answered with an expected answer",
            ),
            ("wrong", show(answerable["wrong_share"]), f"answerable: {answerable['wrong']} answered without one"),
            ("refused", show(answerable["refused_share"]), f"answerable: {answerable['refused']} refused"),
        ]
    if unanswerable.get("questions"):
        rows.insert(
            3 if answerable.get("questions") else 0,
            (
                "unanswerable refused",
                show(unanswerable["refused_share"]),
                f"{unanswerable['refused']} of {unanswerable['questions']} refused, as they should be",
            ),
        )
    for row in rows:
        table.add_row(*(shown(cell) for cell in row))
    out.print(table)
    failures = r.get("failures") or []
    if failures:
        out.print(f"\n[bold]Failures[/] ({len(failures)}):")
        for failure in failures[:FAILURES_SHOWN]:
            expected = json.dumps(failure["expected"], ensure_ascii=False) if failure["expected"] else ""
            say(
                out,
                "{}",
                f"  {failure['outcome'].upper():8} {failure['id']}: {failure['question']}"
                + (f"\n           expected {expected}" if expected else "")
                + f"\n           said: {failure['said']}",
            )
        if len(failures) > FAILURES_SHOWN:
            out.print(
                f"  … {len(failures) - FAILURES_SHOWN} more (--json or --details lists them all)", highlight=False
            )
    reasons = ", ".join(f"{name} {count}" for name, count in r["exit_reasons"].items())
    say(
        out,
        "{}",
        f"exit reasons: {reasons} · latency p50 {r['latency_p50_ms']:.0f} ms · p95 {r['latency_p95_ms']:.0f} ms · "
        f"ingest {r['ingest_s']:.1f}s" + (f" · {r['skipped']} skipped" if r["skipped"] else ""),
    )


@app.command()
def gaps(
    home: HomeOpt = None,
    min_count: Annotated[int, typer.Option("--min-count", min=1, help="Only groups asked at least N times.")] = 1,
    owner: Annotated[
        str | None, typer.Option("--owner", help="Only this owner's questions and ratings (default: every owner).")
    ] = None,
    days: Annotated[int, typer.Option("--days", min=1, help="How many days the answer rate and ratings cover.")] = 30,
    as_json: JsonOpt = False,
) -> None:
    """What the docs should say next: refused or insufficient questions from the log, grouped, most asked first; then
    the answers readers marked bad, refusals by reason and the answer rate over time."""

    def go() -> int:
        from citewise.eval.gaps import gap_report
        from citewise.feedback.analytics import analytics_report, mark_rated_refusals
        from citewise.feedback.store import open_feedback_store
        from citewise.types import Owner

        settings = _settings(home)
        # A bad id is a clear error, not an empty report.
        owner_id = None if owner is None else Owner.of(owner).id
        report = gap_report(settings, min_count=min_count, owner=owner_id)
        # A read-only command: the ratings are read only when a server has kept some (never creates the file).
        has_feedback = settings.uses_postgres or settings.feedback_path.exists()
        store = open_feedback_store(settings) if has_feedback else None
        mark_rated_refusals(report["groups"], store, owner=owner_id)  # a false refusal is no missing page
        report["analytics"] = analytics_report(settings, store, owner=owner_id, days=days)
        if as_json:
            print(json.dumps(report))
            return 0
        _print_gaps(report, min_count)
        _print_analytics(report["analytics"])
        return 0

    _run(go)


def _print_gaps(report: dict, min_count: int) -> None:
    if not report["groups"]:
        if report["gaps"]:
            message = f"No group of unanswered questions was asked {min_count} times or more"
        else:
            message = "No unanswered questions"
        say(out, "{} ({}: {} logged).", message, report["log"], report["questions"])
        return
    table = Table(title=f"Docs gaps: {report['gaps']} of {report['questions']} logged questions")
    for column, justify in (("asked", "right"), ("question (and other wordings)", "left"), ("queries tried", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    for group in report["groups"]:  # logged text is the users': escape it, it is not Rich markup
        wordings = [shown(group["question"]), *(f"[dim]{shown(q['question'])}[/]" for q in group["questions"][1:4])]
        notes = group["insufficiencies"][:2]
        if notes:
            wordings.append("[yellow]missing: " + shown("; ".join(notes)) + "[/]")
        if group.get("rated_wrong"):  # the reader expected an answer: check the docs before writing one
            said = "; ".join(f"“{c}”" for c in group.get("rated_wrong_comments") or [])
            wordings.append(
                f"[magenta]refusal rated wrong by readers ({group['rated_wrong']}): the docs may answer it already"
                + (f" — {shown(said)}" if said else "")
                + "[/]"
            )
        table.add_row(str(group["count"]), "\n".join(wordings), shown("\n".join(group["queries"][:5])))
    out.print(table)


def _print_analytics(a: dict) -> None:
    if not a["questions"] and not a["ratings"]["up"] and not a["ratings"]["down"]:
        return
    rate = f"{a['answer_rate']:.0%}" if a["answer_rate"] is not None else "—"
    say(
        out,
        "\n[bold]Last {} days:[/] {} questions, {} answered, {} not covered, {} failed (answer rate {}); "
        "rated {} up, {} down.",
        a["days"], a["questions"], a["answered"], a["refused"], a["failed"], rate,
        a["ratings"]["up"], a["ratings"]["down"],
    )  # fmt: skip
    if a["refusals_by_reason"]:
        table = Table(title="Refusals by reason")
        table.add_column("count", justify="right")
        table.add_column("reason", overflow="fold")
        for r in a["refusals_by_reason"]:
            table.add_row(str(r["count"]), shown(r["meaning"] or r["reason"]) + f" [dim]({shown(r['reason'])})[/]")
        out.print(table)
    if a["marked_bad"]:
        table = Table(title="Answers marked bad")
        for column in ("question", "reader's comment", "exit reason", "sources"):
            table.add_column(column, overflow="fold")
        for bad in a["marked_bad"]:
            table.add_row(
                shown(bad["question"]), shown(bad.get("comment") or ""), shown(bad["exit_reason"]),
                str(len(bad["citations"])),
            )  # fmt: skip
        out.print(table)
    if len(a["by_day"]) > 1:
        table = Table(title="Answer rate by day")
        for column in ("day", "questions", "answered", "rate"):
            table.add_column(column, justify="right" if column != "day" else "left")
        for day in a["by_day"][-14:]:
            table.add_row(day["date"], str(day["questions"]), str(day["answered"]), f"{day['answer_rate']:.0%}")
        out.print(table)


@db_app.command("upgrade")
def db_upgrade(home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Create or migrate the PostgreSQL schema at CITEWISE_DATABASE_URL to this version's (idempotent)."""

    def go() -> int:
        from citewise.state.database import Database
        from citewise.state.migrations import LATEST

        settings = _settings(home)
        if settings.database_url is None:
            raise CitewiseError("No database configured: set CITEWISE_DATABASE_URL=postgresql://user:password@host/db")
        db = Database(settings.database_url.get_secret_value(), connect_timeout_s=settings.postgres.connect_timeout_s)
        before = db.schema_version()
        if before > LATEST:
            raise CitewiseError(
                f"The database's schema is at version {before}, newer than this Citewise knows ({LATEST}): upgrade "
                "Citewise instead."
            )
        applied = db.upgrade()
        if as_json:
            print(json.dumps({"before": before, "version": LATEST, "applied": applied}))
        elif applied:
            say(
                out, "Schema upgraded from version {} to {} (applied {}).", before, LATEST, ", ".join(map(str, applied))
            )
        else:
            say(out, "Schema already at version {}; nothing to do.", LATEST)
        return 0

    _run(go)


@app.command()
def migrate(
    from_home: Annotated[
        Path, typer.Option("--from", help="The embedded home to copy (its index/, questions, LLM cache).")
    ],
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="postgresql://user:password@host/db, an empty database (default: $CITEWISE_DATABASE_URL; the "
            "environment keeps the password out of the process list).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy an embedded home into PostgreSQL: chunks with their vectors (no re-embedding), registry, question log."""

    def go() -> int:
        from pydantic import SecretStr

        from citewise.migrate import migrate_home

        source = _settings(from_home)
        url = SecretStr(to) if to else source.database_url
        if url is None:
            raise CitewiseError("Say where to copy to: --to postgresql://… or CITEWISE_DATABASE_URL")
        target = source.model_copy(update={"store": "postgres", "database_url": url})
        with _progress(not as_json) as progress:
            report = migrate_home(source, target, progress=progress)
        if as_json:
            print(json.dumps(report.__dict__))
            return 0
        say(
            out,
            "Copied {} document(s), {} chunk(s) with their vectors ({}, {} dims), {} logged question(s), {} cached "
            "LLM repl(ies), {} source(s), {} answer(s) kept for feedback, {} rating(s).",
            report.documents,
            report.chunks,
            report.embeddings,
            report.dimension,
            report.questions,
            report.llm_cache,
            report.sources,
            report.feedback_answers,
            report.feedback_ratings,
        )
        for item in report.not_copied:
            say(out, "[dim]Not copied: {}[/]", item)
        say(out, "Serve it with CITEWISE_STORE=postgres and CITEWISE_DATABASE_URL set to the same database.")
        return 0

    _run(go)


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option("--host", help="Interface to bind (default 127.0.0.1; 0.0.0.0 for all).")
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port to listen on (default 8000).")] = None,
    home: HomeOpt = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
    pages: Annotated[
        Path | None,
        typer.Option(
            "--pages",
            help="Serve this docs folder read-only at /pages/ (Markdown as HTML): ingest it with --base-url "
            "http://HOST:PORT/pages and answers link to it.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the HTTP API and the web chat (uvicorn). See docs/server.md."""

    def go() -> int:
        import logging

        import uvicorn

        from citewise.index.write_lock import prepare_home
        from citewise.server import create_app
        from citewise.server.serving import uvicorn_config

        levels = ("debug", "info", "warning", "error")
        if log_level.lower() not in levels:
            raise CitewiseError(f"Unknown --log-level {log_level!r}; use one of: {', '.join(levels)}")
        # Citewise's own records (failed runs with their details, disconnects) next to uvicorn's access log.
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)-9s %(name)s: %(message)s"))
        citewise_log = logging.getLogger("citewise")
        citewise_log.addHandler(handler)
        citewise_log.setLevel(log_level.upper())
        citewise_log.propagate = False
        if pages is not None and not pages.is_dir():
            raise CitewiseError(f"--pages {pages}: no such folder. Give the docs folder you ingested.")
        settings = _settings(home, server={"pages_dir": pages.resolve()} if pages is not None else None)
        # A server writes to its home (uploads, sessions, the model cache) from its first request on: a home it
        # can't create or write to is the operator's mistake to hear about now, not a traceback at start-up.
        prepare_home(settings.home)
        from citewise.index.knowledge_base import KnowledgeBase

        KnowledgeBase(settings).require_current()  # an index an older Citewise wrote: say what to run, don't serve
        bind_host = host or settings.server.host
        bind_port = port or settings.server.port
        if not settings.api_keys and bind_host not in ("127.0.0.1", "localhost", "::1"):
            err.print(
                f"[yellow]Warning:[/] no API keys are set and the server listens on {bind_host}: anyone who can "
                "reach it can ask, upload and delete documents. Set CITEWISE_API_KEYS (see docs/server.md).",
                highlight=False,
            )
        say(out, "Citewise on http://{}:{}/  [dim](home {})[/]", bind_host, bind_port, settings.home)
        if settings.server.pages_dir is not None:
            say(out, "[dim]Pages of {} at http://{}:{}/pages/[/]", settings.server.pages_dir, bind_host, bind_port)
        config = uvicorn_config(
            create_app(settings), settings, host=bind_host, port=bind_port, log_level=log_level.lower()
        )
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the Ctrl+C it handled, after shutting down
            uvicorn.Server(config).run()
        return 0

    _run(go)


@app.command()
def mcp(owner: OwnerOpt = None, home: HomeOpt = None) -> None:
    """Serve the docs to an MCP client (an IDE agent) over stdio: tools search_docs, open_citation and ask, and the
    documents as resources. `citewise serve` offers the same at /mcp over HTTP. See docs/mcp.md."""

    def go() -> int:
        import anyio

        from citewise.agent.runner import Citewise
        from citewise.server.mcp_server import build_mcp
        from citewise.types import Owner

        as_owner = Owner.of(owner)
        cw = Citewise(_settings(home))

        async def agent() -> Citewise:
            return cw

        # stdout is the protocol's: everything else (logs, warnings) goes to stderr.
        anyio.run(build_mcp(agent, lambda: as_owner).run_stdio_async)
        return 0

    _run(go)


def _app_for(args: Sequence[str]) -> typer.Typer:
    """The app that runs `args`: when they name a command (or a group of commands), the app with only that one.
    Typer builds the Click parameters of every command it holds before it parses anything (0.05 s for all of
    Citewise's), and a run needs only its own command's; what the chosen command says and does is the same."""
    name = args[0] if args else None
    commands = [
        c for c in app.registered_commands if (c.name or typer.main.get_command_name(c.callback.__name__)) == name
    ]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app  # --help, --version, a mistyped command: the whole app answers
    only = copy.copy(app)
    only.registered_commands, only.registered_groups = commands, groups
    return only


def main() -> None:
    # A command's start-up (the index engine, the model runtime, the agent) creates some 100,000 objects that live
    # to the end: 100-odd collector passes over them cost 0.04-0.07 s of every cold `search` and `ask` and free a
    # few hundred. Collection is paused for the process; `_run` resumes it for every command but those two.
    gc.disable()
    _app_for(sys.argv[1:])()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
