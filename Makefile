# uxsched — the two commands a newcomer needs: `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo

.PHONY: all setup build demo test check fmt clippy bench clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	$(CARGO) build --release --locked -p uxsched

## The main job (see README).
demo: build
	./target/release/uxsched demo

## The whole test suite (CI runs this).
test: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) test --workspace --locked --release --no-fail-fast

check: setup
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

fmt:
	$(CARGO) fmt --all

## Simulator speed benchmark (figures quoted in README).
bench: build
	./target/release/uxsched sim bench

clean:
	$(CARGO) clean
