# 013_table_stats.pl - the maintenance worker reports the table statistics
# of its sweeps, so that autovacuum sees the rows they leave dead.
#
# A background worker reports its statistics only when it asks to (a client
# backend does it when it goes idle); until 0.7.0 the maintenance worker
# never did, so the rows GC deleted and the claims the reaper returned did
# not count toward autovacuum of the engine's tables until the worker
# exited.  Here, with autovacuum off (nothing resets the counters), 500
# finished jobs are deleted by GC alone: n_tup_del of gen_durable.instances
# goes from 0 to 500 and n_dead_tup grows by at least 500 while the worker
# keeps running (same pid), and a reaped claim shows in n_tup_upd.  Then
# 500 jobs that end in the archive (0.9.0): their moves are the client's
# deletes, and the worker empties their segment with a TRUNCATE, which
# deletes no row.

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use GdJobs;

my $node = PostgreSQL::Test::Cluster->new('table_stats');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'gen_durable'
autovacuum = off
gen_durable.retention = '1h'
gen_durable.maintenance_interval = '500ms'
));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION gen_durable');
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'gen_durable worker'")
  or die "no maintenance worker";
my $worker_pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'gen_durable worker'");

# the statistics of gen_durable.instances, as the cumulative statistics
# system has them now
sub instances_stats
{
	return $node->safe_psql('postgres', q{
		SELECT n_tup_upd || ' ' || n_tup_del || ' ' || n_dead_tup
		  FROM pg_stat_user_tables
		 WHERE schemaname = 'gen_durable' AND relname = 'instances'});
}

# 500 jobs, picked and finished by a client that keeps them in the live
# table (no archive: GC is to delete them); its own statistics (the
# inserts and the update that ends each row: the claims are kept in
# memory) are reported when it ends
finish_jobs($node, 'st', 500, 'SET gen_durable.archive_finished = off;');
ok( $node->poll_query_until('postgres', q{
		SELECT n_tup_upd >= 500 FROM pg_stat_user_tables
		 WHERE schemaname = 'gen_durable' AND relname = 'instances'}),
	"the client's updates are reported");
my (undef, $del_before, $dead_before) = split / /, instances_stats();
is($del_before, 0, 'no row of instances was deleted yet');

# GC deletes them: retention 0, the worker's next round
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET gen_durable.retention = 0;
	SELECT pg_reload_conf();
});
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM gen_durable.instances WHERE queue = 'st'"),
	'GC deleted the finished jobs');
ok( $node->poll_query_until('postgres', q{
		SELECT n_tup_del >= 500 FROM pg_stat_user_tables
		 WHERE schemaname = 'gen_durable' AND relname = 'instances'}),
	'the deletes of GC are reported while the worker runs');
my (undef, $del_after, $dead_after) = split / /, instances_stats();
is($del_after, 500, 'n_tup_del counts the 500 rows GC deleted');
cmp_ok($dead_after - $dead_before, '>=', 500, 'n_dead_tup grew by the rows GC deleted');

# a claim the reaper returns: its update is reported too
my ($upd_before) = split / /, instances_stats();
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET gen_durable.retention = '1h';
	SELECT pg_reload_conf();
	SET gen_durable.reclaim_on_disconnect = off;
	SELECT gen_durable.insert('job', queue => 'st');
	SELECT count(*) FROM gen_durable.pick('st', 'gone', lease => '1 second');
});
ok( $node->poll_query_until('postgres',
		"SELECT attempt = 1 FROM gen_durable.instances WHERE queue = 'st' AND status = 'runnable'"),
	'the reaper returned the expired claim');
ok( $node->poll_query_until('postgres', qq{
		SELECT n_tup_upd > $upd_before + 1 FROM pg_stat_user_tables
		 WHERE schemaname = 'gen_durable' AND relname = 'instances'}),
	"the reaper's update is reported");

# the archive: the moves count as the client's deletes of the live table;
# the segment goes whole, so the worker adds no delete
my (undef, $del_live) = split / /, instances_stats();
finish_jobs($node, 'ar', 500);
is( $node->safe_psql('postgres', q{
		SELECT count(*) FROM gen_durable.instances
		 WHERE queue = 'ar' AND tableoid <> 'gen_durable.instances'::regclass}),
	500, 'the finished jobs are in the archive');
ok( $node->poll_query_until('postgres', qq{
		SELECT n_tup_del >= $del_live + 500 FROM pg_stat_user_tables
		 WHERE schemaname = 'gen_durable' AND relname = 'instances'}),
	"the moves are reported as the client's deletes");
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET gen_durable.retention = 0;
	SELECT pg_reload_conf();
});
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM gen_durable.instances WHERE queue = 'ar'"),
	'the worker emptied their segment');
my (undef, $del_end) = split / /, instances_stats();
is($del_end, $del_live + 500, 'emptying the segment deleted no row of the live table');

is( $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'gen_durable worker'"),
	$worker_pid,
	'the same maintenance worker ran throughout (nothing was reported by an exit)');

$node->stop;
done_testing();
