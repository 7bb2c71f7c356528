# inventory-inbox — the two commands a newcomer needs are `make demo` and
# `make test`; everything they need is installed and started by the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO    ?= cargo
FEATURES := --features failpoints
REPORT   ?= .local/loadtest/report.json
DURATION ?= 60
RATE     ?= 1400

.PHONY: help deps test-deps services-up services-down build test fmt lint demo loadtest bench

help:
	@echo "make demo | test | build | services-up | services-down | loadtest | bench | fmt | lint"

# System packages the Rust build needs (librdkafka with TLS).
deps:
	@scripts/build-deps.sh

# System packages the tests need (Debian's prometheus for tests/observability.rs).
test-deps:
	@scripts/test-deps.sh

services-up:
	scripts/services.sh up

services-down:
	scripts/services.sh down

build: deps
	$(CARGO) build --release --workspace

# Every test, against real Kafka and PostgreSQL started here.
test: deps test-deps services-up
	$(CARGO) test --workspace $(FEATURES)

fmt:
	$(CARGO) fmt --all

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets $(FEATURES) -- -D warnings
