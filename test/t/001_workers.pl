# 001_workers.pl - the launcher and the per-database maintenance workers.
#
# With shared_preload_libraries = 'gen_durable':
#  - a "gen_durable launcher" (connected to no database) runs, and a database
#    without the extension gets no lasting worker;
#  - CREATE EXTENSION starts a "gen_durable worker" for its database without
#    a restart; DROP EXTENSION in that database makes its worker exit (and it
#    is not started again), while the other database's worker stays;
#  - a worker terminated with SIGTERM (pg_terminate_backend) is started again
#    by the launcher;
#  - DROP DATABASE of a database whose worker runs succeeds (the worker is
#    stopped first), and no worker keeps erroring afterwards (the server log
#    has no ERROR/FATAL after it, beyond the one termination of that worker);
#  - after the worker is killed with SIGKILL (the postmaster then
#    crash-restarts the whole server) the worker is back and keeps sweeping:
#    an expired lease is reaped without anybody calling run_maintenance(),
#    soon after the lease expires although maintenance_interval is 10 s
#    (the worker sleeps until the next deadline, it does not tick blindly);
#  - gen_durable.maintenance_worker = off (ALTER SYSTEM + reload, so SIGHUP)
#    makes the worker idle: an expired lease stays claimed and no round runs;
#    turned on again, the worker reaps it at once.

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# poll_query_until, but giving up after about $seconds instead of the
# default 180 s (it tries ten times per "timeout_default" second)
sub poll_within
{
	my ($node, $db, $seconds, $query, $expected) = @_;
	local $PostgreSQL::Test::Utils::timeout_default = $seconds;
	return $node->poll_query_until($db, $query, $expected);
}

# pid of the worker of a database ('' when there is none)
sub worker_pid
{
	my ($node, $db) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(pid::text, ',') FROM pg_stat_activity "
		  . "WHERE backend_type = 'gen_durable worker' AND datname = '$db'");
}

my $node = PostgreSQL::Test::Cluster->new('workers');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'gen_durable'
restart_after_crash = on
# the claims this test looks at are written to their rows (claims kept in
# memory: 015_memory_claims.pl)
gen_durable.claim_in_memory = off
));
$node->start;

# --- the launcher --------------------------------------------------------

ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) = 1 AND bool_and(datname IS NULL) FROM pg_stat_activity "
		  . "WHERE backend_type = 'gen_durable launcher'"),
	'one launcher, connected to no database');

# the start-up probe of the databases without the extension leaves nothing
ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gen_durable worker'",
		'0'),
	'no worker while no database has the extension (the start-up probe leaves none)');

# --- CREATE EXTENSION starts a worker, without a restart -------------------

$node->safe_psql('postgres', 'CREATE EXTENSION gen_durable');
ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) FROM pg_stat_activity "
		  . "WHERE backend_type = 'gen_durable worker' AND datname = 'postgres'",
		'1'),
	'CREATE EXTENSION starts the worker of database postgres');
my $pg_worker = worker_pid($node, 'postgres');
like($pg_worker, qr/^\d+$/, 'exactly one worker for postgres');

$node->safe_psql('postgres', 'CREATE DATABASE db2');
$node->safe_psql('db2',      'CREATE EXTENSION gen_durable');
ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) FROM pg_stat_activity "
		  . "WHERE backend_type = 'gen_durable worker' AND datname = 'db2'",
		'1'),
	'CREATE EXTENSION in a second database starts its worker');
like(worker_pid($node, 'db2'), qr/^\d+$/, 'exactly one worker for db2');
is($node->safe_psql('postgres', "SELECT application_name FROM pg_stat_activity WHERE pid = $pg_worker"),
	'gen_durable worker', 'the worker reports its application_name');

# --- DROP EXTENSION stops that database's worker only ----------------------

my $drop_ext_offset = -s $node->logfile;
$node->safe_psql('db2', 'DROP EXTENSION gen_durable');
ok( poll_within(
		$node, 'postgres', 10,
		"SELECT count(*) FROM pg_stat_activity "
		  . "WHERE backend_type = 'gen_durable worker' AND datname = 'db2'",
		'0'),
	'DROP EXTENSION makes the worker of db2 exit');
