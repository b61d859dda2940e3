"""``python -m lance_partitioned``: the ``lance-partitioned`` command."""

from lance_partitioned.cli.main import main

if __name__ == "__main__":
    main()
