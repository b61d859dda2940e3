"""Schema and spec evolution: changes to the namespace's schema and specs, bringing
leaves in line with it (align, realign), and leaves a newer spec would place elsewhere."""
