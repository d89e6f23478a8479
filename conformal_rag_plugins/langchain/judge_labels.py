"""Label calibration questions with a LangChain judge over the host store or retriever (CONFLARE step 2).

``label_with_judge`` and its async twin are :class:`~conformal_rag_plugins.labelling.host_judge.HostJudge`'s;
this module reads the host (a ``VectorStore`` with relevance scores, or a retriever setting
``metadata["score"]``) and the model (:func:`~.llm_calls.llm_task`).

Examples
--------
>>> labelled, report = label_with_judge(vectorstore, examples, llm, budget=5)  # doctest: +SKIP
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
