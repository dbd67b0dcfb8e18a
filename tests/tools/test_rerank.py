"""rerank: one likelihood per document, split across concurrent calls, nothing invented."""

from __future__ import annotations

import asyncio

import pytest

import decirank
from decirank.errors import InvalidAnswerError, InvalidInputError, ServerError
from decirank.testing import ScriptedBackend, use_backend
from decirank.tools.rerank import QUESTION_PREFIX
from decirank.types.answers import LikelihoodAnswer
from decirank.types.limits import ModelLimits


def likelihood_by_length(request):
    """Longer documents score higher: an easy order to check."""
    return {qid: LikelihoodAnswer(min(1.0, len(q.instructions) / 100)) for qid, q in request.questions.items()}


def test_each_document_is_one_likelihood_question_with_the_query_as_state():
    """Each document is asked as one likelihood question with the documented prefix, the query being the state."""
    backend = ScriptedBackend(answer=likelihood_by_length)
    with use_backend(backend) as model:
        decirank.rerank("what is a flea", ["short", "a much longer document"], model=model)
    (request,) = backend.requests
    assert request.state == "what is a flea"
    texts = [question.instructions for question in request.questions.values()]
    assert texts == [QUESTION_PREFIX + "short", QUESTION_PREFIX + "a much longer document"]


def test_results_sorted_with_ids_ranks_and_ties_in_input_order():
    """Results come by score with ids, ranks and the document as given; ties keep input order."""
    documents = ["bb", {"id": "doc-a", "text": "aaaa", "metadata": {"k": 1}}, "cc", "d"]
    with use_backend(ScriptedBackend(answer=likelihood_by_length)) as model:
        result = decirank.rerank("q", documents, model=model)
    assert [r.id for r in result.results] == ["doc-a", 0, 2, 3]
    assert [r.rank for r in result.results] == [1, 2, 3, 4]
    assert [r.index for r in result.results] == [1, 0, 2, 3]
    assert result.results[0].document == documents[1]
    data = result.to_dict()
    assert set(data) == {"results", "model", "usage", "run_id", "notes", "calibration"}
    assert set(data["results"][0]) == {"index", "id", "document", "relevance_score", "rank"}


def test_top_k_and_min_relevance():
    """top_k=0 keeps all, top_k keeps the best k, and min_relevance drops lower scores."""
    documents = ["x" * n for n in (10, 50, 30, 5)]
    with use_backend(ScriptedBackend(answer=likelihood_by_length)) as model:
        everything = decirank.rerank("q", documents, model=model, top_k=0)
        best_two = decirank.rerank("q", documents, model=model, top_k=2)
        relevant = decirank.rerank("q", documents, model=model, min_relevance=0.5)
    assert len(everything.results) == 4
    assert [r.id for r in best_two.results] == [1, 2]
    assert all(r.relevance_score >= 0.5 for r in relevant.results) and len(relevant.results) == 2


def test_documents_per_call_follows_the_model_limit_then_the_caller_then_twenty():
    """A call carries the model's declared limit of documents, else the caller's, else 20."""
    declared = ScriptedBackend(limits=ModelLimits(max_questions=7))
    with use_backend(declared) as model:
        decirank.rerank("q", [f"d{n}" for n in range(30)], model=model, max_documents_per_call=3)
    assert [len(r.questions) for r in declared.requests] == [7, 7, 7, 7, 2]

    undeclared = ScriptedBackend()
    with use_backend(undeclared) as model:
        decirank.rerank("q", [f"d{n}" for n in range(30)], model=model, max_documents_per_call=12)
    assert [len(r.questions) for r in undeclared.requests] == [12, 12, 6]

    default = ScriptedBackend()
    with use_backend(default) as model:
        decirank.rerank("q", [f"d{n}" for n in range(45)], model=model)
    assert [len(r.questions) for r in default.requests] == [20, 20, 5]


def test_a_failed_call_fails_the_whole_rerank():
    """A model error fails the whole rerank."""
    with (
        use_backend(ScriptedBackend(error=ServerError("boom", model="scripted:default"))) as model,
        pytest.raises(ServerError),
    ):
        decirank.rerank("q", ["a", "b"], model=model)


def test_a_missing_answer_fails_instead_of_inventing_a_score():
    """A document without an answer fails the rerank rather than getting a made-up score."""

    def forgets_one(request):
        answers = {qid: LikelihoodAnswer(0.5) for qid in request.questions}
        answers.pop(next(iter(answers)))
        return answers

    with use_backend(ScriptedBackend(answer=forgets_one)) as model, pytest.raises(InvalidAnswerError, match="missing"):
        decirank.rerank("q", ["a", "b"], model=model)


def test_out_of_range_probability_fails():
    """A probability outside [0, 1] fails the rerank."""
    out_of_range = ScriptedBackend(answer=lambda r: {qid: LikelihoodAnswer(1.5) for qid in r.questions})
    with use_backend(out_of_range) as model, pytest.raises(InvalidAnswerError, match="outside"):
        decirank.rerank("q", ["a"], model=model)


def test_empty_documents_and_bad_input():
    """No documents give no results; a bad query, document or threshold is an InvalidInputError naming the field."""
    assert decirank.rerank("q", [], model="lexical").results == []
    with pytest.raises(InvalidInputError) as caught:
        decirank.rerank("", ["a"], model="lexical")
    assert caught.value.field == "query"
    with pytest.raises(InvalidInputError) as caught:
        decirank.rerank("q", ["a", {"title": "no text"}], model="lexical")
    assert caught.value.field == "documents.1"
    with pytest.raises(InvalidInputError) as caught:
        decirank.rerank("q", ["a"], model="lexical", min_relevance=2)
    assert caught.value.field == "min_relevance"
    with pytest.raises(InvalidInputError) as caught:
        decirank.rerank("q", ["a"], model="lexical", max_documents_per_call=True)
    assert caught.value.field == "max_documents_per_call"


def test_lexical_rerank_puts_the_matching_document_first():
    """The lexical backend scores the matching document highest."""
    documents = ["the weather in paris", "fleas live for about a year on a host", "bread recipes"]
    result = decirank.rerank("how long do fleas live", documents, model="lexical")
    assert result.results[0].id == 1
    assert result.results[0].relevance_score > result.results[-1].relevance_score


def test_async_twin():
    """arerank sorts documents by score as rerank does."""
    documents = ["a", "bbb", "cc"]
    with use_backend(ScriptedBackend(answer=likelihood_by_length)) as model:
        result = asyncio.run(decirank.arerank("q", documents, model=model))
    assert [r.id for r in result.results] == [1, 2, 0]
