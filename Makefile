# boxkite — build, test, demo, bench.
# Pipeline for BPF as in libbpf-bootstrap:
#   bpf/%.bpf.c -> build/bpf/%.tmp.bpf.o -> (bpftool gen object) %.bpf.o -> %.skel.h
# Generated files live only under build/.

BUILD     ?= build
V         ?= 0
Q         := $(if $(filter 1,$(V)),,@)
CC        ?= gcc
CLANG     ?= clang
BPFTOOL   ?= $(shell command -v bpftool 2>/dev/null || echo /usr/sbin/bpftool)
ARCH      := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
PREFIX    ?= /usr/local
# The version, from one place: the VERSION file, plus the commit when built
# from git (0.1.0+g88f306a, .dirty with local changes); --version prints it.
GITREV    := $(shell git describe --always --exclude='*' --dirty=.dirty 2>/dev/null)
VERSION   := $(shell cat VERSION 2>/dev/null || echo 0.0.0)$(if $(GITREV),+g$(GITREV))

PKGS      := libbpf libmnl libmicrohttpd libcjson openssl libpcre2-8
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# boxkitectl loads OpenSSL when it first needs it (agent/ctl/ossl.c)
CTL_LIBS   = $(shell pkg-config --libs $(filter-out openssl,$(PKGS)) 2>/dev/null) -ldl -lpthread
# The agent and the shim link Debian's libmicrohttpd.a with its GnuTLS
# backend left out (lib/mhd/notls.c says why): no GnuTLS, p11-kit, nettle,
# gmp... in either process
MHD_NOTLS  = $(BUILD)/obj/lib/mhd/notls.o $(shell pkg-config --variable=libdir libmicrohttpd 2>/dev/null)/libmicrohttpd.a \
             $(shell pkg-config --libs $(filter-out libmicrohttpd,$(PKGS)) 2>/dev/null)

WARN      := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-unused-parameter -Wno-format-truncation -Wno-format-nonliteral
CFLAGS    ?= -O2 -g
CFLAGS    += -std=gnu11 $(WARN) -D_GNU_SOURCE -fstack-protector-strong \
             -fno-strict-aliasing -DBK_VERSION='"$(VERSION)"' \
             -I. -I$(BUILD) $(PKG_CFLAGS)
LDFLAGS   += -Wl,-z,relro,-z,now

ifeq ($(SANITIZE),1)
  BUILD   := build/san
  CFLAGS  += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
else
  CFLAGS  += -D_FORTIFY_SOURCE=2
endif

