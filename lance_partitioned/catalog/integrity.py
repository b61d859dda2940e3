"""Whether the files one ``__manifest`` version references are all there, whole.

Lance opens a version from its manifest file alone and reads data files only
when rows are read; a metadata-only commit (``add_columns``, a table-metadata
update, a tag) never reads them. So a version whose data files were truncated or
removed opens, accepts such commits on top, and fails only later, with Lance's
own error. Every write checks first (``Manifest.check_intact``), and reads that
fail ask here what is wrong.

The check is one metadata request per file the version references, batched or
sent together (``Storage.infos``; ``__manifest`` keeps few: compaction merges
them); each data file must exist
with the size its version recorded (or, when none was recorded, end with the
Lance file magic), each deletion file must exist. Damage that keeps a file's
size (bytes changed in place) is not seen here; reading the rows finds it.
"""

from __future__ import annotations

from dataclasses import dataclass

import lance

from lance_partitioned.catalog.layout import join_uri
from lance_partitioned.catalog.storage import Storage

# Every Lance file (format v2) ends with these bytes.
LANCE_MAGIC = b"LANC"


@dataclass(frozen=True)
class Damage:
    """One referenced file that is missing or damaged: ``path`` relative to the table."""

    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path} ({self.problem})"


def _referenced(ds: lance.LanceDataset) -> list[tuple[str, int | None]]:
    """(path relative to the table, recorded size or None) of every file ``ds`` reads."""
    out: list[tuple[str, int | None]] = []
    for frag in ds.get_fragments():
        meta = frag.metadata
        for f in meta.files:
            if f.base_id is None:  # files under another base are not ours to check
                out.append((f"data/{f.path}", f.file_size_bytes or None))
        if meta.deletion_file is not None:
            out.append((meta.deletion_file.path(meta.id), None))
    return out


def damaged_files(ds: lance.LanceDataset, uri: str, storage: Storage) -> list[Damage]:
    """The files version ``ds`` of the table at ``uri`` references that are missing or
    damaged (empty when it is intact). Reads metadata only, plus the last bytes of a
    data file whose size was not recorded."""
    files = _referenced(ds)
    found = storage.infos([join_uri(uri, path) for path, _ in files])
    out = []
    for (path, size), entry in zip(files, found, strict=True):
        if entry is None or entry.is_dir:
            out.append(Damage(path, "missing"))
        elif size is not None and entry.size != size:
            what = "truncated" if entry.size < size else "longer than written"
            out.append(Damage(path, f"{what}: {entry.size} bytes, {size} when written"))
        elif size is None and path.startswith("data/"):
            tail = storage.read_tail(join_uri(uri, path), entry.size, len(LANCE_MAGIC))
            if tail != LANCE_MAGIC:
                out.append(Damage(path, "not a whole Lance file: its last bytes are not LANC"))
    return out
