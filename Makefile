# inventory-inbox — the two commands a newcomer needs are `make demo` and
# `make test`; everything they need is installed and started by the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO    ?= cargo
FEATURES := --features failpoints
FUZZ_SECONDS ?= 120
REPORT   ?= .local/loadtest/report.json
DURATION ?= 60
RATE     ?= 1400

.PHONY: help deps test-deps services-up services-down build test compat verify defects mutants explore fmt lint demo loadtest bench bench-ceiling bench-scale bench-console console-demo profile soak bench-network bench-deploy chaos fuzz deploy-check image-check

help:
	@echo "make demo | test | compat | verify | defects | mutants | explore | build | services-up | services-down | loadtest | bench | bench-ceiling | bench-scale | profile | soak | bench-network | bench-deploy | chaos | fuzz | fmt | lint | deploy-check | image-check"

# System packages the Rust build needs (librdkafka with TLS).
deps:
	@scripts/build-deps.sh

# System packages the tests need (Debian's prometheus for tests/observability.rs,
# python3-venv for the CloudEvents SDK's venv of tests/cloudevents.rs),
# and the OpenTelemetry Collector of tests/tracing.rs (tools/otelcol, built
# with Go from the module proxy: minutes the first time, then a checksum).
test-deps:
	@scripts/test-deps.sh
	@scripts/otelcol.sh build >/dev/null

services-up:
	scripts/services.sh up $(if $(KAFKA_BROKERS),--brokers $(KAFKA_BROKERS)) $(if $(KAFKA_VERSION),--kafka-version $(KAFKA_VERSION))

services-down:
	scripts/services.sh down
	scripts/toxiproxy.sh down

build: deps
	$(CARGO) build --release --workspace

# Every test, against real Kafka and PostgreSQL started here; then a few
# fixed seeds of `make explore` (TEST_SEEDS), short and slow, with the
# debug binaries the tests built.
TEST_SEEDS ?= 9 38
test: deps test-deps services-up
	scripts/services.sh prune
	$(CARGO) test --workspace $(FEATURES)
	$(CARGO) build --workspace $(FEATURES) --bins
	INBOX_BIN_DIR=target/debug EXPLORE_SECONDS=30 EXPLORE_RATE=150 scripts/explore.sh $(TEST_SEEDS)

# The core acceptance (duplicates, crash recovery, rebalance, both group
# protocols where the broker has them) against each pinned Kafka version
# (3.9.2, 4.1.2, 4.4.0; COMPAT_VERSIONS="V ..." for some), each on a fresh
# broker of its own on 127.0.0.1:19092 beside the local one, which it leaves
# alone; the table goes to docs/deploy.md#kafka-versions. Starts the local
# services only when nothing answers on PostgreSQL's port.
compat: deps
	CARGO="$(CARGO)" scripts/compat.sh $(COMPAT_VERSIONS)

# The store against the reference model of docs/design.md's rules
# (tests/model_store.rs, docs/design.md#checked-against-a-model) for
# MODEL_CASES generated cases instead of make test's few; prints the
# outcomes exercised and the cases per minute. Not beside make test, whose
# `scripts/services.sh prune` drops the databases of runs, this one's too.
MODEL_CASES ?= 2000
verify: deps services-up
	MODEL_CASES=$(MODEL_CASES) $(CARGO) test $(FEATURES) --test model_store -- --nocapture

# Proof that the model check finds things: each patch in tests/defects/
# puts a defect found before back into a copy of this commit, and the model
# check must fail on it; each in tests/defects/statement/ is a mutant of the
# batch function's SQL, which the store's tests or the model check must
# catch (scripts/reintroduced-defects.sh; DEFECT_CASES, DEFECT_KINDS).
defects: deps services-up
	scripts/reintroduced-defects.sh

# cargo-mutants on src/batch.rs, src/event/ and src/store/ (or
# MUTANTS_FILES), judged by the in-process tests and the model check
# (scripts/mutants.sh): the share of mutants caught per file, in
# .local/mutants/report.md. Hours; MUTANTS_ITERATE=1 goes on after a run
# cut short. Not beside make test.
mutants: deps services-up
	scripts/mutants.sh

# Seeded fault schedules against the real system under load, the database
# checked against the reference model fed with what the topic holds
# (scripts/explore.sh, docs/design.md#checked-against-a-model): SEEDS
# (apart by spaces or commas: SEEDS=11,12), EXPLORE_SECONDS (60),
# EXPLORE_RATE (400), EXPLORE_BROKERS (1, or 3).
# It kills the shared brokers: not beside make test.
SEEDS ?= 1 2 3 4 5 6 7 8 9 10
explore: build services-up
	EXPLORE_SEEDS="$(SEEDS)" scripts/explore.sh

# One generator scenario with a lag spike, against a consumer started and
# stopped here, on a fresh database and topic.
loadtest: build services-up
	scripts/loadtest.sh --scenario loadtest --report $(REPORT) --duration $(DURATION) --rate $(RATE)

