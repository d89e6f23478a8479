"""Label calibration questions with a LangChain judge over the host store or retriever (CONFLARE step 2).

``label_with_judge(host, examples, llm, budget=5, *, pool_size=None, cache=True, options=None)``
and its async twin are written once in :class:`~conformal_rag_plugins.labelling.host_judge.HostJudge`;
this module supplies what is LangChain's: the host (a ``VectorStore``, queried with
``similarity_search_with_relevance_scores``, or a retriever setting ``metadata["score"]``, e.g.
:class:`ScoredFusionRetriever`) read by :func:`host_ranking`, and the model read by
:func:`~.llm_calls.llm_task`.

Examples
--------
>>> from conformal_rag_plugins.labelling.options import JudgeOptions
>>> labelled, report = label_with_judge(vectorstore, examples, llm, budget=5,
...                                     options=JudgeOptions(max_concurrency=1))  # doctest: +SKIP
>>> calibration = calibrate_retriever(vectorstore, labelled, confidence_level=0.9)  # doctest: +SKIP
"""

from __future__ import annotations

from ..labelling.host_judge import HostJudge
from ..labelling.llm_judge import RankFn
from .host import Host, afetch_pool, resolve_pool_size
from .llm_calls import llm_task


def host_ranking(host: Host, pool_size: int | None) -> RankFn:
    """The store or retriever as ``rank(question) -> [(document id, text), ...]`` (pool size checked now)."""
    size = resolve_pool_size(host, pool_size)

    async def rank(question: str) -> list[tuple[str | None, str]]:
        pool, _ = await afetch_pool(host, question, size)
        return list(zip(pool.ids, pool.texts, strict=True))

    return rank


_JUDGE = HostJudge(read_llm=llm_task, read_host=host_ranking)
label_with_judge = _JUDGE.label_with_judge
alabel_with_judge = _JUDGE.alabel_with_judge