# the launcher restarts a failed worker after 1 s; a worker that left
# because the extension is gone must stay gone
usleep(2_000_000);
is(worker_pid($node, 'db2'), '', 'the worker of db2 is not started again');
is(worker_pid($node, 'postgres'), $pg_worker,
	'the worker of postgres is untouched by DROP EXTENSION in db2');
my @drop_ext_log = grep { /\b(ERROR|FATAL|PANIC):/ } split /\n/,
  slurp_file($node->logfile, $drop_ext_offset);
is(scalar(@drop_ext_log), 0, 'no ERROR or FATAL in the log after DROP EXTENSION')
  or diag join("\n", @drop_ext_log);

# --- SIGTERM: the launcher starts the worker again ------------------------

is($node->safe_psql('postgres', "SELECT pg_terminate_backend($pg_worker)"),
	't', 'terminate the worker of postgres');
ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gen_durable worker' "
		  . "AND datname = 'postgres' AND pid <> $pg_worker",
		'1'),
	'a terminated worker is restarted by the launcher');
my $pg_worker2 = worker_pid($node, 'postgres');
like($pg_worker2, qr/^\d+$/, 'one worker for postgres after the restart');

# --- DROP DATABASE of a database whose worker runs -------------------------

$node->safe_psql('db2', 'CREATE EXTENSION gen_durable');
ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) FROM pg_stat_activity "
		  . "WHERE backend_type = 'gen_durable worker' AND datname = 'db2'",
		'1'),
	'CREATE EXTENSION again in db2 starts its worker again');
my $db2_oid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'db2'");

my $log_offset = -s $node->logfile;
my $drop_time = time;
my ($rc, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE db2');
is($rc, 0, 'DROP DATABASE of a database with a running worker succeeds')
  or diag $stderr;
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gen_durable worker' "
		  . "AND (datid = $db2_oid OR datname IS NULL)"),
	'0', 'no worker is left for the dropped database');

# The launcher holds the dropped database's worker back for 10 s and then
# forgets the database.  Wait that out (while the postgres worker keeps
# working), then make the launcher look at its databases again with a
# third database, whose worker must start.
my $wait_left = 10.5 - (time - $drop_time);
usleep(int($wait_left * 1_000_000)) if $wait_left > 0;
$node->safe_psql('postgres', 'CREATE DATABASE db3');
$node->safe_psql('db3',      'CREATE EXTENSION gen_durable');
ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) FROM pg_stat_activity "
		  . "WHERE backend_type = 'gen_durable worker' AND datname = 'db3'",
		'1'),
	'the launcher still starts workers after the DROP DATABASE');
# let a launcher restart loop show itself in the log if there is one
usleep(1_500_000);

my $log = slurp_file($node->logfile, $log_offset);
my @bad = grep {
	/\b(ERROR|FATAL|PANIC):/
	  && !/terminating background worker "gen_durable worker" due to administrator command/
} split /\n/, $log;
is(scalar(@bad), 0, 'no ERROR or FATAL in the log after DROP DATABASE')
  or diag join("\n", @bad);
my $terminated = () = $log =~ /terminating background worker "gen_durable worker"/g;
cmp_ok($terminated, '<=', 1, 'the worker of the dropped database was stopped at most once');
my $exits = () = $log =~ /background worker "gen_durable worker" \(PID \d+\) exited with exit code [1-9]/g;
cmp_ok($exits, '<=', 1, 'no worker keeps exiting with an error after DROP DATABASE');
unlike($log, qr/database \d+ does not exist/, 'no worker was started for the dropped database');
is(worker_pid($node, 'postgres'), $pg_worker2, 'the worker of postgres ran on, untouched');
is($node->safe_psql('postgres',
		q{SELECT value FROM gen_durable.stats WHERE counter = 'maintenance_errors'}),
	'0', 'no sweep failed in any worker so far');

# --- kill -9 of the worker: crash restart, then it is back and sweeps ----

$log_offset = -s $node->logfile;
my $killed = $pg_worker2;
is(kill('KILL', $killed), 1, 'SIGKILL the worker of postgres');
ok( poll_within(
		$node, 'postgres', 30,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gen_durable worker' "
		  . "AND datname = 'postgres' AND pid <> $killed",
		'1'),
	'after the crash restart the worker of postgres is back');
$log = slurp_file($node->logfile, $log_offset);
like($log, qr/all server processes terminated; reinitializing/,
	'the postmaster did a crash restart');
ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'gen_durable launcher'"),
	'the launcher is back too');

