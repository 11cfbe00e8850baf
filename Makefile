VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo lint agent-clis test test-gpu clean

# setup_venv.sh reads VENV, PYTHON, WHEELS (a folder of wheels: install offline), REUSE_TORCH and
# INSTALL; e.g. `make demo WHEELS=.whl` on a machine that cannot reach PyPI
setup:
	@VENV=$(VENV) ./scripts/setup_venv.sh

demo: setup
	$(VENV)/bin/rooftop demo --deck examples --db rooftop.db

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

# the real agent CLIs that tests/test_agent_clis.py drives against a scripted model, pinned; installed
# once into AGENT_CLIS_DIR with npm (where npm is missing or the install fails, those tests skip and
# say why)
AGENT_CLIS_DIR ?= .cache/agent-clis
AGENT_CLIS := @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 opencode-ai@1.18.33
agent-clis:
	@./scripts/agent_clis.sh $(AGENT_CLIS_DIR) $(AGENT_CLIS)

# the suite runs TEST_WORKERS files at a time (pytest-xdist; most tests wait on child processes),
# then the tests marked `quiet` alone: they time on the CPU and assert what an idle machine gives
TEST_WORKERS ?= 2
test: setup lint agent-clis
	@status=0; export ROOFTOP_AGENT_CLIS=$(abspath $(AGENT_CLIS_DIR)); \
	$(PY) -m pytest -q --durations=20 -n $(TEST_WORKERS) --dist loadfile -m "not quiet" || status=$$?; \
	$(PY) -m pytest -q --durations=5 -m quiet || status=$$?; \
	exit $$status

# TEST_GPUS=0,1,2,3 spreads the GPU tests over those GPUs, one pytest-xdist worker on each
comma := ,
TEST_GPUS ?=
test-gpu: setup
	ROOFTOP_TEST_GPUS=$(TEST_GPUS) $(PY) -m pytest -q -m gpu \
	  $(if $(TEST_GPUS),-n $(words $(subst $(comma), ,$(TEST_GPUS))) --dist load)

clean:
	rm -rf $(VENV) rooftop.db rooftop.db-wal rooftop.db-shm
