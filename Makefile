# rsverbs: build, install, test. `make help` lists every target in two
# groups: build and install (any Linux), tests and measurements (Debian 12,
# as root; docs/testing.md).

VERSION     := 0.1.0
SOVERSION   := 1
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR      ?= $(PREFIX)/share/man
# make install strips the library; its debug info stays in
# build/strip/$(REALNAME).debug (named by .gnu_debuglink), and make
# install-debug puts it in $(DEBUGDIR), where gdb looks for it.
# INSTALL_STRIP=no installs it unstripped (debian/rules: dh_strip then makes
# the -dbgsym package).
INSTALL_STRIP ?= yes
DEBUGDIR    ?= $(LIBDIR)/.debug
DESTDIR     ?=

CARGO       ?= cargo
CC          ?= cc
CXX         ?= c++
CBINDGEN_VERSION := 0.29.2
# ARCH builds for another architecture (docs/architectures.md): Debian's
# name (amd64, arm64, ppc64el, s390x) or the toolchain's, which Rust's and
# zig's targets share (x86_64, aarch64, powerpc64le, s390x). The host's
# build goes to build/, another architecture's to build-ARCH/ by Debian's
# name: make ARCH=arm64 (or ARCH=aarch64) writes build-arm64/librsverbs.so.1.
# testbed/arch.sh (ARCH_BUILD) names the same directories.
HOST_ARCH   := $(shell uname -m)
ARCH        ?= $(HOST_ARCH)
ARCH_NAMES  := amd64:x86_64 arm64:aarch64 ppc64el:powerpc64le s390x:s390x
ARCH_PAIR   := $(subst :, ,$(firstword $(foreach p,$(ARCH_NAMES),$(if $(filter $(ARCH),$(subst :, ,$(p))),$(p)))))
ifeq ($(ARCH_PAIR),)
ifneq ($(ARCH),$(HOST_ARCH))
$(error ARCH must be one of amd64 arm64 ppc64el s390x (or x86_64 aarch64 powerpc64le), not '$(ARCH)')
endif
# Another host builds for itself, as before there was an ARCH.
ARCH_PAIR   := $(shell dpkg --print-architecture 2>/dev/null || echo $(HOST_ARCH)) $(HOST_ARCH)
endif
ARCH_DEB    := $(word 1,$(ARCH_PAIR))
ARCH_RUST   := $(word 2,$(ARCH_PAIR))
ifeq ($(ARCH_RUST),$(HOST_ARCH))
BUILD       ?= $(CURDIR)/build
else
BUILD       ?= $(CURDIR)/build-$(ARCH_DEB)
endif
SONAME      := librsverbs.so.$(SOVERSION)
REALNAME    := librsverbs.so.$(SOVERSION).0.0
LIB         := $(BUILD)/$(SONAME)
export RSVERBS_BUILD := $(BUILD)
RSVERBS_CACHE ?= $(HOME)/.cache/rsverbs

# The Rust toolchain (tools/deps.sh): the cargo on PATH when it is at least
# Cargo.toml's rust-version; else Debian's cargo-web and rustc-web, which
# make deps installs in /usr/bin: /usr/bin then goes first on PATH, ahead of
# an older rustup toolchain.
ifneq ($(shell tools/deps.sh --cargo-ok 2>/dev/null),ok)
export PATH := /usr/bin:$(PATH)
endif
# Another ARCH whose standard library Debian's rustc-web cannot have (s390x
# on Debian 12: bookworm-security is not built for it since bookworm's LTS,
# docs/architectures.md): tools/deps.sh installs a pinned rustup toolchain
# in the cache and links $(RSVERBS_CACHE)/rustup/bin-ARCH to its bin, which
# goes first on PATH here, when no rustup is on PATH (ppc64el too when
# apt cannot fetch its bookworm-security list). Until deps-build makes it,
# and for an ARCH whose std comes from Debian, the entry does not exist.
ifneq ($(ARCH_RUST),$(HOST_ARCH))
ifeq ($(shell command -v rustup),)
export PATH := $(RSVERBS_CACHE)/rustup/bin-$(ARCH_DEB):$(PATH)
endif
endif
# cbindgen (make header, ctest/header_fresh.sh): Debian's 0.24.3 cannot parse
# the crate (docs/building.md), so cargo install, into the cache when the one
# on PATH is not $(CBINDGEN_VERSION).
CBINDGEN_ROOT := $(RSVERBS_CACHE)/cbindgen-$(CBINDGEN_VERSION)
export PATH := $(CBINDGEN_ROOT)/bin:$(PATH)

