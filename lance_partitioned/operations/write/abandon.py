"""Reclaiming the files of a write that will not be published.

A write's data files exist before its commit; when the commit will not happen
(the write failed, or one writer of a multi-writer job did), they are removed
here, and only they: never a file another writer or a published version uses.
"""

from __future__ import annotations

import logging

from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.operations.txn.driver import remove_dir, remove_file
from lance_partitioned.operations.write.partition_writer import WrittenFiles

log = logging.getLogger(__name__)


def abort_write(snapshot: Snapshot, written: WrittenFiles, only: set[str] | None = None) -> None:
    """Reclaim the files of a write that will not be committed, for leaves nothing was staged on.

    ``only`` limits it to those leaves (object ids); None means every leaf.
    """
    opts = snapshot.manifest.storage_options
    for leaf_write in written.leaves.values():
        if only is not None and leaf_write.object_id not in only:
            continue
        if leaf_write.is_new:
            remove_dir(snapshot.leaf_uri(leaf_write.location), opts)
        else:
            for frag in leaf_write.fragment_metadata():
                for f in frag.files:
                    remove_file(leaf_write.files_uri(snapshot), f.path, opts)


def discard_task_files(snapshot: Snapshot, written: WrittenFiles) -> None:
    """Delete the files one failed writer of a multi-writer job recorded, and only those.

    Never a whole directory: other writers of the same job (Spark tasks) may be
    writing into the same new partition directory (names are derived from the
    job secret); an emptied directory is removed.
    """
    st = snapshot.manifest.storage
    for leaf_write in written.leaves.values():
        base = leaf_write.files_uri(snapshot)
        for frag in leaf_write.fragment_metadata():
            for f in frag.files:
                try:
                    st.delete(st.join(base, "data", f.path))
                except Exception as exc:  # best effort: vacuum reclaims what is left
                    log.warning("could not remove %s/data/%s: %s", base, f.path, exc)
        if leaf_write.is_new:
            for d in (st.join(base, "data"), base):
                if not st.remove_empty_dir(d):  # only when empty: another task may use it
                    break
