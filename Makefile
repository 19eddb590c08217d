# roombox — build, test, run.  See README.md.
#
#   make          build build/roombox-fcgi and build/roombox-helper
#   make check    install missing Debian packages, then every test
#   make run      local stack: nginx on 127.0.0.1:$(PORT) -> fcgi -> helper
#   make bench    SPEC §7 figures
#   make install  DESTDIR-aware install (used by debian/rules)

VERSION  := $(shell sed -n '1s/.*(\(.*\)).*/\1/p' debian/changelog 2>/dev/null || echo 0.0.0)
CC       ?= cc
PKGS     := fcgi json-c libseccomp uuid
PREFIX   ?= /usr
SYSCONF  ?= /etc/roombox/roombox.conf
HELPER   ?= $(PREFIX)/lib/roombox/roombox-helper
KEEPER   ?= $(dir $(HELPER))roombox-keeper
PORT     ?= 8080

WARN     := -Wall -Wextra -Wformat=2 -Wshadow -Wno-unused-parameter -Wno-format-truncation
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) -D_GNU_SOURCE -fstack-protector-strong -fPIE \
            -Icommon -DROOMBOX_VERSION='"$(VERSION)"' \
            -DROOMBOX_CONF='"$(SYSCONF)"' -DROOMBOX_HELPER='"$(HELPER)"' -DROOMBOX_KEEPER='"$(KEEPER)"' \
            $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
CPPFLAGS += -D_FORTIFY_SOURCE=2
LDFLAGS  += -pie -Wl,-z,relro -Wl,-z,now

B := build
COMMON_SRC := $(wildcard common/*.c)
FCGI_SRC   := $(filter-out fcgi-app/main.c,$(wildcard fcgi-app/*.c))
HELPER_SRC := $(filter-out sandbox-helper/main.c,$(wildcard sandbox-helper/*.c))
obj = $(patsubst %.c,$(B)/%.o,$(1))

LIB_COMMON := $(B)/libcommon.a
LIB_FCGI   := $(B)/libfcgiapp.a
LIB_HELPER := $(B)/libhelper.a

FCGI_LIBS   := $(shell pkg-config --libs fcgi json-c uuid 2>/dev/null) -lpthread
HELPER_LIBS := $(shell pkg-config --libs json-c libseccomp 2>/dev/null)

UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRC))

.PHONY: all check unit integration security package-test run bench install clean deps
all: $(B)/roombox-fcgi $(B)/roombox-helper $(B)/roombox-keeper

$(B)/%.o: %.c $(wildcard common/*.h fcgi-app/*.h sandbox-helper/*.h sandbox-helper/keeper/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# the version is compiled in
$(B)/fcgi-app/health.o $(B)/sandbox-helper/main.o: $(wildcard debian/changelog)

$(LIB_COMMON): $(call obj,$(COMMON_SRC))
	@mkdir -p $(B); rm -f $@; ar rcs $@ $^
$(LIB_FCGI): $(call obj,$(FCGI_SRC))
	@mkdir -p $(B); rm -f $@; ar rcs $@ $^
$(LIB_HELPER): $(call obj,$(HELPER_SRC))
	@mkdir -p $(B); rm -f $@; ar rcs $@ $^

$(B)/roombox-fcgi: $(B)/fcgi-app/main.o $(LIB_FCGI) $(LIB_COMMON)
	$(CC) $(LDFLAGS) $^ $(FCGI_LIBS) -o $@
# Static: a setuid program runs once per operation, and a dynamic one spends
# most of its start-up in the loader (and must distrust its environment).
$(B)/roombox-helper: $(B)/sandbox-helper/main.o $(LIB_HELPER) $(LIB_COMMON)
	$(CC) -static-pie -Wl,-z,relro -Wl,-z,now $^ $(HELPER_LIBS) -o $@

# PID 1 of every room: static and libc-only, so an idle room costs a few pages.
# Built against musl: a few dozen KiB instead of glibc's 700, and no start-up
# work (glibc's static start-up asks the CPU for its features and caches with
# some forty cpuid instructions, each a trap to the hypervisor on a VM).
# musl-gcc's specs know no -static-pie, so the link names musl's start files
# itself; musl ships no kernel headers, $(B)/kinc points at the system's.
MUSL_CC     ?= musl-gcc
MULTIARCH   := $(shell $(CC) -print-multiarch 2>/dev/null)
MUSL_LIB    := /usr/lib/$(subst -gnu,-musl,$(MULTIARCH))
MUSL_CFLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE -O2 -g -fPIE -fstack-protector-strong \
               -isystem $(B)/kinc
musl_link = $(CC) -static-pie -nostdlib -Wl,-z,relro -Wl,-z,now \
	$(MUSL_LIB)/rcrt1.o $(MUSL_LIB)/crti.o $(shell $(CC) -print-file-name=crtbeginS.o) \
	$(1) -L$(MUSL_LIB) -lc $(shell $(CC) -print-libgcc-file-name) \
	$(shell $(CC) -print-file-name=crtendS.o) $(MUSL_LIB)/crtn.o

$(B)/kinc/.stamp:
	@mkdir -p $(B)/kinc
	ln -sfn /usr/include/linux $(B)/kinc/linux
	ln -sfn /usr/include/asm-generic $(B)/kinc/asm-generic
	ln -sfn /usr/include/$(MULTIARCH)/asm $(B)/kinc/asm
	@touch $@

$(B)/musl/%.o: %.c $(B)/kinc/.stamp $(wildcard common/*.h sandbox-helper/*.h sandbox-helper/keeper/*.h)
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(MUSL_CFLAGS) -c $< -o $@

$(B)/roombox-keeper: $(B)/musl/sandbox-helper/keeper/keeper.o
	$(call musl_link,$^) -s -o $@

$(B)/tests/%: tests/unit/%.c $(LIB_FCGI) $(LIB_HELPER) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Ifcgi-app -Isandbox-helper $< $(LIB_FCGI) $(LIB_HELPER) $(LIB_COMMON) \
	   $(FCGI_LIBS) $(HELPER_LIBS) -lcmocka -o $@

deps:
	@tools/deps.sh

unit: $(UNIT_BIN)
	@tools/unit.sh $(UNIT_BIN)

integration: all
	@tools/integration.sh tests/integration

security: all
	@tools/integration.sh tests/security

check: deps
	$(MAKE) all
	$(MAKE) unit
	$(MAKE) integration
	$(MAKE) security
	$(MAKE) package-test

# Builds the .deb, lints it, installs it, tests the service through nginx and
# lighttpd, upgrades, purges (needs root; not beside an installed roombox).
package-test: deps
	@/usr/bin/python3 tests/package/test_deb.py

run: deps
	$(MAKE) all
	@PORT=$(PORT) tools/run.sh

bench: deps
	$(MAKE) all
	@tools/bench.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(dir $(HELPER))
	install -m 0755 $(B)/roombox-fcgi $(DESTDIR)$(PREFIX)/sbin/roombox-fcgi
	install -m 0755 $(B)/roombox-helper $(DESTDIR)$(HELPER)
	install -m 0755 $(B)/roombox-keeper $(DESTDIR)$(KEEPER)

clean:
	rm -rf $(B)
