"""BM25 with statistics of the whole searched corpus, not of each partition.

Lance scores a full-text match with Okapi BM25 (k1 = 1.2, b = 0.75,
idf = ln(1 + (N - df + 0.5) / (df + 0.5))) using the statistics of the one
dataset it searches: N documents, their average length and each term's
document frequency. Partitions have different statistics, so their scores
cannot be merged. We re-score: the corpus is the union of the partitions a
search reads (after pruning), and every candidate (every document of those
partitions that contains a query token and passes the filter) is scored with
the corpus statistics. The result is exactly the BM25 ranking one Lance
dataset holding those partitions would produce.

Tokens come from ``lance.tokenize`` with the index definition's tokenizer
settings, i.e. the tokens the leaf indexes hold. The statistics of a leaf
version (document count, total tokens, per-token document frequency) are
computed once per process by tokenizing its documents and cached: a leaf
version never changes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import lance

from lance_partitioned.format import caches
from lance_partitioned.format.caches import BoundedCache

K1 = 1.2
B = 0.75


def tokens(text: str | None, params: dict[str, Any]) -> list[str]:
    """The tokens Lance indexes for ``text`` with tokenizer ``params`` ([] for NULL)."""
    if text is None:
        return []
    return [t.text for t in lance.tokenize(text, **params)]


@dataclass(frozen=True)
class CorpusStats:
    """Statistics of a set of documents (NULL documents do not count, as in Lance)."""

    docs: int
    total_tokens: int
    df: Counter[str]

    def __add__(self, other: CorpusStats) -> CorpusStats:
        return CorpusStats(
            self.docs + other.docs, self.total_tokens + other.total_tokens, self.df + other.df
        )

    @property
    def avgdl(self) -> float:
        return self.total_tokens / self.docs if self.docs else 0.0


def corpus_stats(texts: Iterable[str | None], params: dict[str, Any]) -> CorpusStats:
    docs = total = 0
    df: Counter[str] = Counter()
    for text in texts:
        if text is None:
            continue
        toks = tokens(text, params)
        if not toks:
            # Lance's inverted index holds no entry for a document without tokens
            # (an empty string, only punctuation): it counts neither in the corpus size
            # nor in the average length
            continue
        docs += 1
        total += len(toks)
        df.update(set(toks))
    return CorpusStats(docs, total, df)


# Statistics by leaf version, column and tokenizer; leaf versions are cheap to recount.
_cache: BoundedCache = caches.register("bm25.corpus_stats", BoundedCache(maxsize=4096))


def leaf_stats(
    ds: lance.LanceDataset, column: str, params: dict[str, Any], key: tuple[Any, ...]
) -> CorpusStats:
    """Statistics of one leaf version's ``column``; ``key`` identifies the version (cached)."""
    full = (*key, column, tuple(sorted((k, repr(v)) for k, v in params.items())))
    hit = _cache.get(full)
    if hit is not None:
        return hit
    texts = (t for b in ds.to_batches(columns=[column]) for t in b.column(0).to_pylist())
    stats = corpus_stats(texts, params)
    _cache.put(full, stats)
    return stats


def score(doc: Sequence[str], query: set[str], stats: CorpusStats) -> float:
    """BM25 of one tokenized document for the distinct query tokens, with ``stats``."""
    if not doc or not stats.docs:
        return 0.0
    tf = Counter(t for t in doc if t in query)
    norm = K1 * (1 - B + B * len(doc) / stats.avgdl)
    total = 0.0
    for term, f in tf.items():
        n = stats.df.get(term, 0)
        idf = math.log(1 + (stats.docs - n + 0.5) / (n + 0.5))
        total += idf * f * (K1 + 1) / (f + norm)
    return total
