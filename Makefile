# heaptap: build, demo and tests. `make V=1` shows the commands, `make WERROR=1` fails on warnings.
# `make SANITIZE=1` builds heaptap with AddressSanitizer and UndefinedBehaviorSanitizer into
# build-san/ (never mixed with build/); `make fuzz FUZZ_TIME=600 [FUZZ=elfsyms]` runs the
# libFuzzer targets of tests/fuzz/ for that long each.
OUTPUT := build
CLANG ?= clang
BPFTOOL ?= bpftool
CC ?= gcc
PROTOC_C ?= protoc-c
SANITIZE ?= 0
ifeq ($(SANITIZE),1)
OUTPUT := build-san
# clang's runtime (ASan with UBSan in it) writes its reports where log_path says, which
# the tests rely on; gcc's UBSan writes to stderr whatever it is told. Every report ends
# the program: a sanitizer finding is a failure, never a warning.
CC := $(CLANG)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
# x86-64 only: the BPF side relies on its calling convention (the return address at the
# stack pointer on entry, sp 8 higher after the return).
ARCH := $(shell uname -m | sed -e 's/x86_64/x86/')
ifneq ($(ARCH),x86)
$(error heaptap supports x86_64 only, not $(ARCH))
endif
VMLINUX := vmlinux/$(ARCH)/vmlinux.h

LIBBPF_MIN := 1.1

# heaptap's version lives in one place, debian/changelog's first line (doc/releasing.md). The
# commit it is built from is git's, or in a tree without .git the one `git archive` wrote into
# VERSION (.gitattributes), else unknown. Both reach the program through
# $(OUTPUT)/heaptap_version.h, rewritten only when they change.
# "heaptap (0.2.0) UNRELEASED; ..." -> 0.2.0 (no parentheses in the script: make counts them)
HEAPTAP_VERSION := $(shell sed -n '1{s/^heaptap .//;s/[^-0-9A-Za-z.+~:].*//;p;}' debian/changelog \
	2>/dev/null)
