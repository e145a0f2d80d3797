# 006_without_preload.pl - gen_durable without shared_preload_libraries.
#
# The SQL API still works: the library is loaded on first use, there is no
# background worker, waits fall back to bounded polling (the first wait of
# a session says so with one NOTICE), the sweeps run through
# run_maintenance(), and the stats view, which needs shared memory, says
# how to get it.

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('no_preload');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION gen_durable');

is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'gen_durable%'"),
	'0', 'no launcher and no worker');

# a job goes through insert, pick, flush
is( $node->safe_psql('postgres', q{
	SELECT gen_durable.insert('job', queue => 'q');
	SELECT count(*) FROM gen_durable.pick('q', 'w');
	SELECT applied FROM gen_durable.flush(
		(SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done'))
		   FROM gen_durable.instances));
	SELECT status FROM gen_durable.instances;
}), "1\n1\nok\ndone", 'insert, pick and flush work');

# a waiting pick polls, says so once per session, and still finds a row
# inserted while it waits
my ($stdout, $stderr);
$node->psql('postgres', q{
	SELECT count(*) FROM gen_durable.pick('empty', 'w', wait => '300 ms');
	SELECT count(*) FROM gen_durable.pick('empty', 'w', wait => '300 ms');
}, stdout => \$stdout, stderr => \$stderr);
is($stdout, "0\n0", 'waits on an empty queue return nothing');
my @notices = ($stderr =~ /NOTICE:  gen_durable is not in shared_preload_libraries/g);
is(scalar @notices, 1, 'one NOTICE per session says waits poll');

my $start = time;
my $bg = IPC::Run::start(
	[
		$node->installed_command('psql'), '-XAtq', '-d', $node->connstr('postgres'),
		'-c', "SELECT count(*) FROM gen_durable.pick('later', 'w', wait => '5 s')"
	],
	'>', \my $out, '2>', \my $err, IPC::Run::timeout(30));
sleep 1;
$node->safe_psql('postgres', "SELECT gen_durable.insert('job', queue => 'later')");
$bg->finish;
is($out, "1\n", 'a polling pick claims a row inserted while it waits');
cmp_ok(time - $start, '<', 4, 'before its wait ends');

# the sweeps run through run_maintenance
is( $node->safe_psql('postgres', q{
	SET gen_durable.reclaim_on_disconnect = on;
	SELECT count(*) FROM gen_durable.pick('later', 'w2');
	UPDATE gen_durable.instances SET lease_expires_at = now() - interval '1 s'
	 WHERE status = 'executing';
	SELECT gen_durable.run_maintenance() ->> 'reaped';
}), "0\n1", 'run_maintenance reaps an expired lease');

# the stats view explains what it needs
my ($ret) = $node->psql('postgres', 'SELECT * FROM gen_durable.stats',
	stderr => \$stderr);
isnt($ret, 0, 'the stats view fails');
like($stderr, qr/requires gen_durable to be loaded via shared_preload_libraries/,
	'and says why');
like($stderr, qr/HINT:  Add gen_durable to shared_preload_libraries/, 'and how to fix it');

$node->stop;
done_testing();
