"""Label calibration questions with a LlamaIndex LLM judge over the host (CONFLARE step 2).

``label_with_judge`` and its async twin are :class:`~conformal_rag_plugins.labelling.host_judge.HostJudge`'s;
this module reads the host (an index, as ``as_retriever(similarity_top_k=pool_size)``, or a
retriever, with ``aretrieve``) and the LLM (:func:`~.llm_calls.llm_task`).

Examples
--------
>>> labelled, report = label_with_judge(index, examples, llm, budget=5)  # doctest: +SKIP
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
