"""Row counts kept with ``__manifest`` table rows, read without opening any leaf.

Every commit that publishes a leaf version writes that version's row count
into the row's ``metadata`` JSON as ``"lp.num_rows": "<n>"``, beside the
``"lp.read_version"`` mirror (``catalog.manifest.with_read_mirror``; the rule is
in docs/FORMAT.md "Row counts"). A count is *trusted* only when it provably
describes the version readers are pointed to:

- the row has ``lp.num_rows``;
- its ``lp.read_version`` mirror equals its ``read_version`` column, so a
  writer that moved ``read_version`` without knowing our key (another
  implementation, or a hand edit) invalidates the count instead of lying;
- ``read_branch`` and ``read_tag`` are NULL (a tag can be moved outside any
  ``__manifest`` commit, and branch-pinned leaves are rare enough to open).

Rows without a trusted count (other implementations' rows, older rows) are
counted by opening their leaf. Extraction is vectorised (Arrow regexes), so a
million rows cost a fraction of a second.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

# A key can only start right after '{' or ',' (plus blanks): inside a JSON string
# every '"' is escaped, so these never match text within a value.
_NUM_ROWS = r'[{,]\s*"lp\.num_rows"\s*:\s*"(?P<n>[0-9]{1,18})"'
_READ_VERSION = r'[{,]\s*"lp\.read_version"\s*:\s*"(?P<v>[0-9]{1,20})"'


def _extract(metadata: pa.ChunkedArray | pa.Array, pattern: str) -> pa.ChunkedArray:
    return pc.struct_field(pc.extract_regex(metadata, pattern), [0])


def trusted_counts(rows: pa.Table) -> pa.ChunkedArray:
    """Per row of ``rows`` (``metadata``, ``read_version``, ``read_branch``, ``read_tag``):
    its stored row count as int64 where it can be trusted, else null."""
    meta = rows.column("metadata")
    if meta.null_count == len(meta):
        return pa.chunked_array([pa.nulls(len(meta), pa.int64())])
    counts = pc.cast(_extract(meta, _NUM_ROWS), pa.int64())
    mirrored = _extract(meta, _READ_VERSION)
    version = pc.cast(rows.column("read_version"), pa.string())
    trusted = pc.and_kleene(
        pc.and_kleene(pc.equal(mirrored, version), pc.is_null(rows.column("read_branch"))),
        pc.is_null(rows.column("read_tag")),
    )
    return pc.if_else(pc.fill_null(trusted, False), counts, pa.scalar(None, pa.int64()))
