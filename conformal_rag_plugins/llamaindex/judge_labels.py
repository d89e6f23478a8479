"""Label calibration questions with a LlamaIndex LLM judge over the host retriever (CONFLARE step 2).

``label_with_judge(host, examples, llm, budget=5, *, pool_size=None, cache=True, options=None)``
and its async twin are written once in :class:`~conformal_rag_plugins.labelling.host_judge.HostJudge`;
this module supplies what is LlamaIndex's: the host (a ``VectorStoreIndex``, queried as
``as_retriever(similarity_top_k=pool_size)``, or a ``BaseRetriever``, queried with ``aretrieve``)
read by :func:`host_ranking`, and the LLM read by :func:`~.llm_calls.llm_task`.

Examples
--------
>>> from conformal_rag_plugins.labelling.options import JudgeOptions
>>> labelled, report = label_with_judge(index, examples, llm, budget=5,
...                                     options=JudgeOptions(max_concurrency=1))  # doctest: +SKIP
>>> calibration = calibrate_retriever(index, labelled, confidence_level=0.9)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from ..labelling.host_judge import HostJudge
from ..labelling.llm_judge import RankFn
from .host import pool_from_nodes, resolve_host
from .llm_calls import llm_task


def host_ranking(host: Any, pool_size: int | None) -> RankFn:
    """The index or retriever as ``rank(question) -> [(node id, text), ...]`` (checked now, queried later)."""
    retriever, _ = resolve_host(host, pool_size)

    async def rank(question: str) -> list[tuple[str | None, str]]:
        pool, _ = pool_from_nodes(await retriever.aretrieve(question))
        return list(zip(pool.ids, pool.texts, strict=True))

    return rank


_JUDGE = HostJudge(read_llm=llm_task, read_host=host_ranking)
label_with_judge = _JUDGE.label_with_judge
alabel_with_judge = _JUDGE.alabel_with_judge
