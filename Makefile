# The two commands of the README: `make lab` (the main job) and `make test`.
CARGO ?= cargo
BIN := target/release/unbloat

.PHONY: all deps build lab test bench deb static clean

all: build

deps:
	scripts/install-deps

build:
	$(CARGO) build --release --locked

# Build, install what is missing, run the emulated before/after on a bloated VDSL2 link.
lab: deps build
	$(BIN) lab --out report

# Every test: units, golden scripts, fixtures, and the real-kernel tests (host kernel or UML).
# One test thread: the lab's and the probes' tests run their own traffic and measure it, so
# they must not share the CPUs. The binary's start/stop tests measure nothing; two threads
# boot two User-Mode Linux guests at once and halve their time.
test: deps build
	$(CARGO) test --release --locked --workspace --exclude unbloat -- --test-threads=1
	$(CARGO) test --release --locked -p unbloat -- --test-threads=2

# The Debian package (docs/install.md): target/debian/unbloat_VERSION-1_ARCH.deb.
deb: deps build
	scripts/deb

# A statically linked binary for a router (docs/install.md): target/TARGET/release/unbloat.
TARGET ?= x86_64-unknown-linux-musl
static:
	scripts/static $(TARGET)

bench: deps build
	$(BIN) bench start

clean:
	$(CARGO) clean
