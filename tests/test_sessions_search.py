"""Finding a session in a person's words (issue 42): stop words left out of the band
match, the best match first inside a band when asked (`ranking="relevance"`, the seed's
newest-first order staying the default), a Codex IDE preamble never the title, and
snippets cut from the matched text by the store — on both stores."""

import json

import pytest

from koinii import Refused
from koinii.sessions import Introspection, SessionStore, snippets
from koinii.sessions.importing import import_paths
from koinii.sessions.search import search_terms
from tests.conftest import RECORDED_CWD


@pytest.fixture
def store(kb):
    return SessionStore(kb)


def session(store, title, request, *, tools=None, at="2026-01-01"):
    """A finished one-turn session started at `at`; `tools`: what its tool printed."""
    sid = store.start_session(title=title, created_at=f"{at}T00:00:00Z")
    turn = store.start_turn(sid, request, created_at=f"{at}T01:00:00Z")
    if tools is not None:
        iteration = store.record_iteration(turn, prose="Running it.")
        store.record_block(iteration, tool="Bash", code="make", stdout=tools)
    store.finish_turn(turn, "done", "complete", finished_at=f"{at}T02:00:00Z")
    return sid


# --- stop words -------------------------------------------------------------------------------


def test_a_question_in_a_persons_words_finds_its_session(store):
    wanted = session(store, "s1", "fix the flaky deploy of the billing service")
    session(store, "s2", "write the release notes")
    reader = Introspection(store)
    (hit,) = reader.list_sessions("where did we fix the flaky deploy?", ranking="lexical")
    assert (hit["id"], hit["rank"], hit["is_in_request"]) == (wanted, 1, True)
    assert "flaky deploy" in hit["request_snippet"]


def test_stop_words_are_searched_when_a_search_holds_nothing_else(store):
    wanted = session(store, "s1", "where were we")
    assert search_terms("where were we") == ["where", "were", "we"]
    assert search_terms("Where did we deploy?") == ["deploy"]
    assert [r["id"] for r in Introspection(store).list_sessions("where were we")] == [wanted]


# --- relevance inside a band ------------------------------------------------------------------


def test_the_best_match_comes_first_in_its_band_when_asked_and_newest_first_by_default(store):
    log = "\n".join(f"step {n}: compiling module {n}" for n in range(300))
    best = session(
        store, "a", "run it", tools="lock held by pid 42: the deploy lock", at="2026-01-01"
    )
    newer = session(store, "b", "run it", tools=log + "\nlock released", at="2026-02-01")
    reader = Introspection(store)
    banded = reader.list_sessions("deploy lock")
    assert [(r["id"], r["rank"]) for r in banded][:1] == [(best, 4)]  # only one has both
    default = reader.list_sessions("lock")
    assert [(r["id"], r["rank"]) for r in default] == [(newer, 4), (best, 4)]  # the seed's
    relevant = reader.list_sessions("lock", ranking="relevance")
    assert [(r["id"], r["rank"]) for r in relevant] == [(best, 4), (newer, 4)]
    assert relevant[0]["tool_snippet"].startswith("lock held by pid 42")


def test_relevance_never_puts_a_worse_band_first(store):
    in_tools = session(store, "a", "run it", tools="rollback rollback rollback", at="2026-03-01")
    in_request = session(store, "b", "plan the rollback of a long migration", at="2026-01-01")
    in_title = session(store, "rollback drill", "go", at="2026-02-01")
    rows = Introspection(store).list_sessions("rollback", ranking="relevance")
    assert [(r["id"], r["rank"]) for r in rows] == [(in_title, 0), (in_request, 1), (in_tools, 4)]


# --- some of the words ------------------------------------------------------------------------


