# uxsched — the two commands a newcomer needs: `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo

.PHONY: all setup build demo test check fmt clippy bench reliability clean deb

all: build

setup:
	@bash scripts/setup.sh

build: setup
	$(CARGO) build --release --locked -p uxsched

## The main job (see README).
demo: build
	./target/release/uxsched demo

## The whole test suite (CI runs this, as root). Tests that need root are `#[ignore]`d: as root
## they all run (--include-ignored); otherwise the last line says how many did not run.
test: setup
	$(CARGO) fmt --all -- --check
	CARGO=$(CARGO) bash scripts/test.sh

## Lints as errors (CI runs this too). `--release`: shares the artifacts `make test` builds.
## scripts/layers.py: the daemon's modules import each other without a circle (docs/architecture.md).
check: setup
	python3 scripts/layers.py crates/daemon/src
	$(CARGO) clippy --workspace --all-targets --locked --release -- -D warnings

fmt:
	$(CARGO) fmt --all

## Simulator speed benchmark (figures in docs/results/README.md).
bench: build
	./target/release/uxsched sim bench

## The daemon's reliability on this kernel, as root (figures in docs/results/README.md; ~15 min).
## Shorter: make reliability ARGS="--kills 10 --storm 1000 --messages 100000 --churn-secs 10"
reliability: build
	./target/release/uxsched reliability $(ARGS)

## The Debian package: target/debian/uxsched_<version>_<arch>.deb, from the release binary with
## dpkg-deb (scripts/deb.sh, docs/packaging.md). Install: sudo apt install ./target/debian/uxsched_*.deb
deb: build
	bash scripts/deb.sh

clean:
	$(CARGO) clean
