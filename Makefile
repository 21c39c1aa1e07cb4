# The two commands at the top of the README do all set-up themselves (.ci/setup is idempotent).
PY ?= python3
export PYTHONDONTWRITEBYTECODE = 1

.PHONY: setup verify test quick test-compiled test-pure test-oldest-redis lint unit chaos test-deep mutation bench bench-pure bench-suites bench-instructions bench-plot

setup:
	@bash .ci/setup

# The main job: model-check every model, broken variant and probe with TLC; print the table.
verify: setup
	$(PY) -m distlock verify --json verify-report.json

# The whole suite on the compiled build, the one users install (.ci/test-compiled builds the
# wheel once in a scratch copy of the checkout and runs pytest there: lint, strict types,
# unit, integration, properties, traces, chaos); then the tests of the core and both
# drivers again on the pure package of the checkout, both drivers on the oldest redis-py,
# and the quick list of the scripts' mutants (`make mutation` runs them all).
test: setup lint
	PYTHON=$(PY) bash .ci/test-compiled
	$(MAKE) --no-print-directory test-pure
	$(MAKE) --no-print-directory test-oldest-redis
	$(MAKE) --no-print-directory mutation MUTANTS=quick

# Tests on the compiled build (setup.py; DISTLOCK_BUILD=compiled), built in a scratch copy
# of the checkout, never in the working tree: TESTS="-q tests/test_core.py" runs those, no
# TESTS the whole suite.  The build takes 25 to 40 s on 2 shared cores.
TESTS ?=
test-compiled: setup
	PYTHON=$(PY) bash .ci/test-compiled $(TESTS)

# The pure-Python package (what `pip install -e .` and a checkout import, and what a build
# without a C compiler installs) under the tests that exercise what the compiled build
# compiles: the core's own, parity of the two drivers, both drivers with every primitive,
# the property machines (a quarter of the examples; the compiled run gives them their full
# count) and TLC's validation of the drivers' traces.  tests/test_compiled.py fails if a
# .so left in the checkout would be imported instead.  About 100 s on 2 cores.
PURE_TESTS ?= \
	tests/test_compiled.py \
	tests/test_core.py tests/test_reentrant_core.py tests/test_semaphore_core.py \
	tests/test_wait_core.py tests/test_flows.py \
	tests/test_parity.py tests/test_parity_semaphore.py tests/test_parity_wait.py \
	tests/test_parity_readwrite.py tests/test_parity_election.py \
	tests/drivers/_async/test_readwrite.py tests/drivers/_sync/test_readwrite.py \
	tests/drivers/_async/test_election.py tests/drivers/_sync/test_election.py \
	tests/drivers/_async/test_lock.py tests/drivers/_sync/test_lock.py \
	tests/drivers/test_lock_asyncio.py tests/drivers/test_lock_threads.py \
	tests/drivers/_async/test_call_options.py tests/drivers/_sync/test_call_options.py \
	tests/drivers/_async/test_reentrant.py tests/drivers/_sync/test_reentrant.py \
	tests/drivers/test_reentrant_asyncio.py tests/drivers/test_reentrant_threads.py \
	tests/drivers/_async/test_semaphore.py tests/drivers/_sync/test_semaphore.py \
	tests/drivers/test_semaphore_asyncio.py \
	tests/drivers/_async/test_semaphore_wait.py tests/drivers/_sync/test_semaphore_wait.py \
	tests/drivers/_async/test_wait.py tests/drivers/_sync/test_wait.py \
	tests/drivers/test_wait_asyncio.py tests/drivers/test_wait_threads.py \
	tests/drivers/_async/test_wait_handoff.py tests/drivers/_sync/test_wait_handoff.py tests/drivers/test_wait_handoff_asyncio.py \
	tests/test_wait_recheck.py \
	tests/properties/test_core_stateful.py tests/properties/test_twins.py \
	tests/properties/test_redis_stateful.py tests/properties/test_reentrant_stateful.py \
	tests/properties/test_semaphore_stateful.py \
	tests/test_trace.py::test_integration_traces_are_behaviours_of_the_spec \
	tests/test_trace_reentrant.py::test_reentrant_runs_are_behaviours_of_the_spec \
	tests/test_memory_budget.py
test-pure: setup
	DISTLOCK_EXAMPLES=$${DISTLOCK_EXAMPLES:-250} $(PY) -m pytest -q -p no:cacheprovider $(PURE_TESTS)