# An expired lease is reaped by the worker alone.  The claiming session
# does not record itself (reclaim_on_disconnect off), so only the lease
# counts.  Counters restart at zero with the shared memory.
$node->safe_psql('postgres', q{SELECT gen_durable.insert('job', queue => 'k9')});
my $picked = $node->safe_psql(
	'postgres', q{
SET gen_durable.reclaim_on_disconnect = off;
SELECT id || '|' || extract(epoch FROM lease_expires_at)
  FROM gen_durable.pick('k9', 'w-k9', lease => '1 s');
});
like($picked, qr/^\d+\|[\d.]+$/, 'picked with a 1 s lease');
my ($id, $expires_at) = split /\|/, $picked;
is($node->safe_psql('postgres', "SELECT status || ' ' || (claim_session IS NULL) FROM gen_durable.instances WHERE id = $id"),
	'executing true', 'the claim records no session');

ok( poll_within(
		$node, 'postgres', 10,
		"SELECT status || ' ' || attempt FROM gen_durable.instances WHERE id = $id",
		'runnable 1'),
	'the expired lease is reaped without run_maintenance (attempt 1)');
my $reaped_after = time - $expires_at;
note sprintf('reaped %.3f s after the lease expired', $reaped_after);
cmp_ok($reaped_after, '<', 4,
	'reaped within a few seconds of expiry, not at the 10 s maintenance_interval');
is($node->safe_psql('postgres',
		"SELECT updated_at >= to_timestamp($expires_at) FROM gen_durable.instances WHERE id = $id"),
	't', 'reaped only after the lease expired');
# (counters are added just after the commit: poll them)
ok( poll_within(
		$node, 'postgres', 5,
		q{SELECT string_agg(counter || '=' || value, ',' ORDER BY counter) FROM gen_durable.stats
		   WHERE counter IN ('reaped', 'reaped_dead_backend', 'lease_failed')},
		'lease_failed=0,reaped=1,reaped_dead_backend=0'),
	'stats: one lease reaped, none for a dead backend');
cmp_ok($node->safe_psql('postgres',
		q{SELECT value FROM gen_durable.stats WHERE counter = 'maintenance_rounds'}),
	'>', 0, 'the new worker runs maintenance rounds');
is($node->safe_psql('postgres',
		q{SELECT value FROM gen_durable.stats WHERE counter = 'maintenance_errors'}),
	'0', 'without errors');

# --- gen_durable.maintenance_worker = off, by SIGHUP: the worker idles ----

$node->safe_psql('postgres',
	'ALTER SYSTEM SET gen_durable.maintenance_worker = off; SELECT pg_reload_conf()');
usleep(500_000);    # the worker rereads the file on its SIGHUP
my $rounds = $node->safe_psql('postgres',
	q{SELECT value FROM gen_durable.stats WHERE counter = 'maintenance_rounds'});
my $id_off = $node->safe_psql('postgres', q{SELECT gen_durable.insert('job', queue => 'idle')});
$node->safe_psql(
	'postgres', q{
SET gen_durable.reclaim_on_disconnect = off;
SELECT id FROM gen_durable.pick('idle', 'w-idle', lease => '1 s');
});
is($node->safe_psql('postgres', q{SELECT count(*) FROM gen_durable.pick('idle', 'other', wait => '2500 ms')}),
	'0', 'with maintenance_worker off an expired lease stays claimed');
is( $node->safe_psql(
		'postgres',
		"SELECT status || ' ' || (lease_expires_at < now()) FROM gen_durable.instances WHERE id = $id_off"
	),
	'executing true',
	'the lease has expired, the row is still executing');
is($node->safe_psql('postgres',
		q{SELECT value FROM gen_durable.stats WHERE counter = 'maintenance_rounds'}),
	$rounds, 'and the worker ran no round');

$node->safe_psql('postgres',
	'ALTER SYSTEM RESET gen_durable.maintenance_worker; SELECT pg_reload_conf()');
ok( poll_within(
		$node, 'postgres', 5,
		"SELECT status || ' ' || attempt FROM gen_durable.instances WHERE id = $id_off",
		'runnable 1'),
	'turned on again by SIGHUP, the worker reaps it at once');

$node->stop;
done_testing();
