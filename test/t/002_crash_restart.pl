# 002_crash_restart.pl - an immediate shutdown under load, then a restart.
#
# Before the crash: 3000 instances in queue 'load', of which 500 are claimed
# (10 min lease) by two sessions that stay connected, 300 are parked
# (200 with a 6 s await timeout, 100 without), 500 are done and 100 wait
# for a retry; meanwhile a client inserts into queue 'live' one row per
# transaction.  Then pg_ctl stop -m immediate, and start.  Afterwards:
#  - every instance is accounted for: the 3000 rows are all there, in the
#    statuses they had (done, parked, retrying, untouched), and every 'live'
#    insert the client saw committed is there (at most one more);
#  - the rows that were executing are given back by the maintenance worker
#    alone (their claiming sessions died with the server, although their
#    leases have minutes left): runnable, attempt 1, claim cleared;
#  - the sweeps resume: the 200 await timeouts fire by themselves, and
#    maintenance_rounds keeps growing, without errors.
# Nobody calls run_maintenance().

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);

sub poll_within
{
	my ($node, $db, $seconds, $query, $expected) = @_;
	local $PostgreSQL::Test::Utils::timeout_default = $seconds;
	return $node->poll_query_until($db, $query, $expected);
}

sub stat_value
{
	my ($node, $counter) = @_;
	return $node->safe_psql('postgres',
		"SELECT value FROM gen_durable.stats WHERE counter = '$counter'");
}

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'gen_durable'
gen_durable.maintenance_interval = '2s'
# the claims this test looks at are written to their rows (claims kept in
# memory through a crash: 015_memory_claims.pl)
gen_durable.claim_in_memory = off
));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION gen_durable');
ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) FROM pg_stat_activity "
		  . "WHERE backend_type = 'gen_durable worker' AND datname = 'postgres'",
		'1'),
	'the maintenance worker runs');

# --- the load ----------------------------------------------------------------

is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM gen_durable.insert_many((
  SELECT jsonb_agg(jsonb_build_object('fsm', 'job', 'queue', 'load', 'state', jsonb_build_object('n', g)))
    FROM generate_series(1, 3000) g))}),
	'3000',
	'3000 instances inserted');

# two workers claim 250 each and stay connected, in the middle of their steps
my @claimers;
my @claimed;
for my $w (1 .. 2)
{
	my $s = $node->background_psql('postgres');
	my $ids = $s->query_safe(
		"SELECT string_agg(id::text, ',') FROM gen_durable.pick('load', 'claimer-$w', batch => 250, lease => '10 min')"
	);
	my @ids = split /,/, $ids;
	is(scalar(@ids), 250, "claimer $w holds 250 claims");
	push @claimed, @ids;
	push @claimers, $s;
}
my $claimed_list = join(',', @claimed);

# 500 done, 100 retrying in 3 s (each picked and flushed in one session)
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM gen_durable.pick('load', 'finisher', batch => 500);
SELECT applied || '|' || count(*) FROM gen_durable.flush((
  SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'finisher', 'kind', 'done',
                                      'result', jsonb_build_object('n', state->'n')))
    FROM gen_durable.instances WHERE locked_by = 'finisher')) GROUP BY applied;
}),
	"500\nok|500",
	'500 flushed done');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM gen_durable.pick('load', 'retrier', batch => 100);
SELECT applied || '|' || count(*) FROM gen_durable.flush((
  SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'retrier', 'kind', 'retry', 'delay', 3,
                                      'error', jsonb_build_object('message', 'try again')))
    FROM gen_durable.instances WHERE locked_by = 'retrier')) GROUP BY applied;
}),
	"100\nok|100",
	'100 flushed retry');

# a client inserting into queue 'live', one row per transaction, while the
# server goes down; each id it prints was committed
my $live_script = "${PostgreSQL::Test::Utils::tmp_check}/live_inserts.sql";
open(my $fh, '>', $live_script) or die "could not write $live_script: $!";
print $fh "SELECT gen_durable.insert('tick', queue => 'live');\n" for 1 .. 50000;
close $fh;
my ($live_out, $live_err) = ('', '');
my $live = IPC::Run::start(
	[
		$node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
		'-d', $node->connstr('postgres'), '-f', $live_script
	],
	'<', \undef, '>', \$live_out, '2>', \$live_err,
	IPC::Run::timeout(120));
my $until = time + 30;
while (time < $until)
{
	$live->pump_nb;
	last if ($live_out =~ tr/\n//) >= 300;
	usleep(5_000);
}
cmp_ok(($live_out =~ tr/\n//), '>=', 300, 'the live client is inserting');

# 300 parked: 200 with a 6 s timeout, 100 without (the last step before
# the crash, so that no timeout fires before it)
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM gen_durable.pick('load', 'parker', batch => 300);
SELECT applied || '|' || count(*) FROM gen_durable.flush((
  SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'parker', 'kind', 'await',
                                      'names', jsonb_build_array('go'), 'step', 'after')
                   || CASE WHEN rn <= 200 THEN '{"timeout": 6}'::jsonb ELSE '{}'::jsonb END)
    FROM (SELECT id, row_number() OVER (ORDER BY id) AS rn
            FROM gen_durable.instances WHERE locked_by = 'parker') s)) GROUP BY applied;
}),
	"300\nok|300",
	'300 parked');

is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(status || '=' || n, ',' ORDER BY status)
  FROM (SELECT status, count(*) AS n FROM gen_durable.instances WHERE queue = 'load' GROUP BY status) s}),
	'runnable=1700,executing=500,awaiting_signal=300,done=500',
	'before the crash: 1700 runnable, 500 executing, 300 parked, 500 done');
