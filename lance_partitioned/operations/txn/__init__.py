"""The commit protocol of every transaction over leaves: the driver (``LeafTransaction``),
leaf staging and its checks, leases, the thread pool that stages, and restaging."""
