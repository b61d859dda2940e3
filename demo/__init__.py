"""The end-to-end demo (``make demo``) and the TPC-H data and local S3 server (``s3_server``)
it, the tests and the benchmarks use.

Not part of the library package: run from the repository root
(``python -m demo.pipeline``); the tests find it through pytest's ``pythonpath``
and the benchmarks put the repository root on ``sys.path``.
"""
