"""Which of one commit's deleted and inserted rows are the two images of an updated row.

A namespace has no key of its own, so the change feed (``operations.read.changes``)
pairs a deleted row with an inserted one only where the commit itself says how its
rows are known (its record, ``catalog.commit_info``), and only where the pairing is
certain (docs/CHANGES.md "Reading what changed"):

- **merge** with a ``when_matched_update`` clause: by the merge's ``on`` keys. A
  merge deletes and inserts the same key only by updating the target row(s) of that
  key: a matched row is updated or deleted, an inserted row matched none.
- **update**: by every column the update did not assign. Each row it removes it
  writes back once, with only the assigned columns changed, so a row's two images
  agree on all the others.

Within one key value, one deleted and one inserted row are a pair; so are n deleted
and n inserted rows when the n deleted are identical and so are the n inserted
(any pairing says the same). Any other group (rows of one key that differ, counts
that do not match) stays plain deletes and inserts: guessing would pair the wrong
rows. The commit is paired over the rows the feed reads, so with a ``filter`` a row
whose other image the filter excludes stays a plain delete or insert: it left or
entered the filtered rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from lance_partitioned.catalog.commit_info import CommitInfo

UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"


def image_key(record: CommitInfo, names: Sequence[str]) -> list[str] | None:
    """The columns (of ``names``, the columns read) that identify an updated row in the
    commit ``record`` describes; None when its rows are not paired."""
    params: Mapping[str, Any] = record.parameters
    if record.operation == "merge":
        on = params.get("on")
        keys = [on] if isinstance(on, str) else list(on or [])
        clauses = params.get("clauses") or []
        updates = any(isinstance(c, Mapping) and c.get("kind") == "update" for c in clauses)
        if not updates or not keys or any(k not in names for k in keys):
            return None
        return keys
    if record.operation == "update":
        assigned = params.get("set")
        if not isinstance(assigned, Mapping) or not assigned:
            return None
        return [n for n in names if n not in assigned]
    return None


def _row_keys(table: pa.Table, columns: Sequence[str]) -> list[str]:
    if not columns:
        return [""] * table.num_rows
    return [repr(tuple(r.values())) for r in table.select(list(columns)).to_pylist()]


def pair_images(
    deleted: pa.Table, inserted: pa.Table, key: Sequence[str]
) -> tuple[list[int], list[int]]:
    """(rows of ``deleted``, rows of ``inserted``) that are pre and post images of the
    same updated rows, position by position; both tables have the columns of ``key``."""
    groups: dict[str, tuple[list[int], list[int]]] = {}
    for side, table in enumerate((deleted, inserted)):
        for i, k in enumerate(_row_keys(table, key)):
            groups.setdefault(k, ([], []))[side].append(i)
    whole_d = whole_i = None
    pre: list[int] = []
    post: list[int] = []
    for d, i in groups.values():
        if not d or len(d) != len(i):
            continue
        if len(d) > 1:  # several rows of one key: paired only when any pairing is the same
            if whole_d is None or whole_i is None:
                whole_d = _row_keys(deleted, deleted.column_names)
                whole_i = _row_keys(inserted, inserted.column_names)
            if len({whole_d[x] for x in d}) > 1 or len({whole_i[x] for x in i}) > 1:
                continue
        pre += d
        post += i
    return pre, post