is(stat_value($node, 'committed_done'), '500', 'stats before the crash: 500 committed done');

# --- crash and restart -----------------------------------------------------

$node->stop('immediate');
# the live client notices the lost connection and exits
eval { $live->finish; };
like($live_err, qr/server closed the connection|connection to server was lost|terminating connection/,
	'the live client was cut off by the crash');
my @acked = $live_out =~ /^(\d+)\n/mg;
note scalar(@acked) . ' live inserts acknowledged before the crash';
cmp_ok(scalar(@acked), '>=', 300, 'the live client saw its inserts committed');
for my $s (@claimers)
{
	eval { $s->quit; };
}

$node->start;
is(stat_value($node, 'committed_done'), '0',
	'the counters restarted at zero with the shared memory');

# --- the claims of the dead sessions return, by the worker alone ----------

ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) FROM gen_durable.instances WHERE status = 'executing'", '0'),
	'no claim survives the crash: the worker gives them back');
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) FILTER (WHERE status = 'runnable' AND attempt = 1 AND step = 'start'
                          AND locked_by IS NULL AND lease_expires_at IS NULL
                          AND claim_session IS NULL)
       || '/' || count(*)
  FROM gen_durable.instances WHERE id IN ($claimed_list)}),
	'500/500',
	'the 500 rows claimed before the crash are runnable again, attempt 1, claim cleared');

# --- the sweeps resume: timeouts fire, rounds go on ----------------------

ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) FROM gen_durable.instances WHERE queue = 'load' AND status = 'awaiting_signal'",
		'100'),
	'the 200 await timeouts fire after the restart');

is( $node->safe_psql(
		'postgres', q{
SELECT count(*) || '|' || count(DISTINCT id) || '|' || count(DISTINCT (state->>'n')::int)
       || '|' || min((state->>'n')::int) || '|' || max((state->>'n')::int)
  FROM gen_durable.instances WHERE queue = 'load'}),
	'3000|3000|3000|1|3000',
	'all 3000 instances are there, none lost, none duplicated');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(status || '=' || n, ',' ORDER BY status)
  FROM (SELECT status, count(*) AS n FROM gen_durable.instances WHERE queue = 'load' GROUP BY status) s}),
	'runnable=2400,awaiting_signal=100,done=500',
	'after: 2400 runnable, 100 parked, 500 done');

# each group in the state it must be in
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) FILTER (WHERE status = 'done' AND result = jsonb_build_object('n', state->'n'))
       || '|' ||
       count(*) FILTER (WHERE status = 'runnable' AND step = 'after' AND timed_out AND attempt = 0
                          AND await_deadline IS NULL)
       || '|' ||
       count(*) FILTER (WHERE status = 'awaiting_signal' AND step = 'after' AND awaits = '{go}'
                          AND await_deadline IS NULL AND NOT timed_out)
       || '|' ||
       count(*) FILTER (WHERE status = 'runnable' AND step = 'start' AND attempt = 1
                          AND error = '{"message": "try again"}')
       || '|' ||
       count(*) FILTER (WHERE status = 'runnable' AND step = 'start' AND attempt = 0
                          AND NOT timed_out AND id NOT IN ($claimed_list))
       || '|' ||
       count(*) FILTER (WHERE locked_by IS NOT NULL OR lease_expires_at IS NOT NULL
                          OR claim_session IS NOT NULL)
  FROM gen_durable.instances WHERE queue = 'load'}),
	'500|200|100|100|1600|0',
	'500 done with their results, 200 timed out, 100 still parked, 100 retrying, 1600 untouched, no stray claim'
);

# every insert the live client saw committed survived (and at most the one
# in flight besides)
my $acked_list = join(',', @acked);
my ($live_found, $live_total) = split /\|/,
  $node->safe_psql(
	'postgres', qq{
SELECT count(*) FILTER (WHERE id IN ($acked_list)) || '|' || count(*)
  FROM gen_durable.instances WHERE queue = 'live'});
is($live_found, scalar(@acked), 'every acknowledged live insert survived the crash');
cmp_ok($live_total, '<=', scalar(@acked) + 1, 'and at most the one in flight besides');

# (counters are added just after the commit: poll them)
ok( poll_within(
		$node, 'postgres', 5, q{
SELECT string_agg(counter || '=' || value, ',' ORDER BY counter) FROM gen_durable.stats
 WHERE counter IN ('reaped', 'reaped_dead_backend', 'lease_failed', 'timeouts_fired', 'maintenance_errors')},
		'lease_failed=0,maintenance_errors=0,reaped=500,reaped_dead_backend=500,timeouts_fired=200'),
	'stats: 500 claims of dead sessions reaped, 200 timeouts fired, no error');

my $rounds = stat_value($node, 'maintenance_rounds');
cmp_ok($rounds, '>', 0, 'the worker runs rounds after the restart');
ok( poll_within(
		$node, 'postgres', 10,
		"SELECT value > $rounds FROM gen_durable.stats WHERE counter = 'maintenance_rounds'"),
	'and keeps running them');

# the work goes on: a waiting pick gets a reaped job again
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) FILTER (WHERE attempt = 1) || '/' || count(*)
  FROM gen_durable.pick('load', 'after-crash', batch => 10000, wait => '1 s')
 WHERE id IN ($claimed_list)}),
	'500/500',
	'the reaped jobs can be picked again, with attempt 1');

$node->stop;
done_testing();
