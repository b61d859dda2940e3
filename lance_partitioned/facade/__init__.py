"""The methods of ``PartitionedNamespace``, grouped by job (see ``base``)."""
