# pg_occ: retry optimistic transactions, with jittered backoff or a FIFO queue per hot key
EXTENSION = pg_occ
EXTVERSION = $(shell grep default_version $(srcdir)/$(EXTENSION).control | sed -e "s/default_version[[:space:]]*=[[:space:]]*'\([^']*\)'/\1/")

MODULE_big = pg_occ
# src/: a folder per mechanism, the calls going one way (src/pg_occ.h maps them)
OBJS = src/module.o src/guc.o \
	$(patsubst $(srcdir)/%.c,%.o,$(sort $(wildcard $(srcdir)/src/*/*.c)))
HEADERS = src/pg_occ.h src/compat.h

# the folders' headers are included as "queue/queue.h"
PG_CPPFLAGS = -I$(srcdir)/src

# paths relative to the source directory ($(srcdir), set by PGXS), which
# differs from the current one in an out-of-tree (VPATH) build
# The exporter's queries file goes with them, to $(pg_config --sharedir)/extension,
# not with DOCS to the docdir, which packages compress (Debian's dh_compress
# gzips files of more than 4 kB there)
DATA = $(patsubst $(srcdir)/%,%,$(wildcard $(srcdir)/sql/$(EXTENSION)--*.sql)) sql/$(EXTENSION)--0.1.0.control \
	sql/pg_occ_prometheus.yaml

# pg_regress: sql/*.sql against expected/*.out; the server must preload pg_occ
REGRESS = backoff guc retry result budget stats queue upgrade schema memory bodies foreign keys roles client batch escrow escrow_hostile escrow_update citus
REGRESS_OPTS = --inputdir=$(srcdir) --load-extension=$(EXTENSION)

# isolation tester: test/specs/*.spec against test/expected/*.out
ISOLATION = update_conflict result_conflict write_skew deadlock give_up queue_order queue_deadlock queue_unlock_all budget_queue gate_deadlock keys_order keys_learned gate_roles key_order key_commit key_roles escrow_wait escrow_bound escrow_fold escrow_drop escrow_check escrow_serializable escrow_ddl escrow_update
ISOLATION_OPTS = --inputdir=$(srcdir)/test --load-extension=$(EXTENSION)

EXTRA_CLEAN = test/results test/output_iso regression.* results

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# out-of-tree (VPATH) build, make -f /path/to/pg_occ/Makefile: the objects
# go to src/ under the current directory
$(shell mkdir -p src/util src/attempt src/queue src/policy src/batch src/stats src/retry src/escrow)

# every object is built again when a header changes: PGXS tracks no header
# (unless PostgreSQL was configured with --enable-depend), and a struct that
# two objects lay out differently corrupts memory
$(OBJS): $(wildcard $(srcdir)/src/*.h $(srcdir)/src/*/*.h)

# pgTAP: the API surface, test/tap/*.sql through pg_prove
.PHONY: prove_installcheck
prove_installcheck:
	pg_prove --ext .sql $(srcdir)/test/tap/