def test_a_session_holding_some_of_the_words_follows_the_bands(store):
    """A question in a person's words seldom has all its words in one field of one turn:
    the sessions holding at least half of them across their turns come after the seed's
    bands (rank 5), newest first, those holding more first under relevance; `lexical`
    stays the seed's bands alone, and tool output does not count."""
    most = store.start_session(title="Fix VAT rounding", created_at="2026-01-02T00:00:00Z")
    for request in ("round the VAT per line", "switch to Decimal for the totals"):
        turn = store.start_turn(most, request, created_at="2026-01-02T01:00:00Z")
        store.finish_turn(turn, "done", "complete", finished_at="2026-01-02T02:00:00Z")
    fewer = session(store, "y", "the VAT rounding rules of Germany", at="2026-01-03")
    session(store, "z", "run it", tools="VAT rounding switch", at="2026-01-04")
    session(store, "w", "the VAT report", at="2026-01-05")  # one word of four: too few
    reader = Introspection(store)
    search = "switch the VAT rounding to Decimal"
    assert reader.list_sessions(search, ranking="lexical") == []
    relevant = reader.list_sessions(search, ranking="relevance")
    assert [r["id"] for r in relevant if r["rank"] == 5] == [most, fewer]  # then by meaning
    assert relevant[0]["is_in_request"] and "Decimal" in relevant[0]["request_snippet"]
    default = reader.list_sessions(search, ranking="banded")  # newest first in the band
    assert [r["id"] for r in default if r["rank"] == 5] == [fewer, most]
    # a full page of the seed's bands leaves no room for it
    assert [r["id"] for r in reader.list_sessions("vat rounding", limit=2)] == [most, fewer]


def test_a_sub_agents_turns_count_for_its_session_among_some_of_the_words(store):
    parent = session(store, "Fix the flaky invoices test", "find out why it fails")
    child = store.start_session(title="sub", parent_session_id=parent)
    turn = store.start_turn(child, "list every test that calls now() of datetime")
    store.finish_turn(turn, "done", "complete")
    session(store, "other", "now run the tests again", at="2026-01-02")
    rows = Introspection(store).list_sessions("which tests call datetime now", ranking="relevance")
    assert (rows[0]["id"], rows[0]["rank"], rows[0]["is_in_request"]) == (parent, 5, True)
    assert "datetime" in rows[0]["request_snippet"]  # the sub-agent's request


def test_the_band_of_some_of_the_words_looks_at_the_newest_turns_holding_each(store, monkeypatch):
    """Its work is bounded however common a word is: the newest SOME_TURNS turns holding
    each word in each field (here one), so an older session past them is not found."""
    from koinii.sessions import search

    older = session(store, "a", "alpha and gamma", at="2026-01-01")
    newer = session(store, "b", "alpha and gamma", at="2026-01-02")
    reader = Introspection(store)
    found = reader.list_sessions("alpha beta gamma", ranking="relevance")
    assert [r["id"] for r in found if r["rank"] == 5] == [newer, older]
    monkeypatch.setattr(search, "SOME_TURNS", 1)
    found = reader.list_sessions("alpha beta gamma", ranking="relevance")
    assert [r["id"] for r in found if r["rank"] == 5] == [newer]


def test_an_unknown_ranking_names_relevance_among_the_choices(store):
    assert Introspection(store).list_sessions("x", ranking="best") == []  # reads never raise
    with pytest.raises(Refused) as refused:  # the operation itself refuses it
        store.call("list_sessions", search="x", ranking="best")
    assert refused.value.kind == "bad-option" and "relevance" in refused.value.data["allowed"]


# --- snippets, cut by the store ---------------------------------------------------------------


def test_a_match_deep_in_megabytes_of_tool_output_shows_its_own_words(store):
    before = "compiling the module\n" * 50_000  # a megabyte either side of the match
    after = "linking the binary\n" * 50_000
    found = "error: the quota exceeded for bucket uploads\n"
    sid = session(store, "t", "build", tools=before + found + after)
    (hit,) = Introspection(store).list_sessions("quota exceeded bucket")
    assert hit["id"] == sid and hit["is_in_tool"]
    snippet = hit["tool_snippet"]
    assert snippet.startswith("…") and snippet.endswith("…")
    assert "the quota exceeded for bucket uploads" in snippet
    assert len(snippets.WORD.findall(snippet)) <= snippets.SNIPPET_TOKENS


