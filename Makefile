# rsverbs: build, install, and every test.
#   make            build build/librsverbs.so.1 and an uninstalled rsverbs.pc
#   make check      every test (installs what it needs on Debian 12, as root)
#   make demo       boot the Soft-RoCE test bed and show C programs on rsverbs
#   make install    PREFIX, LIBDIR, INCLUDEDIR, PKGCONFIGDIR and DESTDIR honoured

VERSION     := 0.1.0
SOVERSION   := 1
PREFIX      ?= /usr/local
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR     ?=

CARGO       ?= cargo
CC          ?= cc
CXX         ?= c++
CBINDGEN_VERSION := 0.29.2
BUILD       := $(CURDIR)/build
SONAME      := librsverbs.so.$(SOVERSION)
REALNAME    := librsverbs.so.$(SOVERSION).0.0
LIB         := $(BUILD)/$(SONAME)
export RSVERBS_BUILD := $(BUILD)

.PHONY: all lib header deps deps-cbindgen check check-unit check-abi check-vm check-sanitize fuzz demo compat bench \
        install uninstall clean

all: lib $(BUILD)/pkgconfig/rsverbs.pc

lib: $(LIB)

$(LIB): $(shell find src -type f) Cargo.toml Cargo.lock build.rs
	$(CARGO) build --release --locked
	mkdir -p $(BUILD)
	cp target/release/librsverbs.so $(LIB)
	ln -sf $(SONAME) $(BUILD)/librsverbs.so

# The uninstalled .pc, for the tests: points at build/ and include/.
$(BUILD)/pkgconfig/rsverbs.pc: pkgconfig/rsverbs.pc.in Makefile
	mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(CURDIR)|' -e 's|@LIBDIR@|$(BUILD)|' \
	    -e 's|@INCLUDEDIR@|$(CURDIR)/include|' -e 's|@VERSION@|$(VERSION)|' $< > $@

header: deps-cbindgen
	cbindgen --quiet --config cbindgen.toml --crate rsverbs --output include/rsverbs.h

deps:
	@ctest/deps.sh

deps-cbindgen:
	@command -v cbindgen >/dev/null && cbindgen --version | grep -q ' $(CBINDGEN_VERSION)$$' \
	  || $(CARGO) install --quiet --locked cbindgen --version $(CBINDGEN_VERSION)

# Every suite; the last line is the "N passed, N failed" total.
check: deps deps-cbindgen all
	ctest/check.sh

check-unit:
	ctest/unit.sh

check-abi: deps-cbindgen all
	ctest/header_fresh.sh
	ctest/abi.sh

# The real-kernel suites (Soft-RoCE in qemu); RSVERBS_SUITES="conform e2e" picks some.
check-vm: deps all
	ctest/vm_suite.sh

# Host sanitizer and lint checks (valgrind on the Rust tests, clippy, SAFETY comments, ASan builds).
check-sanitize: all
	ctest/sanitize.sh

# Long fuzz run of the sysfs parsers (RSVERBS_FUZZ_SECS, default 600); make check replays the corpus.
fuzz:
	RSVERBS_FUZZ_SECS=$${RSVERBS_FUZZ_SECS:-600} $(CARGO) test --release --locked --test fuzz_parsers -- --ignored --nocapture fuzz_long

# Real clients (mckey, perftest, our relinked example) with and without rsverbs.
compat: deps all
	RSVERBS_SUITES=compat ctest/vm_suite.sh

# The README's first command: installs, builds, boots, shows C programs on rsverbs.
demo:
	demo/run.sh

# Benchmarks against rdma-core and the bare-syscall floor, in the test bed; writes BENCHMARKS.md.
bench: deps all
	bench/run.sh

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 0755 $(LIB) $(DESTDIR)$(LIBDIR)/$(REALNAME)
	ln -sf $(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/librsverbs.so
	install -m 0644 include/rsverbs.h $(DESTDIR)$(INCLUDEDIR)/rsverbs.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' \
	    pkgconfig/rsverbs.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/rsverbs.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/rsverbs.pc

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	      $(DESTDIR)$(LIBDIR)/librsverbs.so $(DESTDIR)$(INCLUDEDIR)/rsverbs.h \
	      $(DESTDIR)$(PKGCONFIGDIR)/rsverbs.pc

clean:
	$(CARGO) clean
	rm -rf $(BUILD) ctest/out
