# 003_dead_client.pl - claims of clients that die, and timed awaits, with
# nothing but the maintenance worker running the sweeps.
#
#  - A client picks a job with a 60 s lease (gen_durable.reclaim_on_disconnect
#    on, the default) and is killed mid-step (its psql gets SIGKILL, so the
#    connection closes and its backend exits).  Another session already
#    waiting in pick(..., wait => '10 s') gets the job in under 2 s, with
#    attempt 1, although the lease has 60 s left and maintenance_interval
#    is 10 s.
#  - With gen_durable.reclaim_on_disconnect off the claim records no session:
#    after the client dies the job stays claimed until its lease expires,
#    then it is reaped (attempt 1).
#  - A timed await wakes by itself: an instance parked with "timeout": 1
#    becomes runnable with timed_out after about a second, and a waiting
#    pick on its queue returns it, with timed_out = true; a client waiting
#    in await(id, '10 s', 'terminal') meanwhile is not answered by that
#    wake-up but by the commit of the instance's done, at once.
#  - Nobody called run_maintenance() (pg_stat_statements shows no call), and
#    the stats counters say exactly what the worker did.

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use GdPsql;

sub poll_within
{
	my ($node, $db, $seconds, $query, $expected) = @_;
	local $PostgreSQL::Test::Utils::timeout_default = $seconds;
	return $node->poll_query_until($db, $query, $expected);
}

# pump a background psql until its output matches, at most $seconds;
# returns the time it matched (undef on timeout)
sub pump_until_match
{
	my ($p, $re, $seconds) = @_;
	my $until = time + $seconds;
	while (time < $until)
	{
		$p->{h}->pump_nb;
		return time if $p->{out} =~ $re;
		usleep(2_000);
	}
	return undef;
}

# kill a background_psql session's psql with SIGKILL and reap it
sub kill_session
{
	my ($session) = @_;
	$session->{run}->signal('KILL');
	eval { $session->{run}->finish; };
	return;
}

my $node = PostgreSQL::Test::Cluster->new('dead_client');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'gen_durable, pg_stat_statements'
# the claims this test looks at are written to their rows (claims kept in
# memory of a dead client: 015_memory_claims.pl)
gen_durable.claim_in_memory = off
));
$node->start;
$node->safe_psql('postgres',
	'CREATE EXTENSION gen_durable; CREATE EXTENSION pg_stat_statements');
ok( poll_within(
		$node, 'postgres', 15,
		"SELECT count(*) FROM pg_stat_activity "
		  . "WHERE backend_type = 'gen_durable worker' AND datname = 'postgres'",
		'1'),
	'the maintenance worker runs');
is( $node->safe_psql(
		'postgres',
		'SHOW gen_durable.maintenance_interval; SHOW gen_durable.reclaim_on_disconnect'),
	"10s\non",
	'defaults: 10 s maintenance interval, reclaim_on_disconnect on');

# --- a client killed mid-step: its job is picked again in under 2 s ------

my $id = $node->safe_psql('postgres', q{SELECT gen_durable.insert('mail', queue => 'dc')});

my $client = $node->background_psql('postgres');
my $client_pid = $client->query_safe('SELECT pg_backend_pid()');
my $claim = $client->query_safe(
	q{SELECT id || '|' || attempt FROM gen_durable.pick('dc', 'client', lease => '60 s')});
is($claim, "$id|0", 'the client claims the job with a 60 s lease');
is( $node->safe_psql(
		'postgres',
		"SELECT status || ' ' || locked_by || ' ' || (claim_session IS NOT NULL) "
		  . "|| ' ' || (lease_expires_at > now() + interval '50 s') "
		  . "FROM gen_durable.instances WHERE id = $id"),
	'executing client true true',
	'the claim records the client\'s session');

# another worker waits for work in the same queue
my $waiter = start_psql(
	$node, qq{
SELECT id || '|' || attempt FROM gen_durable.pick('dc', 'waiter', wait => '10 s');
SELECT applied FROM gen_durable.flush('[{"id": $id, "worker": "waiter", "kind": "done"}]');
});
ok( poll_within(
		$node, 'postgres', 10,
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' "
		  . "AND state = 'active' AND query LIKE '%pick(''dc'', ''waiter''%'",
		'1'),
	'the other worker is waiting in pick');
$waiter->{h}->pump_nb;
is($waiter->{out}, '', 'it has not got the job yet');

my $t_kill = time;
kill_session($client);
my $t_got = pump_until_match($waiter, qr/^\d+\|\d+\n/, 12);
ok(defined $t_got, 'the waiting pick returns after the client is killed')
  or diag "stderr: $waiter->{err}";
$t_got //= time;
my $latency = $t_got - $t_kill;
note sprintf('job picked again %.3f s after the client was killed', $latency);
cmp_ok($latency, '<', 2, 'the job is picked again in under 2 s (lease 60 s)');
$waiter->{h}->finish;
is($waiter->{out}, "$id|1\nok\n", 'the waiting pick got the job with attempt 1, and flushed it');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $client_pid"),
	'0', 'the killed client\'s backend is gone');
is($node->safe_psql('postgres', "SELECT status || ' ' || attempt FROM gen_durable.instances WHERE id = $id"),
	'done 1', 'the job ended done');

# --- reclaim_on_disconnect off: only the lease counts --------------------

