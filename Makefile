VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo lint test test-gpu clean

# setup_venv.sh reads VENV, PYTHON, WHEELS (a folder of wheels: install offline), REUSE_TORCH and
# INSTALL; e.g. `make demo WHEELS=.whl` on a machine that cannot reach PyPI
setup:
	@VENV=$(VENV) ./scripts/setup_venv.sh

demo: setup
	$(VENV)/bin/rooftop demo --deck examples --db rooftop.db

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

test: setup lint
	$(PY) -m pytest -q --durations=30

test-gpu: setup
	$(PY) -m pytest -q -m gpu

clean:
	rm -rf $(VENV) rooftop.db rooftop.db-wal rooftop.db-shm
