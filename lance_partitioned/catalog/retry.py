"""Commit conflicts and retries: which Lance errors mean "another commit landed first",
and how often and how fast a transaction tries again (``docs/TRANSACTIONS.md`` §2,
"Conflicts and retries").

Every loop that retries a commit (publishing a write, a delete, a compaction, a
restage, staging a leaf, repairing ``__manifest``) iterates ``COMMIT_RETRY.tries()``;
every place that asks whether a Lance error is a conflict calls ``is_commit_conflict``.
What each loop retries on, and what it raises when the attempts run out, stays with
the loop.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

from lance.commit import CommitConflictError as LanceCommitConflictError

# The Display text of Lance's conflict errors (rust/lance-core/src/error.rs, 14.0.2):
# CommitConflict, RetryableCommitConflict, IncompatibleTransaction and
# TooMuchWriteContention (a Lance-internal retry loop that gave up), at the start of
# the message, after pyarrow's "External error: " when it wraps one.
_LANCE_CONFLICT_TEXT = re.compile(
    r"^(?:External error: )?(?:(?:Retryable )?[Cc]ommit conflict for version \d+"
    r"|Incompatible transaction:|Too many concurrent writers\.)"
)


def is_commit_conflict(exc: BaseException) -> bool:
    """Whether Lance refused a commit because another commit landed first.

    Told by type: ``lance.commit.CommitConflictError``, which the ``commit`` of
    ``lance.LanceDataset`` raises on a conflict, retryable or not (``retryable``
    says which; both mean the commit did not land). Lance's other entry points that
    commit (a dataset's ``update_metadata``, ``optimize.compact_files``,
    ``merge_insert`` ... ``execute``) raise a bare ``OSError`` for the same Rust errors,
    with no class to tell them by: for those alone, an ``OSError`` whose message
    *starts* with the Display text of one of Lance's conflict errors counts. Any other
    error is not a conflict, whatever its message says.
    """
    if isinstance(exc, LanceCommitConflictError):
        return True
    return type(exc) is OSError and _LANCE_CONFLICT_TEXT.match(str(exc)) is not None


@dataclass(frozen=True)
class RetryPolicy:
    """How many times a commit is tried, and how long to wait between tries.

    ``attempts`` tries in all; before try ``n`` (``n >= 1``) the caller sleeps a
    random time in ``[0, min(cap, base * 2 ** (n - 1))]`` seconds ("full jitter"):
    the bound doubles from ``base`` up to ``cap``, and the randomness keeps writers
    that conflicted with each other from meeting again at the next try.
    """

    attempts: int = 8
    base: float = 0.005
    cap: float = 0.5

    def delay(self, attempt: int) -> float:
        """Seconds to wait before try number ``attempt`` (0 for the first try)."""
        if attempt <= 0:
            return 0.0
        return random.uniform(0.0, min(self.cap, self.base * 2 ** (attempt - 1)))

    def tries(self) -> Iterator[int]:
        """The try numbers ``0 .. attempts - 1``, waiting ``delay(n)`` before try ``n``.

        Example::

            for attempt in COMMIT_RETRY.tries():
                try:
                    return commit()
                except CommitConflictError:
                    if COMMIT_RETRY.is_last(attempt):
                        raise
        """
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(self.delay(attempt))
            yield attempt

    def is_last(self, attempt: int) -> bool:
        """Whether try ``attempt`` is the last one the policy allows."""
        return attempt >= self.attempts - 1


# The one policy of every commit retry loop: at most 8 tries, the waits bounded by
# 5, 10, 20, 40, 80, 160, 320 ms (about 0.32 s expected in all, 0.635 s at most).
COMMIT_RETRY = RetryPolicy()
