"""The calls users of Cohere's rerank, rerankers, FlashRank and sentence-transformers write first, through the public API."""

from __future__ import annotations

import asyncio
import inspect

import numpy as np
import pandas as pd
import pytest

import decirank
from decirank import InvalidInputError
from decirank.testing import ScriptedBackend, use_backend

FLEAS = ["Fleas live 2-3 months on a host.", "Sourdough needs a starter.", "Cats can get fleas from other pets."]
TICKETS = [
    "Our whole site is down and customers cannot pay. Please help now!",
    "There is a small typo on your About page.",
    "I moved house; please update my address when you get a chance.",
]


def test_a_query_given_as_the_question_ranks_as_it_does_in_the_state():
    """rank(docs, query) with no state judges the items against the query: the flea page first, above 0.9."""
    by_question = decirank.rank(FLEAS, "how long do fleas live")
    in_state = decirank.rank(FLEAS, "Which passage best answers the question?", {"question": "how long do fleas live"})
    assert by_question[0].item == FLEAS[0] and by_question[0].probability > 0.9
    assert [entry.index for entry in by_question] == [entry.index for entry in in_state]


def test_rerank_takes_cohere_top_n_and_return_documents():
    """top_n is top_k's other name; both given is refused naming top_n; return_documents=False drops documents."""
    result = decirank.rerank("how long do fleas live", FLEAS, top_n=1, model="lexical")
    assert len(result) == 1 and result[0].index == 0 and result[0].document == FLEAS[0]
    bare = decirank.rerank("fleas", FLEAS, return_documents=False, model="lexical")
    assert [entry.document for entry in bare] == [None, None, None]
    assert sorted(entry.index for entry in bare) == [0, 1, 2]
    with pytest.raises(InvalidInputError) as refused:
        decirank.rerank("fleas", FLEAS, top_k=1, top_n=2, model="lexical")
    assert refused.value.field == "top_n"


def test_rerank_results_carry_the_input_position_beside_the_callers_id():
    """index is the position whatever the id; a duplicated id is refused, naming the document."""
    documents = [{"id": "b", "text": "bread"}, {"id": "a", "text": "fleas live months"}]
    result = decirank.rerank("fleas", documents, model="lexical")
    assert [(entry.id, entry.index) for entry in result] == [("a", 1), ("b", 0)]
    with pytest.raises(InvalidInputError) as refused:
        decirank.rerank("fleas", [{"id": 7, "text": "x"}, {"id": 7, "text": "y"}], model="lexical")
    assert refused.value.field == "documents.1.id"


def test_every_result_is_a_sequence_of_its_rows():
    """len(), indexing, slicing and iteration work on each tool's result."""
    with use_backend(ScriptedBackend()) as model:
        ranked = decirank.rank(["a", "b"], "Which?", model=model)
        kept = decirank.filter(["a", "b"], "Is it?", model=model)
        chosen = decirank.classify(["a", "b"], "Which?", ["x", "y"], model=model)
        scored = decirank.score(["a", "b"], "Is it?", model=model)
        reranked = decirank.rerank("q", ["a", "b"], model=model)
    for result, rows in [
        (ranked, ranked.ranked),
        (kept, kept.decisions),
        (chosen, chosen.decisions),
        (scored, scored.probabilities),
        (reranked, reranked.results),
    ]:
        assert len(result) == 2 and list(result) == list(rows) and result[0] == rows[0] and result[:1] == rows[:1]


@pytest.mark.parametrize(
    "texts",
    [
        ("fleas", "bread"),
        (text for text in ["fleas", "bread"]),
        {"a": "fleas", "b": "bread"}.values(),
        np.array(["fleas", "bread"]),
        pd.Series(["fleas", "bread"]),
    ],
    ids=["tuple", "generator", "dict-values", "numpy", "pandas"],
)
def test_any_iterable_is_a_list_of_texts(texts):
    """A tuple, a generator, dict.values(), a numpy array and a pandas Series are read as the list they hold."""
    result = decirank.rerank("fleas", texts, model="lexical")
    assert sorted(entry.document for entry in result) == ["bread", "fleas"]
    assert isinstance(result[0].document, str)