# lib/ is shared by the three binaries; agent/<room>/ are the agent's rooms
# (agent/README.md); boxkitectl is agent/ctl/ (with its local/ runtime).
ROOMS      := api session isolate caller files observe parse
LIB_SRCS   := $(wildcard lib/*.c)
AGENT_SRCS := $(foreach r,$(ROOMS),$(wildcard agent/$(r)/*.c))
CTL_SRCS   := $(wildcard agent/ctl/*.c agent/ctl/local/*.c)
SHIM_SRCS  := $(wildcard sidecar-shim/*.c)
UNIT_SRCS  := $(wildcard tests/unit/test-*.c)
TOOL_SRCS  := $(wildcard tests/tools/*.c)

LIB_OBJS   := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
AGENT_OBJS := $(AGENT_SRCS:%.c=$(BUILD)/obj/%.o)
CTL_OBJS   := $(CTL_SRCS:%.c=$(BUILD)/obj/%.o)
SHIM_OBJS  := $(SHIM_SRCS:%.c=$(BUILD)/obj/%.o)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
TOOL_BINS  := $(TOOL_SRCS:tests/tools/%.c=$(BUILD)/tests/%)

BINS := $(BUILD)/boxkite-agent $(BUILD)/boxkite-shim $(BUILD)/boxkitectl

.DELETE_ON_ERROR:
.SECONDARY:
.PHONY: all deps check check-kernels unit unit-bins e2e manifests demo demo-cri bench bench-ab bench-ab-shim load fuzz man ops install clean

all: $(BINS) $(TOOL_BINS)

deps:
	$(Q)scripts/install-deps.sh

# ---- BPF -------------------------------------------------------------------
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
              -I/usr/include/$(MULTIARCH) -Ibpf

BPF_SKEL := $(BUILD)/boxkite.skel.h

$(BUILD)/bpf/boxkite.tmp.bpf.o: bpf/egress.bpf.c bpf/egress.h
	@mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/bpf/boxkite.bpf.o: $(BUILD)/bpf/boxkite.tmp.bpf.o
	$(Q)$(BPFTOOL) gen object $@ $<

$(BPF_SKEL): $(BUILD)/bpf/boxkite.bpf.o
	$(Q)$(BPFTOOL) gen skeleton $< name boxkite > $@

# ---- C ---------------------------------------------------------------------
$(AGENT_OBJS) $(BUILD)/obj/agent/main.o: $(BPF_SKEL)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# made afresh each time: `ar r` on an existing archive matches members by
# base name, and two rooms may one day hold files of the same name
$(BUILD)/libbkcommon.a: $(LIB_OBJS)
	$(Q)rm -f $@ && $(AR) rcs $@ $^
$(BUILD)/libbkagent.a: $(AGENT_OBJS)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/boxkite-agent: $(BUILD)/obj/agent/main.o $(BUILD)/libbkagent.a $(BUILD)/libbkcommon.a $(BUILD)/obj/lib/mhd/notls.o
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter-out %/notls.o,$^) $(MHD_NOTLS) -lpthread
$(BUILD)/boxkitectl: $(CTL_OBJS) $(BUILD)/libbkcommon.a
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(CTL_LIBS)
$(BUILD)/boxkite-shim: $(SHIM_OBJS) $(BUILD)/libbkcommon.a $(BUILD)/obj/lib/mhd/notls.o
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter-out %/notls.o,$^) $(MHD_NOTLS) -lpthread

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libbkagent.a $(BUILD)/libbkcommon.a
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(PKG_LIBS) -lcmocka -lpthread
$(BUILD)/tests/%: tests/tools/%.c $(BUILD)/libbkcommon.a
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(PKG_LIBS)
# (its floor drops privileges and installs the seccomp filter as the exec child does)
BENCH_AGENT_OBJS := $(addprefix $(BUILD)/obj/agent/,isolate/seccomp.o isolate/privs.o parse/procstatus.o)
$(BUILD)/tests/bk-bench: tests/tools/bk-bench.c $(BENCH_AGENT_OBJS) $(BUILD)/libbkcommon.a
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(PKG_LIBS)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# The objects that print BK_VERSION are rebuilt when it changes (a commit,
# VERSION): a stamp rewritten only when its text differs.
VERSION_STAMP := $(BUILD)/version.stamp
$(shell mkdir -p $(BUILD) && (echo '$(VERSION)' | cmp -s - $(VERSION_STAMP) || echo '$(VERSION)' > $(VERSION_STAMP)))
VERSION_USERS := $(shell grep -l BK_VERSION $(LIB_SRCS) $(AGENT_SRCS) agent/main.c $(CTL_SRCS) $(SHIM_SRCS))
$(VERSION_USERS:%.c=$(BUILD)/obj/%.o): $(VERSION_STAMP)

# ---- tests -----------------------------------------------------------------
unit: $(UNIT_BINS)
	$(Q)tests/run-unit.sh $(UNIT_BINS)

e2e: all
	$(Q)BK_BIN=$(abspath $(BUILD)) tests/run-e2e.sh

manifests:
	$(Q)tests/manifests/run.sh

unit-bins: $(UNIT_BINS)

# The README's test command: dependencies, both builds, every test lane.
check: deps
	$(Q)tests/check.sh

# Every kernel of the support matrix (6.1, 6.12, 7.x) in a VM with pure
# cgroup v2 (tests/vm/run-lane.sh; `make check` runs the 6.1 lane only).
# KERNELS="6.1 7" narrows it. Run it under the e2e lock.
check-kernels: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)tests/vm/check-kernels.sh

fuzz: deps
	$(Q)FUZZ_SECONDS=$(or $(FUZZ_SECONDS),60) tests/fuzz/run.sh

# the node's default paths and pins: one at a time with the tests that use them
demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)flock /tmp/bk-e2e.lock env BK_BIN=$(abspath build) scripts/demo.sh

# the same story on containerd + CRI + CNI (tests/cri/, README "On a real runtime")
demo-cri: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)flock /tmp/bk-e2e.lock env BK_BIN=$(abspath build) BK_CRI_MODE=demo tests/cri/run.sh

load: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BK_BIN=$(abspath build) scripts/load.sh

bench: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BK_BIN=$(abspath build) scripts/bench.sh

# two agent binaries' exec latency, in alternating rounds: make bench-ab A=OLD B=NEW
bench-ab: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BK_BIN=$(abspath build) scripts/bench-ab.sh $(A) $(B)

# two shim binaries' overhead, in alternating rounds: make bench-ab-shim A=OLD B=NEW
bench-ab-shim: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BK_BIN=$(abspath build) scripts/bench-ab-shim.sh $(A) $(B)

# ---- operators: man pages, completion, unit --------------------------------
# docs/man/*.scd (scdoc markup) -> build/man/*.8
MAN_SRCS := $(wildcard docs/man/*.scd)
MANS     := $(MAN_SRCS:docs/man/%.scd=build/man/%)
SCDOC    ?= scdoc
build/man/%: docs/man/%.scd
	@mkdir -p $(@D)
	$(Q)$(SCDOC) < $< > $@
man: $(MANS)

# the lane of make check for all of this (tests/ops/)
ops: all man
	$(Q)tests/ops/run.sh

# Conventional layout under DESTDIR/PREFIX; the unit's ExecStart follows
# PREFIX (the file says /usr/local/bin).
BINDIR      ?= $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
UNITDIR     ?= $(PREFIX)/lib/systemd/system
install: $(BINS) $(MANS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(UNITDIR)
	install -m 0755 $(BINS) $(DESTDIR)$(BINDIR)/
	install -m 0644 $(MANS) $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 scripts/completion/boxkitectl.bash $(DESTDIR)$(BASHCOMPDIR)/boxkitectl
	sed 's|/usr/local/bin/|$(BINDIR)/|g' deploy/systemd/boxkite-agent.service > $(DESTDIR)$(UNITDIR)/boxkite-agent.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/boxkite-agent.service

clean:
	rm -rf build
