"""``conformal-rag demo``: the offline end-to-end demo on the bundled SQuAD subset."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.baselines import conflare_threshold
from ..core.pools import PoolObservation
from ..datasets.examples import split_examples
from ..local.chroma import chroma_client
from ..local.corpus import bundled_corpus, bundled_questions
from ..local.encoder import default_cache_dir
from ..retrieval.options import RetrievalOptions
from ..retrieval.pool_calibration import CandidatePool, collect_observations
from ..runtime.atomic import atomic_path
from .chunk_corpus import chunk_corpus
from .hosts import corpus_key
from .input_checks import check_at_least, check_outputs, check_pool_option
from .tables import markdown_table


def _eval(obs: list[PoolObservation], family: str, q: float) -> dict[str, float]:
    res = [o.covered_and_size(family, q) for o in obs]
    return {
        "coverage": float(np.mean([c for c, _ in res])),
        "mean_set_size": float(np.mean([s for _, s in res])),
    }


@dataclass(frozen=True)
class DemoRequest:
    """The options of ``conformal-rag demo``, with its defaults.

    Examples
    --------
    >>> DemoRequest(alpha=0.2).pool_size
    50
    """

    alpha: float = 0.1
    persist_dir: str | Path | None = None
    out: str | Path = "conformal_rag_output"
    pool_size: int = 50
    seed: int = 0
    answers: bool = True
    answer_alpha: float = 0.6
    answer_alpha_retrieval: float = 0.1
    answer_questions: int = 30
    n_samples: int = 5
    chunking: bool = True
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    progress: bool = True


def run_demo(request: DemoRequest) -> dict[str, object]:
    """Index, calibrate on half the questions, evaluate on the other half, and print.

    ``pool_size`` and the output folders are checked first; calibration files are written atomically.
    """
    from llama_index.core.schema import MetadataMode

    from ..core.validation import check_alpha
    from ..llamaindex import ConformalRetriever, calibrate_hybrid_retriever
    from ..llamaindex.host import pool_from_nodes
    from ..local.llamaindex_stack import build_chroma_index

    r = request
    alpha = check_alpha(r.alpha)
    check_pool_option("pool_size", r.pool_size)
    check_at_least("samples", r.n_samples)
    check_at_least("seed", r.seed, 0)
    check_outputs(dirs=[r.out, r.persist_dir])
    persist = Path(r.persist_dir) if r.persist_dir else default_cache_dir() / "chroma"
    out = Path(r.out)
    out.mkdir(parents=True, exist_ok=True)
    entries = list(bundled_corpus())
    questions = list(bundled_questions(True))
    print(f"Corpus: {len(entries)} passages (SQuAD 2.0 dev subset + distractors, CC BY-SA 4.0)")
    print(f"Questions: {len(questions)} answerable; Chroma index at {persist}")
    if r.chunking:
        chunked = chunk_corpus("llamaindex", entries, questions, chunk_size=r.chunk_size, chunk_overlap=r.chunk_overlap)
        entries, questions = list(chunked.chunks), chunked.questions
        info = chunked.report()
        print(
            f"Chunking (SentenceSplitter, <= {info['chunk_size']} MiniLM tokens): {info['n_split_entries']} long "
            f"passage(s) split, {info['n_chunks']} chunks; gold: {info['gold']['n_answer_in_chunk']} questions "
            f"answer-in-chunk, {info['gold']['n_fallback']} all-chunks fallback"
        )
    index, nodes = build_chroma_index(
        entries,
        client=chroma_client(persist),
        collection_name=f"crp-llamaindex-{corpus_key(entries)}",
        show_progress=r.progress,
    )
    cal_q, test_q = split_examples(questions, (0.5, 0.5), seed=r.seed)

    print(
        f"\nCalibrating at alpha={alpha} on {len(cal_q)} questions (hybrid BM25 + MiniLM, LlamaIndex): fusion "
        "setting and score family chosen on a 30% optimisation part, threshold on the disjoint rest..."
    )
    host, cal = calibrate_hybrid_retriever(
        index,
        nodes,
        cal_q,
        confidence_level=1 - alpha,
        pool_size=r.pool_size,
        options=RetrievalOptions(progress=False),
    )
    path = out / "calibration.json"
    with atomic_path(path) as tmp:
        cal.save(tmp)
    chosen = f"{cal.selection_['fusion_method']}:{cal.selection_['dense_weight']:g}"
    print(f"  chosen: fusion {chosen}, score {cal.score_family_}\n  {cal.summary()}\n  saved to {path}")

    def fetch(q: str) -> CandidatePool:
        return pool_from_nodes(host.retrieve(q))[0]

    retriever = ConformalRetriever(retriever=host, calibration=cal)
    covered, sizes = [], []
    for ex in test_q:
        nodes = retriever.retrieve(ex.question)
        covered.append(any(n.node.node_id in ex.gold_ids for n in nodes))
        sizes.append(len(nodes))
    rows = [
        {
            "method": f"ConformalRetriever ({cal.score_family_}, tuned hybrid {chosen})",
            "coverage": float(np.mean(covered)),
            "mean_set_size": float(np.mean(sizes)),
        }
    ]

    cal_obs = collect_observations(cal_q, fetch, progress=False)
    test_obs = collect_observations(test_q, fetch, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ..core.quantile import conformal_quantile

        q_sim = conformal_quantile([o.score("similarity") for o in cal_obs], alpha)
    rows.append({"method": "conformal similarity threshold", **_eval(test_obs, "similarity", q_sim)})
    finite = [o.score("similarity") for o in cal_obs if math.isfinite(o.score("similarity"))]
    q_conf = conflare_threshold(finite, alpha)
    conf = [(any(-o.scores[p] < q_conf for p in o.gold_positions), int((-o.scores < q_conf).sum())) for o in test_obs]
    rows.append(
        {
            "method": "CONFLARE rule (percentile, <)",
            "coverage": float(np.mean([c for c, _ in conf])),
            "mean_set_size": float(np.mean([s for _, s in conf])),
        }
    )
    for k in (1, 3, 5, 10):
        rows.append({"method": f"fixed top-{k}", **_eval(test_obs, "rank", float(k))})
    print(f"\nHeld-out evaluation on {len(test_q)} questions (target coverage {1 - alpha:.0%}):")
    print(markdown_table(rows, ["method", "coverage", "mean_set_size"]))

    print("\nRetrieved sets for three example questions:")
    for ex in test_q[:3]:
        nodes = retriever.retrieve(ex.question)
        print(f"\nQ: {ex.question}  (gold: {', '.join(ex.gold_ids)}; answer: {ex.answers[0] if ex.answers else '-'})")
        for n in nodes:
            mark = "*" if n.node.node_id in ex.gold_ids else " "
            text = n.node.get_content(metadata_mode=MetadataMode.NONE)[:90].replace("\n", " ")
            print(f"  {mark} {n.score:.3f}  {n.node.node_id:<28} {text}...")
    result: dict[str, object] = {"rows": rows, "calibration": str(path)}
    if r.answers:
        result["answer_sets"] = _answer_sets(host, cal, cal_q[: r.answer_questions], test_q[:3], out, r)
    return result


def _answer_sets(host, retrieval_cal, cal_q, show_q, out: Path, request: DemoRequest) -> list[dict]:
    """Calibrate answer sets (``request``'s ``answer_*`` and ``n_samples``) with the local Gemma 3 270M; show three."""
    from llama_index.core.query_engine import RetrieverQueryEngine

    from ..answer_sets.options import ClusteringOptions, RetrievalStageOptions, SamplingOptions, SplitOptions
    from ..answer_sets.sample_cache import SampleCache
    from ..llamaindex import ConformalAnswerSetSynthesizer, ConformalRetriever, calibrate_answer_sets
    from ..local.llamaindex_models import default_llm, local_llm
    from ..runtime.openai_settings import openai_settings

    alpha, alpha_retrieval, n_samples = request.answer_alpha, request.answer_alpha_retrieval, request.n_samples
    # the local model reports its token log-probabilities, which break the ties of the frequency score
    local = openai_settings() is None
    llm = local_llm(temperature=1.0, logprobs=True) if local else default_llm(temperature=1.0)
    generator_score = "likelihood" if local else "frequency"
    if local:  # which native model and build is about to run (a crash then names its suspect)
        from ..local.llm import check_local_model

        print(f"\nLocal model: {check_local_model(llm.model_path)}")
    cache = SampleCache(default_cache_dir() / "samples.sqlite")
    # calibration and queries; no pilot: the demo shows answer sets even when its small model cannot guarantee them
    sampling = SamplingOptions(
        n_samples=n_samples, cache=cache, max_concurrency=1, progress=request.progress, pilot=None
    )
    print(
        f"\nAnswer sets (alpha={alpha} end to end, Bonferroni: {alpha_retrieval} retrieval + "
        f"{alpha - alpha_retrieval:.2g} generation, M={n_samples} samples per chunk, "
        f"{type(llm).__name__}, {generator_score} score); calibrating the generator on {len(cal_q)} questions..."
    )
    as_cal = calibrate_answer_sets(
        host,
        llm,
        cal_q,
        confidence_level=1 - alpha,
        sampling=sampling,
        split=SplitOptions(alpha_retrieval=alpha_retrieval),
        clustering=ClusteringOptions(generator_score=generator_score),
        retrieval=RetrievalStageOptions(calibration=retrieval_cal),
    )
    as_path = out / "answer_sets.json"
    with atomic_path(as_path) as tmp:
        as_cal.save(tmp)
    print(f"  {as_cal.summary()}\n  saved to {as_path}")
    if not as_cal.guaranteed_:
        print(f"  NOTE: {as_cal.reason_} The sets below are marked guaranteed=False.")
    engine = RetrieverQueryEngine(
        retriever=ConformalRetriever(retriever=host, calibration=as_cal),
        response_synthesizer=ConformalAnswerSetSynthesizer(llm=llm, calibration=as_cal, sampling=sampling),
    )
    shown = []
    for ex in show_q:
        response = engine.query(ex.question)
        meta = response.metadata or {}
        print(f"\nQ: {ex.question}  (reference: {ex.answers[0] if ex.answers else '-'})")
        print(
            f"  response: {response.response!r}  abstained={meta.get('abstained')} "
            f"guaranteed={meta.get('guaranteed')} chunks={meta.get('retrieval_set')}"
        )
        kept, sampled = len(meta.get("answer_set", [])), meta.get("extra", {}).get("sampled_clusters")
        print(f"  keeps {kept} of the {sampled} distinct answers sampled ({meta.get('llm_calls')} samples)")
        for a in meta.get("answer_set", []):
            print(f"    {a['confidence']:.2f}  {a['text']!r}  from {', '.join(a['chunk_ids'])}")
        shown.append(meta)
    return shown