# The final link (docs/building.md). cargo builds a staticlib; the Makefile
# links librsverbs.so.1 itself, with one version script (src/rsverbs.map)
# that names every export, so GNU ld and lld give the same export set.
#   LINKER=zig  zig cc against glibc $(GLIBC_FLOOR)'s symbol versions: one
#               file that loads on every glibc >= $(GLIBC_FLOOR) (the default)
#   LINKER=gnu  $(CC) with GNU ld, against the build machine's glibc
#               (distribution packages, debian/)
LINKER      ?= zig
GLIBC_FLOOR := 2.17
export RSVERBS_GLIBC_FLOOR := $(GLIBC_FLOOR)
ZIG_VERSION := 0.17.1
# sha256 of the ziglang wheel on PyPI (pip download checks it).
ZIG_SHA256  := ea6cc5d87b033cf0aedfbc8f9549a908cae6c50ac31f1698188fa48a74524b54
ZIG_DIR     := $(RSVERBS_CACHE)/zig-$(ZIG_VERSION)
ZIG         := $(ZIG_DIR)/ziglang/zig
# CARGO_TARGET and CARGO_CFG build a variant elsewhere (make bench's
# untraced library: CARGO_CFG="--cfg rsverbs_bench_untraced"); the product
# is target/lib, apart from cargo test's target/. The C library's switches
# are rustc cfgs that only this build passes (CLIB_CFG; Cargo.toml), not
# Cargo features, which any dependent could turn on: no_std with
# src/runtime.rs and src/lifecycle.rs (rsverbs_clib), the .symver names
# (rsverbs_symver). The crate is an rlib; cargo rustc --crate-type
# staticlib makes the C archive for this build only.
CARGO_TARGET ?= target/lib
CARGO_CFG ?=
CLIB_CFG    := --cfg rsverbs_clib --cfg rsverbs_symver
# Fat LTO at opt-level "s" (Cargo.toml's release profile: lto = true is
# fat; until 15a0691 this rule turned it off): the stripped library is no
# larger than Debian 12's libibverbs.so.1 on each architecture
# (docs/building.md, the size against libibverbs; ctest/crossarch.sh holds
# it). LTO compiles the parts of core that rsverbs uses into its own object
# (ppc64el's precompiled core kept 50 KB of dead code through its .toc);
# "s" inlines less. Stripped, when adopted: amd64 129,504 (libibverbs
# 133,744), arm64 125,464 (133,672), ppc64el 150,024 (199,208), s390x
# 130,824 (133,672); without LTO at opt-level 3 they were 180,072 on amd64.
# make bench measured the verbs with it (BENCHMARKS.md).
# Another architecture (ARCH, above): cargo --target, and Debian's cross
# tools (tools/deps.sh --cross ARCH) for the GNU link and objcopy. The
# command and the example link libibverbs of ARCH: the cross gcc's own when
# libibverbs-dev:ARCH is installed (multiarch), else the one that
# tools/cross-sysroot.sh unpacks from Debian's packages of ARCH
# (RSVERBS_CROSS_SYSROOT names it; made in the cache when unset).
ifeq ($(ARCH_RUST),$(HOST_ARCH))
STATICLIB   := $(CARGO_TARGET)/release/librsverbs.a
CARGO_ARCH  :=
GNU_CC      := $(CC)
TOOL_BIN    := target/tool/release/rsverbs
EXAMPLE_BIN := target/release/examples/attach
CARGO_LINK  := $(CARGO)
else
RUST_TARGET := $(ARCH_RUST)-unknown-linux-gnu
STATICLIB   := $(CARGO_TARGET)/$(RUST_TARGET)/release/librsverbs.a
CARGO_ARCH  := --target $(RUST_TARGET)
GNU_CC      := $(ARCH_RUST)-linux-gnu-gcc
OBJCOPY     ?= $(ARCH_RUST)-linux-gnu-objcopy
TOOL_BIN    := target/tool/$(RUST_TARGET)/release/rsverbs
EXAMPLE_BIN := target/$(RUST_TARGET)/release/examples/attach
CARGO_ENV   := CARGO_TARGET_$(shell echo $(RUST_TARGET) | tr a-z- A-Z_)
RSVERBS_CROSS_SYSROOT ?=
# One shell line: the sysroot's flags, then cargo with them.
CARGO_LINK  := flags=$$(tools/cross-sysroot.sh --rustflags $(ARCH_DEB) $(RSVERBS_CROSS_SYSROOT)) && \
               env $(CARGO_ENV)_LINKER=$(GNU_CC) $(CARGO_ENV)_RUSTFLAGS="$$flags" $(CARGO)
