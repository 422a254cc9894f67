# The two commands of the README: `make lab` (the main job) and `make test`.
CARGO ?= cargo
BIN := target/release/unbloat
# The test bench (crates/labcli): the lab and the benchmarks, never packaged; it runs $(BIN).
LAB := target/release/unbloat-lab

.PHONY: all deps build uml lab before-after test fuzz bench deb static router openwrt clean

all: build

# Each target installs only what it needs: scripts/install-deps lab|deb|test.
deps:
	scripts/install-deps test

# The product never reads the tests' knobs (UNBLOAT_TC, ...): the check proves it of what was built.
# One build makes both binaries, and the check runs on each.
build:
	$(CARGO) build --release --locked
	scripts/check-release-knobs $(BIN) $(LAB)

# The lab's own User-Mode Linux (docs/kernel.md): built once, cached in /var/cache/unbloat/uml.
uml:
	scripts/uml/build

# Build, install what is missing, run the emulated before/after on a bloated VDSL2 link. The
# kernel: the host's if it has cake, netem and htb, else a User-Mode Linux that boots here (the
# trial boot of `unbloat-lab kernel`), else the lab's own, built once.
lab: build
	scripts/install-deps lab
	$(LAB) kernel -- true 2>/dev/null || scripts/uml/build
	$(LAB) run --out report

# The README's picture is `make lab`'s own: the comparison its report opens with (compare.svg).
before-after: lab
	cp report/compare.svg docs/img/before-after.svg

# Every test: units, golden scripts, fixtures, and the real-kernel tests (host kernel or UML).
# scripts/test builds every test binary, then runs two lanes at once: the lab crate's tests, one
# at a time (they run their own traffic and measure it), and beside them every other crate's,
# then the binary's start/stop tests on two threads (they measure nothing). A test whose result
# hangs on timing (tune's) runs with no other test's guest beside it. The tests inject faults
# through the feature test-knobs (crates/system/src/knobs.rs); it rebuilds target/release/unbloat
# with them, and the next `make build` (every target that ships depends on it) builds it without.
# Last, the router build of the router set (scripts/router): its size in the log, and a failure
# when it grows past its budget (`make router` builds the full set too; CI's minutes are short);
# then its OpenWrt package, checked (scripts/openwrt/check; `make openwrt` builds every CPU's),
# and LuCI's page for it (scripts/openwrt/package-luci, scripts/openwrt/check-luci). Before the
# tests, OpenWrt's own `uci` and libubox's `jshn`, built from their source once
# (scripts/openwrt/userland): the UCI tests read what `uci` writes, and LuCI's rpcd plugin reads
# its arguments with `jshn`. The fuzz targets' bodies run over their seeds in the lanes
# (crates/fuzz); libFuzzer itself runs in `make fuzz` (its nightly build alone takes minutes).
test: deps uml
	scripts/openwrt/userland
	scripts/test
	scripts/router x86_64-unknown-linux-musl router
	scripts/openwrt/check $$(scripts/openwrt/package target/x86_64-unknown-linux-musl/router/unbloat-router x86_64 target/openwrt | cut -d, -f1)
	scripts/openwrt/check-luci $$(scripts/openwrt/package-luci target/openwrt | cut -d, -f1)

# Each fuzz target for FUZZ_SECONDS (60) under libFuzzer, one at a time (docs/reliability.md#fuzzing):
# executions, time and findings per target; what a run learns is kept in target/fuzz/corpus/.
FUZZ_SECONDS ?= 60
fuzz:
	scripts/install-deps fuzz
	scripts/fuzz run $(FUZZ_SECONDS)

# The Debian package (docs/install.md): target/debian/unbloat_VERSION-1_ARCH.deb.
deb: build
	scripts/install-deps deb
	scripts/deb

# A statically linked binary for a router (docs/install.md): target/TARGET/release/unbloat.
TARGET ?= x86_64-unknown-linux-musl
static:
	scripts/static $(TARGET)

# The router's builds (docs/install.md): size-optimised, static, stripped, at
# target/TARGET/router/unbloat-router (shaping, status, test, daemon, autorate) and
# unbloat-full (everything); each fails when over its budget.
router:
	scripts/router $(TARGET) router
	scripts/router $(TARGET) full

# OpenWrt's packages (docs/openwrt.md): target/openwrt/unbloat_VERSION-1_ARCH.ipk for each
# router CPU (scripts/openwrt/build), each checked (scripts/openwrt/check), and
# luci-app-unbloat_VERSION-1_all.ipk (scripts/openwrt/check-luci).
openwrt:
	scripts/openwrt/build

bench: deps build uml
	$(LAB) bench start

clean:
	$(CARGO) clean
