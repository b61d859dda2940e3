"""The ``lance-partitioned`` command (also ``python -m lance_partitioned``).

The top layer: it imports the namespace facade and renders its answers with
rich (tables on a terminal, ``--json`` for machines). Modules: ``main`` (the
group, error handling and exit codes), ``common`` (shared options and
parsing), ``output`` (rendering), ``read_commands`` and ``write_commands``.
"""
