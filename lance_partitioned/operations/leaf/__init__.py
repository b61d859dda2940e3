"""A leaf's columns against the namespace's: field ids, read and write mappings,
the Lance steps that evolve one leaf, and the change a transaction makes to it."""
