"""Adapters that put decirank's ``rerank`` inside the frameworks RAG builders already use.

Each lives in its own module and needs its own extra; importing a module whose
framework is missing raises :class:`decirank.errors.MissingAssetError` naming
the extra to install:

- ``decirank.integrations.langchain.DecirankRerank``, a LangChain ``BaseDocumentCompressor``
  (extra ``langchain``);
- ``decirank.integrations.llamaindex.DecirankRerank``, a LlamaIndex ``BaseNodePostprocessor``
  (extra ``llamaindex``);
- ``decirank.integrations.haystack.DecirankRanker``, a Haystack ``@component`` (extra ``haystack``).

They are thin on purpose: each passes the query and the documents' texts to
:func:`decirank.rerank` (or :func:`decirank.arerank`) and puts the documents
back in the order, and with the scores, it returns. So ``model`` is any
decirank model name or role (the ``decider`` role, the embedded ``local``
model unless configured otherwise, by default), every call is a run in the run
log, and errors are decirank's own typed errors, never wrapped by the adapter
(a Haystack ``Pipeline`` wraps any component's error in its ``PipelineRuntimeError``,
whose ``__cause__`` is then decirank's).
"""