# Both drivers, waiting included, on the oldest redis-py pyproject.toml allows (the rest of
# the suite runs on the newest): redis-py before 5.3 wants a command name to hand out a
# pooled connection, which a waiter's BLPOP takes.  About a minute.
OLDEST_REDIS_TESTS ?= \
	tests/drivers/_async/test_lock.py tests/drivers/_sync/test_lock.py \
	tests/drivers/test_lock_asyncio.py tests/drivers/test_lock_threads.py \
	tests/drivers/_async/test_call_options.py tests/drivers/_sync/test_call_options.py \
	tests/drivers/_async/test_wait.py tests/drivers/_sync/test_wait.py \
	tests/drivers/test_wait_asyncio.py tests/drivers/test_wait_threads.py \
	tests/drivers/_async/test_pool_waiters.py tests/drivers/_sync/test_pool_waiters.py \
	tests/drivers/_async/test_close.py tests/drivers/_sync/test_close.py tests/drivers/test_close_asyncio.py
test-oldest-redis: setup
	PYTHON=$(PY) bash .ci/test-oldest-redis $(OLDEST_REDIS_TESTS)

lint:
	$(PY) -m ruff check distlock tests benchmarks
	$(PY) -m mypy --strict

unit: setup
	$(PY) -m pytest -m "not chaos"

# What needs nothing but Python: the core, the flows, the options, the scripts' files, the
# tools' pure parts; no server, no TLC, no long Hypothesis machine, no wheel build (markers
# set by tests/conftest.py and tests/test_build.py).  Seconds, and no set-up.
quick:
	$(PY) -m pytest -q -m "not redis and not tlc and not properties and not chaos and not build"

# Fault injection: real Redis behind real Toxiproxy; prints the table, writes chaos-report.json.
chaos: setup
	$(PY) -m pytest -m chaos tests/chaos -q

# Long Hypothesis runs of tests/properties (about 20x the examples CI runs).
test-deep: setup
	DISTLOCK_PROFILE=deep $(PY) -m pytest tests/properties -q --timeout 0

# Mutation testing of the Lua scripts (tests/mutation.py): each plausible script bug in the
# list is patched into a scratch copy of the checkout, and the tests named for it must fail
# there, after they pass on the scripts as they are.  MUTANTS=quick runs a short list (W11
# among it); MUTANTS="W11 E1" runs those.  On 2 cores: about 2 to 3.5 minutes for all, about
# 30 s for the quick list (the part of `make test`, which must stay under CI's budget).
MUTANTS ?= all
mutation: setup
	$(PY) -m tests.mutation $(MUTANTS)

# Benchmarks (never run by CI): each suite prints its table and writes bench-results/NAME.json.
# Needs the peers: pip install -e '.[bench]'.  `make bench` measures the build users install,
# the compiled one (.ci/with-compiled builds it in a scratch copy and runs the suites there);
# `make bench-pure` the pure one (the fallback where no C compiler is found), into
# bench-results/pure/.  BENCH_ARGS=--pin puts redis-server and the client on CPUs of their
# own; BENCH_ARGS=--quick for a short run.
BENCH_DIR ?= bench-results
BENCH_ARGS ?=
bench:
	PYTHON=$(PY) bash .ci/with-compiled $(MAKE) --no-print-directory bench-suites \
	  PY=$(PY) BENCH_DIR=$(abspath $(BENCH_DIR)) BENCH_ARGS="$(BENCH_ARGS)"
bench-pure:
	$(MAKE) --no-print-directory bench-suites BENCH_DIR=$(abspath $(BENCH_DIR))/pure \
	  BENCH_ARGS="$(BENCH_ARGS)"
# The suites, on whichever build this checkout imports (bench and bench-pure choose).
bench-suites:
	$(PY) benchmarks/cycles.py --json $(BENCH_DIR)/cycles.json $(BENCH_ARGS)
	$(PY) benchmarks/split.py --json $(BENCH_DIR)/split.json $(BENCH_ARGS)
	$(PY) benchmarks/roundtrips.py --json $(BENCH_DIR)/roundtrips.json $(BENCH_ARGS)
	$(PY) benchmarks/held.py --json $(BENCH_DIR)/held.json $(BENCH_ARGS)
	$(PY) benchmarks/scale.py --cluster --json $(BENCH_DIR)/scale.json $(BENCH_ARGS)

# Instructions and first-level cache misses per cycle under valgrind (apt-get install
# valgrind): the same figures on a loaded machine as on a quiet one, against connections
# whose replies cost nothing, then the client's part of the same cycles against a private
# redis-server.  About ten minutes.
bench-instructions:
	$(PY) benchmarks/instructions.py --redis --cache --json $(BENCH_DIR)/instructions.json

# The chart of the documentation's Performance page, from the last `make bench`.
bench-plot:
	$(PY) benchmarks/plot.py --results $(BENCH_DIR) --out docs/benchmarks.png
