# gen_durable - durable execution inside PostgreSQL (PGXS build)
#
#   make && make install                     as root
#   chown -R postgres . && runuser -u postgres -- make installcheck
#
# installcheck starts its own temporary servers (--temp-instance) with
# test/gen_durable.conf, so the module is preloaded exactly as in production.

EXTENSION   = gen_durable
EXTVERSION  = 0.9.0
MODULE_big  = gen_durable
OBJS        = src/gen_durable.o \
              src/spi_util.o \
              src/args.o \
              src/privilege_hint.o \
              src/insert_spec.o \
              src/insert.o \
              src/signal.o \
              src/pick.o \
              src/pick_memory.o \
              src/job.o \
              src/claims.o \
              src/claim_log.o \
              src/admit.o \
              src/credit.o \
              src/limit_policy.o \
              src/queue_control.o \
              src/history.o \
              src/cron.o \
              src/schedule.o \
              src/buckets.o \
              src/outcome.o \
              src/flush.o \
              src/settle.o \
              src/lease.o \
              src/cancel.o \
              src/maintenance.o \
              src/archive.o \
              src/shmem.o \
              src/aftercommit.o \
              src/stats.o \
              src/wait.o \
              src/await.o \
              src/session.o \
              src/slots.o \
              src/utility_hook.o \
              src/launcher.o \
              src/worker.o
DATA        = $(wildcard sql/$(EXTENSION)--*.sql)
PGFILEDESC  = "gen_durable - durable execution inside PostgreSQL"
PG_CPPFLAGS = -I$(srcdir)/src
PG_CFLAGS  += -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers

# pg_regress inputs are every sql/*.sql that is not an install or upgrade script
REGRESS        = $(sort $(filter-out $(EXTENSION)--%,$(basename $(notdir $(wildcard sql/*.sql)))))
REGRESS_OPTS   = --temp-instance=./tmp_check --temp-config=test/gen_durable.conf
ISOLATION      = $(sort $(patsubst test/specs/%.spec,%,$(wildcard test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test --temp-instance=./tmp_check_iso --temp-config=test/gen_durable.conf
TAP_TESTS      = 1
PROVE_TESTS    = test/t/*.pl

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# every object depends on every header (PGXS tracks no header dependencies
# unless PostgreSQL was configured with --enable-depend); after the include,
# so that PGXS's "all" stays the default goal of a plain make
$(OBJS): $(wildcard src/*.h)