endif
OBJCOPY     ?= objcopy
# --hash-style=gnu: DT_GNU_HASH only (glibc reads it since 2.5, below the
# floor), not the SysV .hash too: 512 bytes of the stripped file (make size).
LINK_FLAGS  := -shared -Wl,-soname,$(SONAME) -Wl,--version-script=src/rsverbs.map -Wl,--hash-style=gnu \
               -Wl,--gc-sections -Wl,--as-needed -Wl,-z,relro,-z,now -Wl,-z,defs \
               -Wl,--whole-archive $(STATICLIB) -Wl,--no-whole-archive
# What the library calls: the C library, and libdl for dladdr and dlsym
# (in libc itself only from glibc 2.34). Built without std, it needs no
# unwinder (src/runtime.rs) and nothing else (rustc's --print
# native-static-libs lists nothing).
NATIVE_LIBS := -ldl -lc
# zig knows powerpc64le's glibc from 2.19 on, so that is the floor there
# (docs/architectures.md); 2.17 everywhere else.
ZIG_GLIBC   := $(if $(filter powerpc64le,$(ARCH_RUST)),2.19,$(GLIBC_FLOOR))
ifeq ($(LINKER),zig)
LINK_CC     := env ZIG_GLOBAL_CACHE_DIR=$(RSVERBS_CACHE)/zig-cache ZIG_LOCAL_CACHE_DIR=$(RSVERBS_CACHE)/zig-cache \
               $(ZIG) cc -target $(ARCH_RUST)-linux-gnu.$(ZIG_GLIBC)
LINK_LIBS   := $(NATIVE_LIBS)
LINK_DEPS   := $(ZIG)
else ifeq ($(LINKER),gnu)
# -nodefaultlibs, then the C library and libgcc.a only: Debian's own rustc
# (rustc-web) ships a compiler_builtins with __gcc_personality_v0, whose
# _Unwind_* references --whole-archive brings in. The driver's default
# libgcc_s resolved them and stayed NEEDED (librsverbs1 then depended on
# libgcc-s1, and dpkg-shlibdeps warned of a useless dependency), although
# --gc-sections drops the personality; unresolved, they go with it.
# (-static-libgcc would take them from libgcc_eh.a, whose _Unwind_Resume
# clashes with src/runtime.rs'.)
LINK_CC     := $(GNU_CC) -fuse-ld=bfd -nodefaultlibs
LINK_LIBS   := $(NATIVE_LIBS) -lgcc
LINK_DEPS   :=
else
$(error LINKER must be zig or gnu, not '$(LINKER)')
endif

.PHONY: help all lib tool example size header deps demo-ib deps-build deps-cbindgen check check-more check-all check-unit check-crate check-abi check-vm check-sanitize check-traced fuzz demo compat bench matrix matrix-arch faults fanout \
        install install-debug uninstall clean zig deb deps-deb check-deb check-deb-arch check-freshroot check-install check-packaging check-sib

all: lib tool example $(BUILD)/pkgconfig/rsverbs.pc

lib: $(LIB)

# The library's sources: everything in src/ but the command's package.
LIB_SRCS    := $(shell find src -path src/tool -prune -o -type f -print)
$(STATICLIB): $(LIB_SRCS) Cargo.toml Cargo.lock
	$(CARGO) rustc --release --locked --lib --crate-type staticlib --target-dir $(CARGO_TARGET) $(CARGO_ARCH) --no-default-features -- $(CLIB_CFG) $(CARGO_CFG)

# The command (src/tool, docs/tool.md): its own package and target
# directory, so that its build (the crate as an rlib, without symver)
# never replaces the staticlib above. Links libibverbs (libibverbs-dev).
TOOL        := $(BUILD)/rsverbs
tool: $(TOOL)

