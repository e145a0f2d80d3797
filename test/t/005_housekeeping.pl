# 005_housekeeping.pl - what the maintenance worker does besides reaping:
#
#  - an error in one sweep is logged and counted, the round goes on with
#    the other sweeps, and the worker (same process) retries the failing
#    sweep in later rounds until it succeeds;
#  - due-time pokes: a pick waiting on a queue is woken by the worker when a
#    scheduled row falls due, sooner than the waiter's own 1 s re-check
#    would find it;
#  - NOTIFY pokes: a commit that makes work runnable in a queue makes the
#    worker send NOTIFY "gen_durable:<queue>", at most once per queue per
#    100 ms window however many commits there are;
#  - the worker runs as a superuser but is immune to its database's
#    settings: an unprivileged database owner who sets the database's
#    search_path to a schema with a hostile "=" operator gains nothing;
#  - a role that may not drop a database cannot stop its worker by trying.

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('housekeeping');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'gen_durable'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION gen_durable');
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'gen_durable worker'")
  or die "no worker";

my $worker_pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'gen_durable worker'");

sub counter
{
	my ($name) = @_;
	return $node->safe_psql('postgres',
		"SELECT value FROM gen_durable.stats WHERE counter = '$name'");
}

# ---- an error in one sweep ----
# A trigger makes the reaper's update of one instance fail.  Its lease has
# expired; at the same time another instance's await deadline passes.
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.refuse_reap() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF OLD.fsm = 'stuck' AND OLD.status = 'executing' AND NEW.status <> 'executing' THEN
			RAISE EXCEPTION 'refusing to reap instance %', OLD.id;
		END IF;
		RETURN NEW;
	END $$;
	CREATE TRIGGER refuse_reap BEFORE UPDATE ON gen_durable.instances
		FOR EACH ROW EXECUTE FUNCTION public.refuse_reap();
});
my $errors_before = counter('maintenance_errors');
my ($stuck, $parked) = split /\n/, $node->safe_psql('postgres', q{
	SET gen_durable.reclaim_on_disconnect = off;
	SELECT gen_durable.insert('stuck', queue => 'qs');
	SELECT gen_durable.insert('parked', queue => 'qp');
	SELECT count(*) FROM gen_durable.pick('qs', 'w', lease => '1 s');
	SELECT count(*) FROM gen_durable.pick('qp', 'w');
});
$node->safe_psql('postgres', qq{
	SELECT count(*) FROM gen_durable.flush('[{"id": $parked, "worker": "w", "kind": "await",
		"names": ["never"], "step": "later", "timeout": 1}]');
});
ok( $node->poll_query_until('postgres',
		"SELECT status = 'runnable' AND timed_out FROM gen_durable.instances WHERE id = $parked"),
	'the await timeout fires while the reaper keeps failing');
ok($node->poll_query_until('postgres',
		"SELECT value > $errors_before FROM gen_durable.stats WHERE counter = 'maintenance_errors'"),
	'the failing sweep is counted in maintenance_errors');
is($node->safe_psql('postgres', "SELECT status FROM gen_durable.instances WHERE id = $stuck"),
	'executing', 'the instance the reaper cannot update stays claimed');
is( $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'gen_durable worker'"),
	$worker_pid, 'the same worker process goes on');
like(slurp_file($node->logfile), qr/refusing to reap instance $stuck/,
	'the error is in the server log');
$node->safe_psql('postgres', 'DROP TRIGGER refuse_reap ON gen_durable.instances');
ok( $node->poll_query_until('postgres',
		"SELECT status = 'runnable' AND attempt = 1 FROM gen_durable.instances WHERE id = $stuck"),
	'once the cause is gone a later round reaps it');

# ---- due-time pokes ----
# The row falls due 1.5 s after the pick starts waiting.  The waiter's own
# re-check runs every second (at 1 s and 2 s), so it alone would claim the
# row after 2 s; the worker's poke wakes it at about 1.5 s.
$node->safe_psql('postgres', "SELECT gen_durable.insert('later', queue => 'qd', delay => '1.5 s')");
my $start = time;
my $got = $node->safe_psql('postgres',
	"SELECT count(*) FROM gen_durable.pick('qd', 'w', wait => '5 s')");