my $id_off = $node->safe_psql('postgres', q{SELECT gen_durable.insert('mail', queue => 'off')});
my $client2 = $node->background_psql('postgres');
my $client2_pid = $client2->query_safe('SELECT pg_backend_pid()');
$client2->query_safe('SET gen_durable.reclaim_on_disconnect = off');
my $claim2 = $client2->query_safe(
	q{SELECT id || '|' || extract(epoch FROM lease_expires_at) FROM gen_durable.pick('off', 'client2', lease => '5 s')});
like($claim2, qr/^$id_off\|[\d.]+$/, 'a client with reclaim_on_disconnect off claims a job, lease 5 s');
my (undef, $expires2) = split /\|/, $claim2;
is($node->safe_psql('postgres', "SELECT claim_session IS NULL FROM gen_durable.instances WHERE id = $id_off"),
	't', 'no session is recorded on that claim');

kill_session($client2);
ok( poll_within(
		$node, 'postgres', 10,
		"SELECT count(*) FROM pg_stat_activity WHERE pid = $client2_pid", '0'),
	'the second client\'s backend is gone');
is($node->safe_psql('postgres', q{SELECT count(*) FROM gen_durable.pick('off', 'other', wait => '1 s')}),
	'0', 'a waiting pick gets nothing while the lease runs');
is( $node->safe_psql(
		'postgres',
		"SELECT status || ' ' || locked_by || ' ' || attempt FROM gen_durable.instances WHERE id = $id_off"),
	'executing client2 0',
	'the dead client keeps its claim until the lease expires');
ok( poll_within(
		$node, 'postgres', 10,
		"SELECT status || ' ' || attempt FROM gen_durable.instances WHERE id = $id_off",
		'runnable 1'),
	'after the lease the claim is reaped (attempt 1)');
is( $node->safe_psql(
		'postgres',
		"SELECT updated_at >= to_timestamp($expires2) FROM gen_durable.instances WHERE id = $id_off"),
	't', 'not before the lease expired');

# --- a timed await wakes by itself ----------------------------------------

my $id_await = $node->safe_psql('postgres', q{SELECT gen_durable.insert('order', queue => 'ta')});
# pick and flush in one session: the claim would be taken back as soon as
# a picking session disconnects
my $parked = $node->safe_psql(
	'postgres', qq{
SELECT id FROM gen_durable.pick('ta', 'parker');
SELECT applied FROM gen_durable.flush('[{"id": $id_await, "worker": "parker", "kind": "await",
                                        "names": ["never"], "step": "woke", "timeout": 1}]');
SELECT status || '|' || extract(epoch FROM await_deadline) FROM gen_durable.instances WHERE id = $id_await;
});
my $t_parked = time;
like($parked, qr/^$id_await\nok\nawaiting_signal\|[\d.]+$/, 'picked and parked with a 1 s timeout');
my ($deadline) = $parked =~ /\|([\d.]+)$/;

# a client waits in await() for the instance to end
my $awaiter = start_psql($node,
	"SELECT status || '|' || step FROM gen_durable.await($id_await, '10 s', 'terminal');\n");
ok( poll_within(
		$node, 'postgres', 10,
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' "
		  . "AND state = 'active' AND query LIKE '%gen_durable.await($id_await%'",
		'1'),
	'a client waits in await(until => terminal)');

# a waiting pick on the queue gets it once the timeout fires
# (its row checked and flushed done in the same session, before it
# disconnects)
my $woken = $node->safe_psql(
	'postgres', qq{
SELECT id || '|' || step || '|' || timed_out || '|' || attempt FROM gen_durable.pick('ta', 'picker', wait => '5 s');
SELECT eligible_at > to_timestamp($deadline) AND eligible_at < to_timestamp($deadline) + interval '1.5 s'
       AND timed_out AND await_deadline IS NULL
  FROM gen_durable.instances WHERE id = $id_await;
SELECT applied FROM gen_durable.flush('[{"id": $id_await, "worker": "picker", "kind": "done"}]');
});
my $t_woken = time;
my @woken = split /\n/, $woken;
is($woken[0], "$id_await|woke|true|0",
	'a waiting pick gets the timed-out instance, with timed_out, at its next step');
note sprintf('timed await picked %.3f s after parking', $t_woken - $t_parked);
cmp_ok($t_woken - $t_parked, '<', 3, 'within about a second of the 1 s timeout');
is($woken[1], 't', 'woken after its deadline and promptly (eligible_at within 1.5 s of it)');
is($woken[2], 'ok', 'and flushed done');
my $t_awaited = pump_until_match($awaiter, qr/\n/, 5);
ok(defined $t_awaited, 'await() returns once the instance is done')
  or diag "stderr: $awaiter->{err}";
$awaiter->{h}->finish;
is($awaiter->{out}, "done|woke\n", 'await() answers done (it did not stop at the timeout wake-up)');
cmp_ok(($t_awaited // time) - $t_woken, '<', 1, 'await() returns within a second of the done');

# --- nobody called run_maintenance(); the counters tell what the worker did

is( $node->safe_psql(
		'postgres',
		q{SELECT count(*) FROM pg_stat_statements WHERE strpos(query, 'run_' || 'maintenance') > 0}),
	'0', 'no client called run_maintenance()');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(counter || '=' || value, ',' ORDER BY counter) FROM gen_durable.stats
		   WHERE counter IN ('reaped', 'reaped_dead_backend', 'lease_failed', 'timeouts_fired',
		                     'maintenance_errors')}),
	'lease_failed=0,maintenance_errors=0,reaped=2,reaped_dead_backend=1,timeouts_fired=1',
	'stats: one claim of a dead backend and one expired lease reaped, one timeout fired');

$node->stop;
done_testing();