def test_a_string_or_a_mapping_is_not_taken_for_a_list():
    with pytest.raises(InvalidInputError, match="texts"):
        decirank.score("fleas", "Is it about pets?", model="lexical")
    with pytest.raises(InvalidInputError, match="items"):
        decirank.filter({"a": "fleas"}, "Is it about pets?", model="lexical")


def test_a_graded_question_with_levels_answers_each_text_with_a_level():
    """score(levels=...) gives the outage high and the typo and address change low, with expected levels."""
    result = decirank.score(TICKETS, "How urgent is this ticket?", levels=["low", "medium", "high"])
    assert [decision.level for decision in result] == ["high", "low", "low"]
    assert result.levels[0].expected_level > 1.5 > result.levels[1].expected_level
    assert set(result.levels[0].probabilities) == {"low", "medium", "high"}
    assert abs(sum(result.levels[2].probabilities.values()) - 1) < 1e-6
    assert result.to_dict()["levels"][0]["level"] == "high"


def test_a_degree_question_without_levels_is_read_as_its_yes_no_question():
    """'How urgent is this ticket?' scores as 'Is this ticket urgent?' does: the outage first."""
    degree = decirank.score(TICKETS, "How urgent is this ticket?")
    plain = decirank.score(TICKETS, "Is this ticket urgent?")
    assert list(degree) == list(plain)
    assert degree[0] > max(degree[1], degree[2])


def test_levels_refuse_what_only_a_yes_no_question_takes():
    with pytest.raises(InvalidInputError) as refused:
        decirank.score(["a"], "How urgent?", levels=["low", "high"], true="urgent", model="lexical")
    assert refused.value.field == "true"
    with pytest.raises(InvalidInputError, match="levels"):
        decirank.score(["a"], "How urgent?", levels=["low"], model="lexical")


def test_describe_picks_the_field_score_and_classify_read():
    """A ticket {"id", "body"} read by its body scores as the body alone does."""
    tickets = [{"id": 0, "body": "I was charged twice"}, {"id": 1, "body": "The app crashes at login"}]
    by_field = decirank.score(tickets, "Is this about billing?", describe="body")
    alone = decirank.score([ticket["body"] for ticket in tickets], "Is this about billing?")
    assert list(by_field) == list(alone) and by_field[0] > by_field[1]
    chosen = decirank.classify(tickets, "Which team?", {"billing": "payments", "tech": "the app"}, describe="body")
    assert chosen[0].choice == "billing"
    with pytest.raises(InvalidInputError) as refused:
        decirank.score(tickets, "Is it?", describe="subject", model="lexical")
    assert refused.value.field == "texts.0"


def test_a_client_holds_the_settings_every_call_shares():
    """Client(model=...) passes its settings to every tool; a call's own argument wins."""
    chosen = ScriptedBackend()
    with use_backend(chosen) as model:
        client = decirank.Client(model=model)
        client.rank(["a", "b"], "Which?")
        client.score(["a"], "Is it?")
        assert len(chosen.requests) == 2
        assert client.rerank("q", ["a"], model="lexical").model == "lexical:bm25"
        # help(client.rerank) shows the tool's own arguments, as help(decirank.rerank) does.
        assert list(inspect.signature(client.rerank).parameters)[:3] == ["query", "documents", "top_k"]
    assert "api_key='...'" in repr(decirank.Client(model="local", api_key="secret"))
    assert "secret" not in repr(decirank.Client(model="local", api_key="secret"))


def test_an_async_client_awaits_the_async_tools():
    client = decirank.AsyncClient(model="lexical")
    result = asyncio.run(client.rerank("fleas", ["bread", "fleas live months"], top_n=1))
    assert result[0].index == 1


def test_an_api_key_goes_to_the_models_that_take_one():
    """A key given to a model that takes none is refused, naming api_key."""
    with pytest.raises(InvalidInputError) as refused:
        decirank.Client(model="lexical", api_key="secret").score(["a"], "Is it?")
    assert refused.value.field == "api_key"
