# 004_database_from_template.pl - databases that get the extension by
# CREATE DATABASE from a template that has it.
#
# A database created from a template with the extension installed has the
# extension without ever running CREATE EXTENSION, so it must get its
# maintenance worker like any other database that has the extension (one
# worker per database that has it), without a server restart, and its
# sweeps must run: an expired lease there is reaped without
# run_maintenance().  Two ways in:
#  - CREATE DATABASE fromtpl TEMPLATE tpl, where tpl is an ordinary database
#    with the extension and a running worker (which is stopped for the copy
#    and must come back afterwards);
#  - CREATE EXTENSION in template1 (which, being a template, gets no worker
#    of its own), then a plain CREATE DATABASE.

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

sub poll_within
{
	my ($node, $db, $seconds, $query, $expected) = @_;
	local $PostgreSQL::Test::Utils::timeout_default = $seconds;
	return $node->poll_query_until($db, $query, $expected);
}

sub workers_of
{
	my ($db) = @_;
	return "SELECT count(*) FROM pg_stat_activity "
	  . "WHERE backend_type = 'gen_durable worker' AND datname = '$db'";
}

# an instance whose 1 s lease is the only thing that can give it back
sub claim_with_short_lease
{
	my ($node, $db) = @_;
	return $node->safe_psql(
		$db, q{
SELECT gen_durable.insert('job', queue => 'tpl') IS NOT NULL;
SET gen_durable.reclaim_on_disconnect = off;
SELECT id FROM gen_durable.pick('tpl', 'w', lease => '1 s');
});
}

my $node = PostgreSQL::Test::Cluster->new('template');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'gen_durable'\n");
$node->start;
my $version = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'gen_durable'");

# --- CREATE DATABASE ... TEMPLATE a database with the extension -------------

$node->safe_psql('postgres', 'CREATE DATABASE tpl');
$node->safe_psql('tpl',      'CREATE EXTENSION gen_durable');
ok(poll_within($node, 'postgres', 15, workers_of('tpl'), '1'), 'tpl has its worker');

my ($rc, $stdout, $stderr) = $node->psql('postgres', 'CREATE DATABASE fromtpl TEMPLATE tpl');
is($rc, 0, 'CREATE DATABASE from a template whose worker runs succeeds') or diag $stderr;
is($node->safe_psql('fromtpl', q{SELECT extversion FROM pg_extension WHERE extname = 'gen_durable'}),
	$version, 'the new database has the extension');
my $has_worker = ok(poll_within($node, 'postgres', 10, workers_of('fromtpl'), '1'),
	'the database created from the template gets its maintenance worker');
SKIP:
{
	skip 'no worker in fromtpl: nothing can reap there', 2 unless $has_worker;
	like(claim_with_short_lease($node, 'fromtpl'), qr/^t\n\d+$/, 'claimed with a 1 s lease in fromtpl');
	ok( poll_within(
			$node, 'fromtpl', 10,
			q{SELECT string_agg(status || ' ' || attempt, ',') FROM gen_durable.instances},
			'runnable 1'),
		'its sweeps run: the expired lease is reaped without run_maintenance');
}

# the template's own worker was stopped for the copy; it must come back
ok(poll_within($node, 'postgres', 25, workers_of('tpl'), '1'),
	'the worker of tpl is back after the copy');

# --- CREATE EXTENSION in template1, then a plain CREATE DATABASE -----------

$node->safe_psql('template1', 'CREATE EXTENSION gen_durable');
$node->safe_psql('postgres',  'CREATE DATABASE plain');
is($node->safe_psql('plain', q{SELECT extversion FROM pg_extension WHERE extname = 'gen_durable'}),
	$version, 'a database created from template1 has the extension');
$has_worker = ok(poll_within($node, 'postgres', 10, workers_of('plain'), '1'),
	'and gets its maintenance worker');
is($node->safe_psql('postgres', workers_of('template1')), '0', 'template1 itself has no worker');
SKIP:
{
	skip 'no worker in plain: nothing can reap there', 2 unless $has_worker;
	like(claim_with_short_lease($node, 'plain'), qr/^t\n\d+$/, 'claimed with a 1 s lease in plain');
	ok( poll_within(
			$node, 'plain', 10,
			q{SELECT string_agg(status || ' ' || attempt, ',') FROM gen_durable.instances},
			'runnable 1'),
		'its sweeps run: the expired lease is reaped without run_maintenance');
}

$node->stop;
done_testing();
