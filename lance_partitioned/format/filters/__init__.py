"""Filters: SQL text, pyarrow and DataFusion expressions <-> the filter AST.

The AST itself is :mod:`lance_partitioned.format.expressions`. One module per job:

* :mod:`.parse` — SQL text -> AST (:func:`~.parse.parse_filter`), on top of
  :mod:`.tokens` (tokenizer, :class:`~.tokens.FilterParseError`),
  :mod:`.parse_values` (the value half of the grammar) and
  :mod:`.literal_text` (typed literal strings and ``CAST`` folding);
* :mod:`.render` — AST -> Lance/DataFusion SQL text (:func:`~.render.to_sql`,
  :func:`~.render.render_literal`, :func:`~.render.quote_identifier`,
  :func:`~.render.escape_like`);
* :mod:`.from_pyarrow` — ``pyarrow.compute.Expression`` -> AST;
* :mod:`.from_datafusion` — ``datafusion.Expr`` -> AST;
* :mod:`.evaluate` — a SQL filter evaluated on one in-memory batch with DataFusion.

The package sits in ``format`` because it depends only on ``format`` modules and
``catalog`` (the ``__manifest`` query) already needs the renderer; ``operations``
and above use it. This ``__init__`` imports nothing, so a low module (``zones``)
can use :mod:`.evaluate` without pulling the parser in, and no import cycle
forms; import from the submodules.
"""