# The commit it is built from, for selftest's report (src/tool/build.rs):
# $(BUILD)/commit ("-dirty" when src/ or Cargo.toml differ from the commit,
# as build.rs says) is rewritten when that changes, so
# that make runs cargo then (which runs build.rs again on its own).
COMMIT_STAMP := $(BUILD)/commit
$(COMMIT_STAMP): FORCE
	@mkdir -p $(BUILD); c=$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown); \
	  [ "$$c" = unknown ] || git diff --quiet HEAD -- src Cargo.toml 2>/dev/null || c=$$c-dirty; \
	  [ "$$(cat $@ 2>/dev/null)" = "$$c" ] || echo "$$c" > $@

.PHONY: FORCE
FORCE:

$(TOOL_BIN): $(LIB_SRCS) $(wildcard src/tool/*) Cargo.toml $(COMMIT_STAMP)
	$(CARGO_LINK) build --release --locked --manifest-path src/tool/Cargo.toml --target-dir target/tool $(CARGO_ARCH)

# The safe Rust API's examples (docs/rust.md): examples/attach.rs (attach,
# drop, what the kernel says) and examples/receiver.rs (a receiver that
# stores its attachments beside its QP), the crate as an rlib in cargo's own
# target/, linked with libibverbs; ctest/vm/rust.sh runs both in the guest.
# ctest/consumer builds receiver.rs again as a dependent crate (ctest/crate.sh).
EXAMPLE     := $(BUILD)/examples/attach
RECEIVER    := $(BUILD)/examples/receiver
RECEIVER_BIN := $(dir $(EXAMPLE_BIN))receiver
example: $(EXAMPLE) $(RECEIVER)

$(EXAMPLE) $(RECEIVER) &: $(LIB_SRCS) examples/attach.rs examples/receiver.rs examples/common/mod.rs Cargo.toml Cargo.lock
	$(CARGO_LINK) build --release --locked --example attach --example receiver $(CARGO_ARCH)
	mkdir -p $(BUILD)/examples
	cp $(EXAMPLE_BIN) $(EXAMPLE).tmp
	mv $(EXAMPLE).tmp $(EXAMPLE)
	cp $(RECEIVER_BIN) $(RECEIVER).tmp
	mv $(RECEIVER).tmp $(RECEIVER)

# The C examples (examples/c/, the README's receiver done right and a sender
# with a send-only membership): built with the uninstalled rsverbs.pc, as a
# user builds them with the installed one, their rpath build/; only for the
# host's architecture. ctest/vm/examples.sh runs them in the guest.
C_EXAMPLES  := $(if $(CARGO_ARCH),,$(BUILD)/examples/mcast_recv $(BUILD)/examples/mcast_send)
example: $(C_EXAMPLES)

$(C_EXAMPLES): $(BUILD)/examples/%: examples/c/%.c examples/c/ud.h include/rsverbs.h $(LIB) $(BUILD)/pkgconfig/rsverbs.pc
	mkdir -p $(dir $@)
	$(CC) -std=c11 -D_DEFAULT_SOURCE -O2 -g -Wall -Wextra -o $@.tmp $< \
	  $$(PKG_CONFIG_PATH=$(BUILD)/pkgconfig pkg-config --cflags --libs rsverbs) -Wl,-rpath,$(BUILD)
	mv $@.tmp $@

$(TOOL): $(TOOL_BIN)
	mkdir -p $(BUILD)
	cp $(TOOL_BIN) $@.tmp
	mv $@.tmp $@

$(LIB): $(STATICLIB) src/rsverbs.map $(LINK_DEPS) Makefile
	mkdir -p $(BUILD)
	$(LINK_CC) $(LINK_FLAGS) -o $@.tmp $(LINK_LIBS)
	mv $@.tmp $@
	echo "$(LINKER)" > $(BUILD)/linker
	ln -sf $(SONAME) $(BUILD)/librsverbs.so

zig: $(ZIG)

# zig, from its PyPI wheel (a zip: no pip install, no venv), checked by hash.
$(ZIG):
	tools/fetch-zig.sh $(ZIG_VERSION) $(ZIG_SHA256) $(ZIG_DIR)

# rsverbs.pc from pkgconfig/rsverbs.pc.in: $(call PC_SED,PREFIX,LIBDIR,INCLUDEDIR).
PC_SED      = sed -e 's|@PREFIX@|$(1)|' -e 's|@LIBDIR@|$(2)|' \
                  -e 's|@INCLUDEDIR@|$(3)|' -e 's|@VERSION@|$(VERSION)|'
# The uninstalled .pc, for the tests: points at build/ and include/.
$(BUILD)/pkgconfig/rsverbs.pc: pkgconfig/rsverbs.pc.in Makefile
	mkdir -p $(dir $@)
	$(call PC_SED,$(CURDIR),$(BUILD),$(CURDIR)/include) $< > $@

header: deps-build deps-cbindgen
	cbindgen --quiet --config cbindgen.toml --crate rsverbs --output include/rsverbs.h

deps:
	@tools/deps.sh

# Every build installs what it needs first, for a fresh Debian 12 machine
# (tools/deps.sh --build): the Rust and C toolchains and libibverbs-dev;
# python3-pip while LINKER=zig's zig is not fetched; for another ARCH, its
# cross gcc and Rust standard library (rustup's, or with Debian's rustc-web
# libstd-rust-web-dev:ARCH and libibverbs-dev:ARCH through multiarch:
# docs/architectures.md). One dpkg query when nothing is missing.
deps-build:
	@tools/deps.sh --build $(if $(filter zig,$(LINKER)),$(if $(wildcard $(ZIG)),none,zig),none) $(if $(CARGO_ARCH),$(ARCH_DEB))
$(STATICLIB) $(TOOL_BIN) $(EXAMPLE) $(RECEIVER) $(ZIG): | deps-build

deps-cbindgen:
	@command -v cbindgen >/dev/null && cbindgen --version | grep -q ' $(CBINDGEN_VERSION)$$' \
	  || $(CARGO) install --quiet --locked --root $(CBINDGEN_ROOT) cbindgen --version $(CBINDGEN_VERSION)

# The host checks and the real-kernel suites but make check-more's
# (docs/testing.md); the last line is the "N passed, N failed" total.
check: deps all
	ctest/check.sh

# The fresh Debian 12 root (debootstrap, Debian's own toolchain, offline) and
# the Debian packages built and used in it; in make check only with
# RSVERBS_CHECK_FULL=1 (.ci/run), for make check's time budget.
check-packaging:
	ctest/freshroot.sh; a=$$?; ctest/deb.sh; b=$$?; [ $$a = 0 ] && [ $$b = 0 ]

# The real-kernel suites make check leaves out (ctest/suites.sh: trace, the IP
# join, membership, GID selection, the command, device loss, sanitizer runs,
# stress); RSVERBS_MORE=a|b one group. make check-all: both.
check-more: deps all
	ctest/more.sh

check-all: check check-more

check-unit: deps-build
	ctest/unit.sh

# The crate as Rust users get it: dependents, cargo package, publish --dry-run.
check-crate: deps-build
	ctest/crate.sh

check-abi: deps-cbindgen all
	ctest/header_fresh.sh
	ctest/abi.sh

# The real-kernel suites (Soft-RoCE in qemu); RSVERBS_SUITES="conform e2e" picks some.
check-vm: deps all
	ctest/vm_suite.sh

# Host sanitizer and lint checks (valgrind on the Rust tests, clippy, SAFETY comments, ASan builds).
check-sanitize: deps all
	ctest/sanitize.sh

# Long fuzz run of the sysfs parsers (RSVERBS_FUZZ_SECS, default 600); make check replays the corpus.
fuzz: deps-build
	RSVERBS_FUZZ_SECS=$${RSVERBS_FUZZ_SECS:-600} $(CARGO) test --release --locked --test fuzz_parsers -- --ignored --nocapture fuzz_long

# The real-kernel suites in every (userland, kernel) cell (ctest/matrix.sh;
# RSVERBS_MATRIX_CELLS and RSVERBS_MATRIX_SUITES pick some).
matrix: deps all
	ctest/matrix.sh

# The architecture axis (docs/architectures.md): the bookworm cell on
# Debian's arm64, ppc64el and s390x kernels and userlands, under TCG, and
# arm64's sid cell (Linux 7.x, rdma-core 65).
ARCH_CELLS  := bookworm:bookworm:arm64 sid:sid:arm64 bookworm:bookworm:ppc64el bookworm:bookworm:s390x
matrix-arch: deps all
	RSVERBS_MATRIX_CELLS="$${RSVERBS_MATRIX_CELLS:-$(ARCH_CELLS)}" ctest/matrix.sh

# Every real-kernel suite again with RSVERBS_TRACE=hints (to a file in the
# guest's tmpfs), but trace and the bench smoke, which set it themselves
# (ctest/guest_suite.sh): the return values and errno must not change with
# tracing on (docs/trace.md). Results in ctest/out/traced; .ci/run runs it.
check-traced: deps all
	RSVERBS_TRACE_ALL=hints:trace.log RSVERBS_VM_OUT=$(CURDIR)/ctest/out/traced RSVERBS_VM_TIMEOUT=2400 \
	  ctest/vm_suite.sh; st=$$?; ctest/summary.sh ctest/out/traced; exit $$st

# Every syscall rsverbs makes during a verb failed on purpose, in the guest,
# and each allocation, a cancellation at each syscall, the verb on an 8 KiB
# sigaltstack (ctest/vm/faults.sh, docs/security.md); .ci/run runs it after
# make check. FAULTS_AXES and FAULTS_PATHS run fewer (faults.sh).
faults: deps all
	rm -f ctest/out/faults/*.results
	RSVERBS_SUITES=faults RSVERBS_VM_OUT=$(CURDIR)/ctest/out/faults ctest/vm_suite.sh; st=$$?; \
	  ctest/summary.sh ctest/out/faults; exit $$st

# The software InfiniBand HCA (testbed/sib/): sib.ko built for
# bookworm's kernel, loaded in a boot of its own, checked with rdma-core's
# tools (ctest/vm/sib.sh); before it, in the same boot, conform and
# diffrand on sib0 and sib1 only: the InfiniBand cell (rdma-core and
# rsverbs side by side with multicast LIDs). .ci/run runs it every commit.
check-sib: deps all
	rm -f ctest/out/sib/*.results
	RSVERBS_SIB=1 RSVERBS_SUITES="conform diffrand sib sibfaults sibswitch" CONFORM_DEVS=sib0,sib1 DIFFRAND_DEVS="sib0 sib1" \
	  CONFORM_FALLBACK_LINKS=preload DIFFRAND_OPS=2500 DIFFRAND_FALLBACK_OPS=1000 \
	  RSVERBS_VM_OUT=$(CURDIR)/ctest/out/sib RSVERBS_VM_TIMEOUT=1500 ctest/vm_suite.sh; st=$$?; \
	  ctest/summary.sh ctest/out/sib; exit $$st

# Real clients (mckey, perftest, our relinked example) with and without rsverbs.
compat: deps all
	RSVERBS_SUITES=compat ctest/vm_suite.sh

# Multicast across hosts: 1 sender + N receivers, each a guest on one L2
# segment (testbed/fanout.sh; FANOUT_NS picks N, default "2 8 24").
fanout: deps all
	testbed/fanout.sh

# The README's first command: installs, builds, boots, shows C programs on rsverbs.
demo:
	demo/run.sh

# The InfiniBand half (demo/ib.sh): sib with its switch, opensm, IPoIB;
# attach alone receives nothing, the fabric join makes it arrive, doctor
# says why. A second part, after make demo.
demo-ib:
	demo/ib.sh

# What takes the space in librsverbs.so.1 (bench/sizes.sh; also in BENCHMARKS.md).
size: lib
	@bench/sizes.sh $(LIB)

# Benchmarks against rdma-core and the bare-syscall floor, in the test bed; writes BENCHMARKS.md.
# The "untraced" contender: the same library with the RSVERBS_TRACE check
# compiled out (--cfg rsverbs_bench_untraced), for what tracing costs when off.
bench: deps all
	$(MAKE) --no-print-directory lib BUILD=$(CURDIR)/bench/out/untraced CARGO_TARGET=target/untraced \
	  CARGO_CFG="--cfg rsverbs_bench_untraced"
	bench/run.sh

# The installed library: stripped of debug info and symbol table, with a
# .gnu_debuglink to the separate debug file (docs/building.md). build/$(SONAME)
# itself stays unstripped (make bench resolves its symbols).
STRIPPED    := $(BUILD)/strip/$(REALNAME)
$(STRIPPED): $(LIB)
	mkdir -p $(dir $@)
	$(OBJCOPY) --only-keep-debug $(LIB) $@.debug
	cd $(dir $@) && $(OBJCOPY) --strip-all --add-gnu-debuglink=$(REALNAME).debug $(LIB) $(REALNAME).tmp
	mv $@.tmp $@

INSTALL_LIB := $(if $(filter yes,$(INSTALL_STRIP)),$(STRIPPED),$(LIB))
# The command, stripped the same way (it carries no debug info to keep).
$(BUILD)/strip/rsverbs: $(TOOL)
	mkdir -p $(dir $@)
	$(OBJCOPY) --strip-all $(TOOL) $@.tmp
	mv $@.tmp $@
INSTALL_TOOL := $(if $(filter yes,$(INSTALL_STRIP)),$(BUILD)/strip/rsverbs,$(TOOL))

install: all $(INSTALL_LIB) $(INSTALL_TOOL)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man7
	install -m 0755 $(INSTALL_TOOL) $(DESTDIR)$(BINDIR)/rsverbs
	install -m 0755 $(INSTALL_LIB) $(DESTDIR)$(LIBDIR)/$(REALNAME)
	ln -sf $(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/librsverbs.so
	install -m 0644 include/rsverbs.h $(DESTDIR)$(INCLUDEDIR)/rsverbs.h
	$(call PC_SED,$(PREFIX),$(LIBDIR),$(INCLUDEDIR)) pkgconfig/rsverbs.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/rsverbs.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/rsverbs.pc
	install -m 0644 docs/man/rsverbs.7 $(DESTDIR)$(MANDIR)/man7/rsverbs.7
	install -m 0644 docs/man/rsverbs.1 $(DESTDIR)$(MANDIR)/man1/rsverbs.1
	install -m 0644 docs/man/rsverbs_gid_index.3 $(DESTDIR)$(MANDIR)/man3/rsverbs_gid_index.3
	install -m 0644 docs/man/rsverbs_mcast_join.3 $(DESTDIR)$(MANDIR)/man3/rsverbs_mcast_join.3

# The debug info of the installed library, where gdb finds it by the
# .gnu_debuglink name (the .debug directory next to the library).
install-debug: $(STRIPPED)
	install -d $(DESTDIR)$(DEBUGDIR)
	install -m 0644 $(STRIPPED).debug $(DESTDIR)$(DEBUGDIR)/$(REALNAME).debug

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/rsverbs $(DESTDIR)$(MANDIR)/man1/rsverbs.1 \
	      $(DESTDIR)$(LIBDIR)/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	      $(DESTDIR)$(LIBDIR)/librsverbs.so $(DESTDIR)$(INCLUDEDIR)/rsverbs.h \
	      $(DESTDIR)$(PKGCONFIGDIR)/rsverbs.pc $(DESTDIR)$(MANDIR)/man7/rsverbs.7 \
	      $(DESTDIR)$(MANDIR)/man3/rsverbs_gid_index.3 $(DESTDIR)$(MANDIR)/man3/rsverbs_mcast_join.3 \
	      $(DESTDIR)$(DEBUGDIR)/$(REALNAME).debug
	-rmdir $(DESTDIR)$(DEBUGDIR) 2>/dev/null

# Debian packages from debian/ (librsverbs1, librsverbs-dev, and the -dbgsym
# package): tools/build-deb.sh runs dpkg-buildpackage -b (with
# DEB_BUILD_FLAGS) on a copy of the tracked files in $(DEB_SRC), so that
# everything it writes to ".." lands in $(DEB_DIR) (git-ignored). Then
# lintian, with LINTIAN_FLAGS. The package build links with GNU ld
# (debian/rules: make LINKER=gnu). LINTIAN= skips lintian (ctest/deb.sh's
# root has none; the host runs it). make deb ARCH=arm64 (ppc64el, s390x)
# cross-builds that architecture's packages (dpkg-buildpackage -aarm64)
# into build-arm64/deb (docs/building.md).
DEB_DIR     ?= $(BUILD)/deb
LINTIAN     ?= lintian
DEB_SRC     := $(DEB_DIR)/rsverbs-$(VERSION)
deb: deps-deb
	tools/build-deb.sh $(DEB_DIR) $(DEB_SRC) $(ARCH_DEB) $(DEB_BUILD_FLAGS)
	$(if $(LINTIAN),$(LINTIAN) $(LINTIAN_FLAGS) $(DEB_DIR)/*.changes)

# dpkg-dev, debhelper and $(LINTIAN), when one is missing; for another
# architecture, its cross toolchain too.
deps-deb:
	@tools/deps.sh --deb $(LINTIAN)
	@$(if $(CARGO_ARCH),tools/deps.sh --cross $(ARCH_DEB),true)

# The checks of the packaging and the toolchain (each also in CI's make check,
# but for check-freshroot's make ARCH=... from nothing in the fresh root:
# RSVERBS_FRESHROOT_ARCHES, default arm64 here and none in make check, whose
# host lane it would make twice as long; .ci/run builds one architecture a
# commit there, in rotation).
check-freshroot:
	ctest/freshroot.sh
check-deb:
	ctest/deb.sh
check-install:
	ctest/install.sh

# The packages of the other architectures (ctest/deb_arch.sh, docs/building.md):
# make deb ARCH=arm64, ppc64el and s390x with lintian, each then installed and
# used in that architecture's cached userland under qemu-user (no guest
# boots). Not in make check (about 3 minutes); .ci/run runs it.
# RSVERBS_DEB_ARCHES picks some; the total is the last line.
check-deb-arch:
	rm -f ctest/out/deb-arch/*.results
	ctest/deb_arch.sh; st=$$?; ctest/summary.sh ctest/out/deb-arch; exit $$st

clean:
	$(CARGO) clean
	rm -rf $(sort $(BUILD) $(CURDIR)/build $(wildcard $(CURDIR)/build-*)) ctest/out

# make help: every target, in two groups.
help:
	@printf '%s\n' \
	  'Build and install (any Linux with cargo >= 1.95, a C compiler and libibverbs headers):' \
	  '  make                  build/librsverbs.so.1, build/rsverbs, the examples, an uninstalled rsverbs.pc' \
	  '  make lib | tool | example   one of them' \
	  '  make install          PREFIX (/usr/local), BINDIR, LIBDIR, INCLUDEDIR, PKGCONFIGDIR, MANDIR, DESTDIR' \
	  '  make install-debug    the library'"'"'s debug info where gdb finds it;  make uninstall' \
	  '  make deb              Debian packages into build/deb/ (librsverbs1, librsverbs-dev, rsverbs-tools)' \
	  '  make ARCH=arm64|ppc64el|s390x [deb]   another architecture, into build-ARCH/' \
	  '  make header           regenerate include/rsverbs.h (cbindgen)' \
	  '  make size             what takes the space in the library' \
	  '  make clean' \
	  '' \
	  'Tests and measurements (Debian 12, as root; each installs what it needs; docs/testing.md):' \
	  '  make demo             boot the Soft-RoCE test bed and show rsverbs at work (about 3 minutes cold)' \
	  '  make demo-ib          the same story on InfiniBand: sib, its switch, opensm (after make demo)' \
	  '  make check            every host check and the real-kernel suites; last line "N passed, N failed"' \
	  '  make check-more       the real-kernel suites make check leaves out (RSVERBS_MORE=a|b);  make check-all: both' \
	  '  make check-unit | check-crate | check-abi | check-sanitize | check-install | check-deb   one host step' \
	  '  make check-vm         the real-kernel suites alone (RSVERBS_SUITES="conform e2e" picks some);  make compat' \
	  '  make check-packaging  a debootstrapped Debian 12 root builds and checks it; the .debs built and used there' \
	  '  make check-freshroot  the same root alone, and make ARCH= from nothing there (RSVERBS_FRESHROOT_ARCHES)' \
	  '  make check-deb-arch   the other architectures'"'"' packages, installed and used under qemu-user' \
	  '  make check-traced     every real-kernel suite again with RSVERBS_TRACE=hints' \
	  '  make faults           every syscall and allocation failed on purpose, cancellation, small stacks' \
	  '  make matrix           every Debian userland on every Debian kernel;  make matrix-arch: arm64, ppc64el, s390x' \
	  '  make fanout           multicast across hosts: 1 sender to N guests' \
	  '  make check-sib        the software InfiniBand HCA (testbed/sib/) in a boot of its own' \
	  '  make fuzz             a long fuzz run of the sysfs parsers (RSVERBS_FUZZ_SECS)' \
	  '  make bench            speed and size against rdma-core and the bare syscall; writes BENCHMARKS.md' \
	  '  make deps             the packages the tests need, alone'