def test_a_long_texts_snippet_is_the_window_of_its_matches_region():
    text = (
        "noise " * 2_000 + "the deploy lock " + "filler " * 300 + "deploy lock held " + "x " * 900
    )
    assert len(text) > 4 * snippets.REGION_CHARS
    start, end = snippets.region(text, ["deploy", "lock"])
    assert start > 0 and end < len(text) and "the deploy lock" in text[start:end]
    chosen = snippets.snippet(text, ["deploy", "lock"])  # what windowing it all would show
    assert chosen == snippets.window(text, ["deploy", "lock"])
    assert chosen.startswith("…noise") and "the deploy lock filler" in chosen
    short = "a deploy lock b"
    assert snippets.snippet(short, ["lock"]) == snippets.window(short, ["lock"])


# --- a Codex IDE preamble is not a title ------------------------------------------------------


def rollout(path, *prompts):
    """A Codex rollout whose person typed `prompts`, one turn each."""
    lines = [
        {
            "timestamp": "2026-03-01T10:00:00.000Z",
            "type": "session_meta",
            "payload": {
                "id": "019d0000-0000-7000-8000-000000000001",
                "cwd": RECORDED_CWD,
                "timestamp": "2026-03-01T10:00:00.000Z",
                "model_provider": "openai",
            },
        }
    ]
    for n, prompt in enumerate(prompts):
        at = f"2026-03-01T10:0{n + 1}:00.000Z"
        lines += [
            {
                "timestamp": at,
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": prompt}],
                },
            },
            {
                "timestamp": at,
                "type": "event_msg",
                "payload": {"type": "user_message", "message": prompt, "images": []},
            },
            {"timestamp": at, "type": "event_msg", "payload": {"type": "task_complete"}},
        ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


PREAMBLE = (
    f"# Files mentioned by the user:\n\n## invoice.py: {RECORDED_CWD}/invoice.py\n\n"
    "## My request for Codex:\nround the VAT with Decimal in invoice.py\n"
)


def test_a_codex_title_is_the_request_after_an_ide_preamble(store, tmp_path):
    (report,) = import_paths(store, [rollout(tmp_path / "rollout-a.jsonl", PREAMBLE, "ship it")])
    title = Introspection(store).get_session(report["session_id"])["title"]
    assert title == "round the VAT with Decimal in invoice.py"


def test_a_preamble_without_a_request_gives_the_title_to_the_next_prompt(store, tmp_path):
    context = "# Context from my IDE setup:\n\n## Active file: invoice.py\n"
    (report,) = import_paths(store, [rollout(tmp_path / "rollout-b.jsonl", context, "ship it")])
    assert Introspection(store).get_session(report["session_id"])["title"] == "ship it"


# --- a word and its other forms ------------------------------------------------


def test_a_word_finds_its_other_forms(store):
    wanted = session(store, "s1", "the flaky test of the invoices fails one run in five")
    assert snippets.forms("failing")[:2] == ["failing", "fail"]
    assert {"fails", "failed"} <= set(snippets.forms("failing"))
    assert {"retry", "retries", "retrying"} <= set(snippets.forms("retries"))
    assert {"invoice", "invoicing"} <= set(snippets.forms("invoices"))
    assert {"run", "running"} <= set(snippets.forms("running"))
    assert snippets.forms("string")[0] == "string" and "str" not in snippets.forms("string")
    (hit,) = Introspection(store).list_sessions(
        "why does the invoices test fail", ranking="lexical"
    )
    assert (hit["id"], hit["rank"]) == (wanted, 1)
    assert "fails" in hit["request_snippet"] and "invoices" in hit["request_snippet"]
