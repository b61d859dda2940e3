# Two entry points for a newcomer: `make demo` (the end-to-end PySpark pipeline;
# `make demo STORAGE=s3` runs it on a local S3 server) and `make test` (the whole
# test suite). Both create .venv on first use: `make demo` installs the package with
# only what the demo needs (its `spark` and `demo` extras, `demo-s3` for STORAGE=s3),
# `make test` the whole development stack (`dev`, which includes the demo's).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SF ?= 0.1
# local (namespaces under ./data) or s3 (a local moto S3 server, started and stopped)
STORAGE ?= local

.PHONY: setup demo test lint format bench docs clean

setup: $(VENV)/.installed

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# pip shows what it downloads and installs (a few minutes on first use)
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -e '.[dev]'
	$(EXTENSION_JAR)
	# dev holds every package the demo needs
	touch $(VENV)/.installed-demo $(VENV)/.installed-demo-s3 $@

$(VENV)/.installed-demo: pyproject.toml | $(PY)
	$(PY) -m pip install -e '.[spark,demo]'
	$(EXTENSION_JAR)
	touch $@

$(VENV)/.installed-demo-s3: $(VENV)/.installed-demo
	$(PY) -m pip install -e '.[spark,demo,demo-s3]'
	touch $@

# the Spark extension pushFilters needs, compiled with the JDK's javac (cached)
EXTENSION_JAR = -$(PY) -c 'from lance_partitioned.spark.extension import extension_jar; print(extension_jar())'

demo: $(VENV)/.installed-demo $(if $(filter s3,$(STORAGE)),$(VENV)/.installed-demo-s3)
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
