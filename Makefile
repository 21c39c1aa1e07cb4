# The two commands in the README do all set-up themselves (.ci/setup is idempotent).
PY ?= python3
export PYTHONDONTWRITEBYTECODE = 1

.PHONY: setup verify test lint unit chaos test-deep bench bench-plot

setup:
	@bash .ci/setup

# The main job: model-check every model, broken variant and probe with TLC; print the table.
verify: setup
	$(PY) -m distlock verify --json verify-report.json

# The whole suite: lint, strict types, unit, integration, properties, traces, chaos.
test: setup lint
	$(PY) -m pytest

lint:
	$(PY) -m ruff check distlock tests benchmarks
	$(PY) -m mypy --strict

unit: setup
	$(PY) -m pytest -m "not chaos"

# Fault injection: real Redis behind real Toxiproxy; prints the table, writes chaos-report.json.
chaos: setup
	$(PY) -m pytest -m chaos tests/chaos -q

# Long Hypothesis runs of tests/properties (about 20x the examples CI runs).
test-deep: setup
	DISTLOCK_PROFILE=deep $(PY) -m pytest tests/properties -q --timeout 0

# Benchmarks (never run by CI): each suite prints its table and writes bench-results/NAME.json.
# Needs the peers: pip install -e '.[bench]'.  BENCH_ARGS=--pin puts redis-server and the
# client on CPUs of their own; BENCH_ARGS=--quick for a short run.
BENCH_DIR ?= bench-results
BENCH_ARGS ?=
bench:
	$(PY) benchmarks/cycles.py --json $(BENCH_DIR)/cycles.json $(BENCH_ARGS)
	$(PY) benchmarks/roundtrips.py --json $(BENCH_DIR)/roundtrips.json $(BENCH_ARGS)
	$(PY) benchmarks/held.py --json $(BENCH_DIR)/held.json $(BENCH_ARGS)

# The README's chart, from the last `make bench`.
bench-plot:
	$(PY) benchmarks/plot.py --results $(BENCH_DIR) --out docs/benchmarks.png