# The newcomer's first command: about a minute at 1,400 events/s with a 20 s
# consumer pause, duplicates and poison included; prints the report.
demo: build services-up
	scripts/loadtest.sh --scenario demo --report .local/demo/report.json \
	  --duration 60 --rate 1400 --pause-at 20 --pause-for 20 \
	  -- --duplicate-ratio 0.05 --poison-ratio 0.01

# The numbers of docs/design.md#numbers in one run; figures to .local/bench/results.json.
bench: build services-up
	scripts/bench.sh

# The batch statement against its floor alone (SPEC §19): the database-only
# ceiling and the same rows written bare by pgbench, with their ratio, in a
# minute; INBOX_BIN_DIR=DIR measures another build (an A/B).
bench-ceiling: build services-up
	scripts/bench-ceiling.sh

# The steady and max runs of `make bench` and the database-only ceiling on
# an empty database and on one holding SCALE_EVENTS (30 M) events of
# history, side by side; figures to .local/bench/scale.json
# (docs/design.md#storage). The history is written once and kept.
bench-scale: build services-up
	scripts/bench-scale.sh

# The console's pages against CONSOLE_PARKED (1,000,000) parked rows in a
# scratch database, each timed; a Markdown table (docs/benchmarks.md#the-console).
bench-console: build services-up
	scripts/bench-console.sh

# The console over the demo's database (after `make demo`), read-only unless
# INBOX_CONSOLE_TOKEN is set: http://127.0.0.1:9465/
console-demo: build services-up
	target/release/inventory-inbox console

# Where the batch statement spends its time, step by step, at batch sizes
# 1, 10 and 100, with the service's plan and with one made per batch
# (docs/benchmarks.md); PROFILE_DATABASE=NAME profiles a database with history.
profile: build services-up
	scripts/profile.sh

# SOAK_MINUTES (60) at 1,400 events/s, 5 % duplicates, 1 % poison, with
# days rolling over every SOAK_DAY_SECONDS (300) so that partitions are made
# and dropped under load; every day reconciled, table sizes per minute to
# .local/soak/soak.json (docs/design.md#storage).
SOAK_MINUTES ?= 60
soak: build services-up
	SOAK_MINUTES=$(SOAK_MINUTES) scripts/soak.sh

# The numbers of docs/design.md#numbers: the same scenarios with toxiproxy between the
# consumer and PostgreSQL at round trips of 0, 2, 10 and 50 ms, beside a
# loopback run; figures to .local/bench/network.json.
bench-network: build services-up
	scripts/bench-network.sh

# Deploys under load (docs/deploy.md#deploys-under-load): three members at
# 1,400 events/s rolled (pod-start gaps 0, 2, 10 s) and scaled 3 -> 6 -> 3,
# with a baseline, the configuration of deploy/ beside the old one,
# alternating; every phase reconciled. Figures to .local/bench/deploy.json.
# About half an hour (BENCH_DEPLOY_ROUNDS=1 halves it).
bench-deploy: build services-up
	scripts/bench-deploy.sh

# Faults under load, each reconciled: consumers killed, a rebalance storm,
# PostgreSQL restarted, the broker killed, a replay, a database failover to a
# lagging standby (not part of make test: it kills the shared broker).
# CHAOS_SECONDS of load per scenario.
CHAOS_SECONDS ?= 30
# 3: on a cluster of three brokers, with the kill-leader and kill-coordinator
# scenarios.
CHAOS_BROKERS ?= 1
chaos: build
	CHAOS_BROKERS=$(CHAOS_BROKERS) scripts/chaos.sh --seconds $(CHAOS_SECONDS) --rate $(RATE)

# Fuzzes decode + validate with libFuzzer for FUZZ_SECONDS, starting from the
# seed corpus in fuzz/seeds (not part of make test). Uses the nightly
# toolchain when installed, else the stable one with nightly flags allowed.
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	mkdir -p fuzz/corpus/decode && cp -n fuzz/seeds/decode/* fuzz/corpus/decode/
	cd fuzz && if rustup toolchain list | grep -q '^nightly'; then \
	    cargo +nightly fuzz run decode corpus/decode -- -max_total_time=$(FUZZ_SECONDS); \
	  else \
	    RUSTC_BOOTSTRAP=1 cargo fuzz run decode corpus/decode -- -max_total_time=$(FUZZ_SECONDS); \
	  fi

# The Kubernetes manifests of deploy/ validated offline with pinned tools
# (also run by make test, tests/deploy_manifests.rs).
deploy-check:
	scripts/deploy-check.sh

# The image of deploy/Containerfile built with the release binary and run
# against the local services (needs root and podman; not part of make test).
image-check: build services-up
	scripts/image-check.sh

# The schema the migrations build, in one file (docs/schema.sql, checked by
# tests/schema_file.rs): run after adding a migration.
.PHONY: schema
schema: build services-up
	scripts/schema.sh docs/schema.sql

fmt:
	$(CARGO) fmt --all

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets $(FEATURES) -- -D warnings