ifeq ($(HEAPTAP_VERSION),)
$(error heaptap: no version found in debian/changelog's first line)
endif
HEAPTAP_COMMIT := $(shell [ -e .git ] && git describe --always --dirty 2>/dev/null)
ifeq ($(HEAPTAP_COMMIT),)
HEAPTAP_COMMIT := $(shell sed -n '1{/^[0-9A-Za-z][-.0-9A-Za-z]*$$/p}' VERSION 2>/dev/null)
endif
HEAPTAP_COMMIT := $(or $(HEAPTAP_COMMIT),unknown)
PKGS := libbpf libdw libelf json-c libprotobuf-c zlib libmicrohttpd capstone
LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lstdc++ -lpthread -lm
WARNINGS := -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
ifeq ($(WERROR),1)
WARNINGS += -Werror
endif
CFLAGS ?= -g -O2
USER_CFLAGS := $(CPPFLAGS) $(CFLAGS) $(SAN_FLAGS) $(WARNINGS) -std=gnu11 -D_GNU_SOURCE -I$(OUTPUT) -I$(OUTPUT)/proto -Ibpf -Iuser -MMD -MP
BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -I$(dir $(VMLINUX)) -Ibpf \
	-Wall -Wno-unused-function -MMD -MP
ifeq ($(WERROR),1)
BPF_CFLAGS += -Werror
endif

# The user side's layers are folders of user/ (doc/ARCHITECTURE.md), main at its top; each
# object is built under $(OUTPUT)/user/, in its folder.
USER_SRCS := $(wildcard user/*.c user/*/*.c)
USER_OBJS := $(patsubst user/%.c,$(OUTPUT)/user/%.o,$(USER_SRCS)) $(OUTPUT)/proto/profile.pb-c.o \
	$(OUTPUT)/user/report/report_page.o
TARGETS := $(patsubst tests/targets/%.c,$(OUTPUT)/tests/%,$(wildcard tests/targets/*.c)) \
	$(patsubst tests/targets/%.cc,$(OUTPUT)/tests/%,$(wildcard tests/targets/*.cc)) \
	$(OUTPUT)/tests/libleaky.so

# A plain build prints nothing but errors and warnings; V=1 shows each command, under a line
# naming what it makes.
ifeq ($(V),1)
Q :=
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
else
Q := @
msg :=
endif

.DELETE_ON_ERROR:
.SECONDARY: $(OUTPUT)/bpf/heaptap.bpf.o $(OUTPUT)/bpf/hostwatch.bpf.o $(OUTPUT)/bench/probecost.bpf.o
.PHONY: all check-deps clean demo test unit vmlinux deps fuzz programs install uninstall FORCE

BENCH_TARGETS := $(patsubst bench/targets/%.c,$(OUTPUT)/bench/%,$(wildcard bench/targets/*.c)) \
	$(OUTPUT)/bench/probecost

# Unit tests of logic without the kernel (tests/unit/NAME.c, tests/unit/unit.h's checks),
# run by `make unit` without root and without BPF, in seconds. Each is linked with heaptap.a:
# the linker takes from it the modules the test calls, and what those call.
UNITS := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/*.c))
UNIT_BINS := $(patsubst %,$(OUTPUT)/unit/%,$(UNITS))

# libFuzzer targets, one per parser of the target's bytes, each with the modules it fuzzes
# (and those it calls on the bytes) instrumented; whatever else they refer to comes
# uninstrumented from heaptap's own objects (heaptap.a: all but main).
FUZZERS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_USES_elfsyms := target/elfsyms
FUZZ_USES_cfi := target/unwind target/cfi base/idmap
FUZZ_USES_unwind := target/unwind target/stacks base/idmap
FUZZ_USES_maps := target/proc target/vmas
FUZZ_USES_heap := target/glibc_heap target/memory target/pagemap
FUZZ_USES_dump := account/dump base/escape base/log
FUZZ_USES_options := cli/options cli/cmdline cli/values cli/setters cli/rules base/units \
	base/settings base/alloc_spec target/families target/loader base/listen base/log base/escape
FUZZ_USES_python := target/python
FUZZ_USES_procfs := host/procfs
FUZZ_BINS := $(patsubst %,$(OUTPUT)/fuzz/fuzz_%,$(FUZZERS))
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer-no-link $(FUZZ_SAN) $(WARNINGS) -std=gnu11 \
	-D_GNU_SOURCE -Ibpf -Iuser -MMD -MP
FUZZ_CORPUS := $(OUTPUT)/fuzz/corpus/.made

ifeq ($(SANITIZE),1)
all: check-deps $(OUTPUT)/heaptap
else
all: check-deps $(OUTPUT)/heaptap $(UNIT_BINS) $(TARGETS) $(BENCH_TARGETS) $(FUZZ_BINS) \
	$(FUZZ_CORPUS)
endif

# Debian 12 ships libbpf 1.1: fail early and clearly on anything older.
check-deps:
	$(Q)pkg-config --exists $(PKGS) || { \
		echo "heaptap: development files of $(PKGS): some are missing; run: sudo .ci/run deps" >&2; exit 1; }
	$(Q)pkg-config --atleast-version=$(LIBBPF_MIN) libbpf || { \
		echo "heaptap: needs libbpf >= $(LIBBPF_MIN), found $$(pkg-config --modversion libbpf)" >&2; exit 1; }
	$(Q)command -v $(BPFTOOL) >/dev/null || { echo "heaptap: bpftool is missing; run: sudo .ci/run deps" >&2; exit 1; }
	$(Q)command -v $(CLANG) >/dev/null || { echo "heaptap: clang is missing; run: sudo .ci/run deps" >&2; exit 1; }
	$(Q)command -v $(PROTOC_C) >/dev/null || { echo "heaptap: protoc-c is missing; run: sudo .ci/run deps" >&2; exit 1; }

$(OUTPUT) $(OUTPUT)/bpf $(OUTPUT)/tests $(OUTPUT)/bench $(OUTPUT)/proto $(OUTPUT)/unit:
	$(Q)mkdir -p $@

$(OUTPUT)/bpf/%.bpf.o: bpf/%.bpf.c $(VMLINUX) | $(OUTPUT)/bpf
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUTPUT)/%.skel.h: $(OUTPUT)/bpf/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

# Objects that include the skeleton depend on it explicitly, found by their includes (a
# list kept by hand missed one, and a clean parallel build could compile it too early).
SKEL_USERS := $(patsubst user/%.c,$(OUTPUT)/user/%.o,$(shell grep -l '"heaptap.skel.h"' $(USER_SRCS)))
$(SKEL_USERS): $(OUTPUT)/heaptap.skel.h
HOST_SKEL_USERS := $(patsubst user/%.c,$(OUTPUT)/user/%.o,$(shell grep -l '"hostwatch.skel.h"' $(USER_SRCS)))
$(HOST_SKEL_USERS): $(OUTPUT)/hostwatch.skel.h

# pprof's profile.proto, encoded by protobuf-c's generated code.
$(OUTPUT)/proto/profile.pb-c.c $(OUTPUT)/proto/profile.pb-c.h &: user/report/proto/profile.proto | $(OUTPUT)/proto
	$(call msg,PROTOC,$@)
	$(Q)$(PROTOC_C) --c_out=$(OUTPUT)/proto --proto_path=user/report/proto $<

$(OUTPUT)/proto/profile.pb-c.o: $(OUTPUT)/proto/profile.pb-c.c
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(SAN_FLAGS) -I$(OUTPUT)/proto -c $< -o $@

PROTO_USERS := $(patsubst user/%.c,$(OUTPUT)/user/%.o,$(shell grep -l '"profile.pb-c.h"' $(USER_SRCS)))
$(PROTO_USERS): $(OUTPUT)/proto/profile.pb-c.h

# The HTML report's page, built into the program.
$(OUTPUT)/user/report/report_page.o: user/report/report_page.S user/report/report.html
	$(call msg,AS,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -c -DPAGE='"user/report/report.html"' $< -o $@

$(OUTPUT)/user/%.o: user/%.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(USER_CFLAGS) -c $< -o $@

$(OUTPUT)/heaptap_version.h: FORCE | $(OUTPUT)
	$(Q)printf '#define HEAPTAP_VERSION "%s"\n#define HEAPTAP_COMMIT "%s"\n' \
		'$(HEAPTAP_VERSION)' '$(HEAPTAP_COMMIT)' > $@.new
	$(Q)if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

$(OUTPUT)/user/base/build.o: $(OUTPUT)/heaptap_version.h

$(OUTPUT)/heaptap: $(USER_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $(SAN_FLAGS) $^ $(LIBS) -o $@

# heaptap's objects but main, for the unit tests and the fuzzers to link with.
$(OUTPUT)/heaptap.a: $(filter-out $(OUTPUT)/user/heaptap.o,$(USER_OBJS))
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# Test targets: frame pointers on, so issue-2 stacks are whole; each file may name extra
# flags on a line "// build: ...".
TARGET_FLAGS = -g -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls -Wall
# Targets include one another (sizes_static.c includes sizes.c): any change rebuilds them all.
TARGET_DEPS := $(wildcard tests/targets/*)
$(OUTPUT)/tests/%: tests/targets/%.c $(TARGET_DEPS) | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(TARGET_FLAGS) $< -o $@ $(shell sed -n 's|^// build: ||p' $<)

$(OUTPUT)/tests/%: tests/targets/%.cc $(TARGET_DEPS) | $(OUTPUT)/tests
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(TARGET_FLAGS) -std=c++17 $< -o $@ $(shell sed -n 's|^// build: ||p' $<)

# A shared library built as distributions build them (no frame pointers), and a PIE
# executable that uses it.
$(OUTPUT)/tests/libleaky.so: tests/targets/lib/leaky.c | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(TARGET_FLAGS) -O2 -fomit-frame-pointer -shared -fPIC $< -o $@

$(OUTPUT)/tests/pielib: tests/targets/pielib.c $(OUTPUT)/tests/libleaky.so $(TARGET_DEPS)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TARGET_FLAGS) -fPIE -pie $< -o $@ -L$(OUTPUT)/tests -l:libleaky.so \
		-Wl,-rpath,'$$ORIGIN'

# Unit tests: with frame pointers, which tests/unit/cfi.c reads its own CFI for. Run one by
# one, each as nobody when make runs as root (tests/unit/run.sh); with SANITIZE=1, built and
# run with the sanitizers, from build-san/.
$(OUTPUT)/unit/%.o: tests/unit/%.c | $(OUTPUT)/unit
	$(call msg,CC,$@)
	$(Q)$(CC) $(USER_CFLAGS) -fno-omit-frame-pointer -c $< -o $@

$(UNIT_BINS): $(OUTPUT)/unit/%: $(OUTPUT)/unit/%.o $(OUTPUT)/heaptap.a
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $(SAN_FLAGS) $^ $(LIBS) -o $@

# The layout of user/ checked first (tests/layout.sh: the folders' graph, private headers,
# no cycles, sizes), then the unit tests.
unit: $(UNIT_BINS)
	$(Q)tests/layout.sh
	$(Q)tests/unit/run.sh $(UNIT_BINS)

# Stripped, with the debug information in a separate file: found through .gnu_debuglink
# next to the program, or (stripped_buildid, installed by the test) by build ID.
$(OUTPUT)/tests/stripped $(OUTPUT)/tests/stripped_buildid: $(OUTPUT)/tests/%: \
		tests/targets/%.c $(TARGET_DEPS) | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(TARGET_FLAGS) $< -o $@
	$(Q)objcopy --only-keep-debug $@ $@.debug
	$(Q)strip --strip-all $@
	$(Q)if [ $* = stripped ]; then objcopy --add-gnu-debuglink=$@.debug $@; fi

# bench/probecost: empty BPF programs, what a probe costs with nothing in it.
$(OUTPUT)/bench/%.bpf.o: bench/%.bpf.c $(VMLINUX) | $(OUTPUT)/bench
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUTPUT)/bench/%.skel.h: $(OUTPUT)/bench/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

$(OUTPUT)/bench/probecost: bench/probecost.c $(OUTPUT)/bench/probecost.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(USER_CFLAGS) -I$(OUTPUT)/bench $< -o $@ $(LIBS)

# Benchmark targets: optimized without frame pointers, as distributions build.
$(OUTPUT)/bench/%: bench/targets/%.c tests/targets/proto.h | $(OUTPUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) -g -O2 -fomit-frame-pointer -fno-optimize-sibling-calls -Wall $< -o $@

# The fuzzers: their own objects of the user side's modules, built by clang with the
# sanitizers and libFuzzer's coverage, never mixed with heaptap's.
$(OUTPUT)/fuzz:
	$(Q)mkdir -p $@

$(OUTPUT)/fuzz/user/%.o: user/%.c
	$(call msg,CC-FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -c $< -o $@

$(OUTPUT)/fuzz/%.o: tests/fuzz/%.c | $(OUTPUT)/fuzz
	$(call msg,CC-FUZZ,$@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -c $< -o $@

define fuzzer_rule
$(OUTPUT)/fuzz/fuzz_$(1): $(OUTPUT)/fuzz/fuzz_$(1).o $(patsubst %,$(OUTPUT)/fuzz/user/%.o,$(FUZZ_USES_$(1))) \
		$(OUTPUT)/heaptap.a
	$$(call msg,LINK,$$@)
	$$(Q)$$(CLANG) -fsanitize=fuzzer $$(FUZZ_SAN) $$^ $$(LIBS) -o $$@
endef
$(foreach f,$(FUZZERS),$(eval $(call fuzzer_rule,$(f))))

# Seed inputs made from real files at build time (system libraries, the test targets and
# their debug files, /proc/self/maps and smaps, the command lines of the README and doc/): too large, and
# too machine-specific, to commit. Inputs that once crashed are in tests/fuzz/regressions/.
$(FUZZ_CORPUS): tests/fuzz/corpus.py $(TARGETS) README.md $(wildcard doc/*.md) | $(OUTPUT)/fuzz
	$(call msg,CORPUS,$(dir $@))
	$(Q)python3 tests/fuzz/corpus.py $(OUTPUT) $(dir $@)
	$(Q)touch $@

fuzz: all
	python3 tests/fuzz/run_fuzzers.py --keep --time $(or $(FUZZ_TIME),600) $(FUZZ)

vmlinux:
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $(VMLINUX)

deps:
	.ci/run deps

# The README's two commands, for those who have make: the demo (PID=... to attach to a
# process of yours) and the tests (TESTS=name or a tier, such as core, to select).
demo:
	tests/demo.sh $(PID)

test:
	tests/test.sh $(TESTS)

clean:
	rm -rf build build-san

# What make install puts where: `make install [PREFIX=/usr/local] [DESTDIR=...]`, and
# `make uninstall` with the same takes out exactly these. The systemd unit of the host agent
# is installed when dist/ has it, where systemd looks: /lib/systemd/system for PREFIX=/usr
# (Debian 12's packages), else under PREFIX.
PREFIX ?= /usr/local
BINDIR := $(PREFIX)/bin
MAN8DIR := $(PREFIX)/share/man/man8
DOCDIR := $(PREFIX)/share/doc/heaptap
BASHCOMPDIR := $(PREFIX)/share/bash-completion/completions
ifeq ($(PREFIX),/usr)
# Debian's zsh reads packages' completion from vendor-completions, the administrator's from
# site-functions.
ZSHCOMPDIR := /usr/share/zsh/vendor-completions
UNITDIR := /lib/systemd/system
else
ZSHCOMPDIR := $(PREFIX)/share/zsh/site-functions
UNITDIR := $(PREFIX)/lib/systemd/system
endif
UNIT := $(wildcard dist/heaptap.service)
# The README's links to doc/ hold where they are installed.
DOCS := README.md CHANGELOG.md $(wildcard doc/*.md)
COMPLETIONS := $(OUTPUT)/completion/heaptap.bash $(OUTPUT)/completion/_heaptap
INSTALLED := $(BINDIR)/heaptap $(MAN8DIR)/heaptap.8.gz $(BASHCOMPDIR)/heaptap \
	$(ZSHCOMPDIR)/_heaptap $(if $(UNIT),$(UNITDIR)/heaptap.service) $(addprefix $(DOCDIR)/,$(DOCS))

# What install needs, and nothing else (debian/rules builds this): the program, the shells'
# completion made by it from its options' table, the man page compressed as Debian has it.
programs: check-deps $(OUTPUT)/heaptap $(COMPLETIONS) $(OUTPUT)/heaptap.8.gz

$(OUTPUT)/completion/heaptap.bash: $(OUTPUT)/heaptap
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$< --completion bash > $@

$(OUTPUT)/completion/_heaptap: $(OUTPUT)/heaptap
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$< --completion zsh > $@

$(OUTPUT)/heaptap.8.gz: doc/heaptap.8 | $(OUTPUT)
	$(call msg,GZIP,$@)
	$(Q)gzip -9n < $< > $@

install: programs
	$(Q)install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MAN8DIR) $(DESTDIR)$(BASHCOMPDIR) \
		$(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(DOCDIR)/doc $(if $(UNIT),$(DESTDIR)$(UNITDIR))
	$(Q)install -m 0755 $(OUTPUT)/heaptap $(DESTDIR)$(BINDIR)/heaptap
	$(Q)install -m 0644 $(OUTPUT)/heaptap.8.gz $(DESTDIR)$(MAN8DIR)/heaptap.8.gz
	$(Q)install -m 0644 $(OUTPUT)/completion/heaptap.bash $(DESTDIR)$(BASHCOMPDIR)/heaptap
	$(Q)install -m 0644 $(OUTPUT)/completion/_heaptap $(DESTDIR)$(ZSHCOMPDIR)/_heaptap
	$(Q)$(if $(UNIT),sed 's|^ExecStart=/usr/bin/heaptap |ExecStart=$(BINDIR)/heaptap |' $(UNIT) \
		>$(OUTPUT)/heaptap.service && \
		install -m 0644 $(OUTPUT)/heaptap.service $(DESTDIR)$(UNITDIR)/heaptap.service)
	$(Q)for f in $(DOCS); do install -m 0644 $$f $(DESTDIR)$(DOCDIR)/$$f || exit 1; done

uninstall:
	$(Q)rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	$(Q)rmdir $(DESTDIR)$(DOCDIR)/doc $(DESTDIR)$(DOCDIR) 2>/dev/null || true

-include $(wildcard $(OUTPUT)/user/*.d $(OUTPUT)/user/*/*.d $(OUTPUT)/bpf/*.d $(OUTPUT)/fuzz/*.d \
	$(OUTPUT)/fuzz/user/*/*.d $(OUTPUT)/unit/*.d)