my $elapsed = time - $start;
is($got, '1', 'the waiting pick claims the scheduled row');
cmp_ok($elapsed, '>=', 1.3, 'not before the row is due');
cmp_ok($elapsed, '<', 1.9, 'woken by the worker when it falls due, before the 2 s re-check');

# ---- NOTIFY pokes ----
# A listener waits 2 s while another session commits 50 inserts into the
# queue, one per transaction, as fast as it can: the listener hears the
# queue's channel, and the worker sent far fewer pokes than commits.
my $notifies_before = counter('notifies_sent');
my ($out, $err) = ('', '');
my $listener = IPC::Run::start(
	[
		$node->installed_command('psql'), '-X', '-d', $node->connstr('postgres'),
		'-c', 'LISTEN "gen_durable:qn"', '-c', 'SELECT pg_sleep(2)'
	],
	'>', \$out, '2>', \$err, IPC::Run::timeout(30));
sleep 1;
my $script = join '', map { "SELECT gen_durable.insert('n', queue => 'qn');\n" } 1 .. 50;
$node->safe_psql('postgres', $script);
$listener->finish;
like($out, qr/Asynchronous notification "gen_durable:qn" received/,
	'a LISTENer hears the queue\'s channel');
my $sent = counter('notifies_sent') - $notifies_before;
cmp_ok($sent, '>=', 1, 'the worker sent a poke');
cmp_ok($sent, '<', 50, "50 commits were coalesced into $sent pokes");

# ---- the worker ignores a hostile search_path ----
$node->safe_psql('postgres', q{
	CREATE ROLE dbo LOGIN;
	CREATE DATABASE evil OWNER dbo;
});
$node->safe_psql('evil', 'CREATE EXTENSION gen_durable');
$node->safe_psql('evil', q{
	SET ROLE dbo;
	CREATE SCHEMA trap;
	CREATE FUNCTION trap.name_eq(name, name) RETURNS boolean LANGUAGE plpgsql AS $$
	BEGIN
		ALTER ROLE dbo SUPERUSER;
		RETURN $1 OPERATOR(pg_catalog.=) $2;
	EXCEPTION WHEN OTHERS THEN
		RETURN $1 OPERATOR(pg_catalog.=) $2;
	END $$;
	CREATE FUNCTION trap.text_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
	BEGIN
		ALTER ROLE dbo SUPERUSER;
		RETURN $1 OPERATOR(pg_catalog.=) $2;
	EXCEPTION WHEN OTHERS THEN
		RETURN $1 OPERATOR(pg_catalog.=) $2;
	END $$;
	CREATE OPERATOR trap.= (LEFTARG = name, RIGHTARG = name, FUNCTION = trap.name_eq);
	CREATE OPERATOR trap.= (LEFTARG = text, RIGHTARG = text, FUNCTION = trap.text_eq);
	ALTER DATABASE evil SET search_path = trap, pg_catalog;
});
# a fresh worker picks up the database's settings at connection
$node->safe_psql('postgres', q{
	SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	 WHERE backend_type = 'gen_durable worker' AND datname = 'evil';
});
ok( $node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE backend_type = 'gen_durable worker' AND datname = 'evil'}),
	"the worker of the owner's database is back");
my $rounds = counter('maintenance_rounds');
ok($node->poll_query_until('postgres',
		"SELECT value >= $rounds + 2 FROM gen_durable.stats WHERE counter = 'maintenance_rounds'"),
	'and has run rounds');
is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'dbo'"),
	'f', "the owner's operator did not run with the worker's rights");

# ---- a failed DROP DATABASE does not stop the worker ----
$node->safe_psql('postgres', 'CREATE ROLE nobody LOGIN');
my $evil_worker = $node->safe_psql('postgres', q{
	SELECT pid FROM pg_stat_activity
	 WHERE backend_type = 'gen_durable worker' AND datname = 'evil'});
my ($rc) = $node->psql('postgres', 'SET ROLE nobody; DROP DATABASE evil');
isnt($rc, 0, 'a role that is not the owner cannot drop the database');
is( $node->safe_psql('postgres', q{
		SELECT pid FROM pg_stat_activity
		 WHERE backend_type = 'gen_durable worker' AND datname = 'evil'}),
	$evil_worker, 'and its worker was not stopped');

$node->stop;
done_testing();
