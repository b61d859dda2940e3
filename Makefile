# Two entry points for a newcomer: `make demo` (the end-to-end PySpark pipeline;
# `make demo STORAGE=s3` runs it on a local S3 server)
# and `make test` (the whole test suite). Both create .venv and install pinned
# dependencies on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SF ?= 0.1
# local (namespaces under ./data) or s3 (a local moto S3 server, started and stopped)
STORAGE ?= local

.PHONY: setup demo test lint format bench docs clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	# the Spark extension pushFilters needs, compiled with the JDK's javac (cached)
	-$(PY) -c 'from lance_partitioned.spark.extension import extension_jar; print(extension_jar())'
	touch $@

demo: setup
	$(PY) -m demo.pipeline --scale-factor $(SF) --storage $(STORAGE)

test: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) tests/azure_support.py
	$(PY) -m pytest

lint: setup
	$(PY) -m ruff check .

format: setup
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench: setup
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) benchmarks/run_all.py

# the documentation site (mkdocs.yml) into ./site; tests/test_docs_site.py builds it too
docs: setup
	$(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build site *.egg-info
