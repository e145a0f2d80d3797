# 014_health.pl - gen_durable.health tells an operator what to look at
# under load: each engine table's size, live and dead rows and vacuuming,
# and what holds the vacuum horizon back.
#
#  - every engine table has its row, with sizes that add up;
#  - a session that keeps a snapshot open longer than gen_durable.max_wait
#    plus 5 s (set to 1 s here) is named as the horizon's holder (its pid,
#    application name, the age of its transaction) with a hint that says
#    how to end it; once it has ended, the horizon is not held;
#  - with autovacuum off, a table with more dead rows than live ones (and
#    more than 10,000) gets the hint that autovacuum is behind;
#  - an admin role that is not a superuser sees the holder too (the view
#    reads pg_stat_activity as the extension's owner); a producer may not
#    read the view, and its error's hint names the role.

use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GdPsql;
use GdJobs;

my $node = PostgreSQL::Test::Cluster->new('health');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'gen_durable'
autovacuum = off
gen_durable.max_wait = '1s'
));
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION gen_durable;
	CREATE ROLE ops LOGIN IN ROLE gen_durable_admin;
	CREATE ROLE app LOGIN IN ROLE gen_durable_producer;
});

is( $node->safe_psql('postgres',
		"SELECT string_agg(table_name, ',' ORDER BY table_name) FROM gen_durable.health"),
	'buckets,finished_0,finished_1,finished_2,finished_3,finished_4,finished_5,finished_6,'
	  . 'finished_7,finished_segments,instances,limits,queue_settings,schedules,signals,'
	  . 'step_history',
	'one row per engine table, each archive segment included');
is( $node->safe_psql('postgres', q{
		SELECT count(*) FROM gen_durable.health
		 WHERE total_bytes >= heap_bytes + index_bytes + toast_bytes AND index_bytes > 0}),
	'16', 'sizes add up');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM gen_durable.health WHERE horizon_held OR hint IS NOT NULL"),
	'0', 'nothing held, no hint, on an idle database');

# a session that holds a snapshot
my $holder = start_psql(
	$node, q{
SET application_name = 'report_job';
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM gen_durable.instances;
SELECT pg_backend_pid();
SELECT pg_sleep(60);
COMMIT;
}, 120);
my $pid;
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'report_job' "
		  . "AND backend_xmin IS NOT NULL"),
	'the holder holds a snapshot');
$pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE application_name = 'report_job'");
ok( $node->poll_query_until('postgres',
		"SELECT bool_and(horizon_held) FROM gen_durable.health"),
	'the horizon is held back once the snapshot is older than max_wait + 5 s');
is( $node->safe_psql('postgres', q{
		SELECT DISTINCT horizon_kind || ' ' || horizon_pid || ' ' || horizon_application || ' '
			   || (horizon_age > interval '6 seconds')
		  FROM gen_durable.health}),
	"backend $pid report_job true",
	'the holder is named: kind, pid, application, age');
like( $node->safe_psql('postgres',
		"SELECT hint FROM gen_durable.health WHERE table_name = 'instances'"),
	qr/^Backend $pid \(report_job\) has had a transaction or snapshot open for .*pg_terminate_backend\($pid\)/,
	'the hint says who and how to end it');
is( $node->safe_psql(
		'postgres', "SELECT DISTINCT horizon_pid FROM gen_durable.health",
		extra_params => [ '-U', 'ops' ]),
	$pid,
	'an admin that is not a superuser sees the holder');
my ($rc, $out, $err) = $node->psql(
	'postgres', 'SELECT * FROM gen_durable.health',
	extra_params => [ '-U', 'app', '-v', 'VERBOSITY=default' ]);
like($err, qr/permission denied for view health.*HINT:.*gen_durable_admin/s,
	'a producer may not read it, and is told which role may');

$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
eval { $holder->{h}->finish };
ok( $node->poll_query_until('postgres',
		"SELECT NOT bool_or(horizon_held) FROM gen_durable.health"),
	'the horizon is free once the holder ended');

# dead rows with no vacuum: more than live ones, and more than 10,000 (each
# of 12,000 jobs leaves its first version dead in the live table when it
# moves to the archive, 0.9.0)
finish_jobs($node, 'h', 12000);
$node->safe_psql('postgres', "DELETE FROM gen_durable.instances WHERE queue = 'h'");
ok( $node->poll_query_until('postgres', q{
		SELECT dead_rows > 10000 FROM gen_durable.health WHERE table_name = 'instances'}),
	'the dead rows are counted');
like( $node->safe_psql('postgres',
		"SELECT hint FROM gen_durable.health WHERE table_name = 'instances'"),
	qr/autovacuum is behind on this table/,
	'more dead rows than live ones and no vacuum: autovacuum is behind');
$node->safe_psql('postgres', 'VACUUM gen_durable.instances');
ok( $node->poll_query_until('postgres', q{
		SELECT hint IS NULL FROM gen_durable.health WHERE table_name = 'instances'}),
	'after a vacuum the hint is gone');

$node->stop;
done_testing();
