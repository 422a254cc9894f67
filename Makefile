# The two commands of the README: `make lab` (the main job) and `make test`.
CARGO ?= cargo
BIN := target/release/unbloat

.PHONY: all deps build lab test bench clean

all: build

deps:
	scripts/install-deps

build:
	$(CARGO) build --release --locked

# Build, install what is missing, run the emulated before/after on a bloated VDSL2 link.
lab: deps build
	$(BIN) lab --out report

# Every test: units, golden scripts, fixtures, and the real-kernel tests (host kernel or UML).
# One test thread: the kernel tests boot User-Mode Linux and run their own traffic.
test: deps build
	$(CARGO) test --release --locked --workspace -- --test-threads=1

bench: deps build
	$(BIN) bench start

clean:
	$(CARGO) clean
