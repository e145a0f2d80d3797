# 009_dump_restore.pl - pg_dump and restore of a database in use.
#
# A database (src) holding GdWorkload::populate's rows in every status, with
# claims held by a session that is still connected at dump time, is dumped
# with pg_dump -Fc and with plain SQL (pg_dump's default format), and each
# dump is restored (pg_restore / psql) into a fresh database of the same
# server and of a second server.  Then:
#  - pg_dump, pg_restore and psql print nothing on stderr (no warning a user
#    would have to act on);
#  - every restored database equals the source table by table, sequences
#    included (compared with the maintenance worker off on both servers, so
#    that nothing changes between the dump and the comparison: the source
#    is compared with itself too);
#  - with the workers on again, GdWorkload::check_workload passes on every
#    restored database (their claims belong to no session connected there
#    and come back by themselves, with one attempt more, although the
#    holding session is still connected to src on the same server), then on
#    the source once its holding session ended (the "fresh" baseline).
#
# Data-only dumps (pg_dump --data-only, custom and plain) are restored into
# databases that already have the extension.  What such a restore needs,
# as found here (0.7.0):
#  - the target database has CREATE EXTENSION gen_durable at the same
#    version as the source (the dump holds the rows of the extension's
#    tables, column by column, and the sequences' positions; not the
#    extension itself);
#  - the engine's tables there are empty (a restored row that meets one
#    already there fails its whole table with a duplicate key: tested
#    below);
#  - the roles (gen_durable_producer, _worker, _admin) exist: CREATE
#    EXTENSION creates them on a server that lacks them, and a data-only
#    dump grants nothing (a full one neither, unless privileges on the
#    extension's objects were changed).  The application's memberships
#    (GRANT gen_durable_worker TO app) are cluster-wide: pg_dumpall
#    --globals-only carries them to another server, pg_dump does not;
#  - nothing else: no --disable-triggers (the engine has no triggers, and
#    since 0.7.0 no table references itself, so pg_dump orders the tables
#    by their foreign keys: instances before signals and step_history), and
#    the sequences come along (setval of instances_id_seq, signals_id_seq,
#    step_history_id_seq), so new rows get new ids.
#
# Any restore, found here too:
#  - The target's maintenance worker runs while the rows arrive (CREATE
#    EXTENSION starts it, and a data-only target has it already): claims
#    come back and due timers fire as soon as their rows are committed.
#    pg_restore and psql commit each table's COPY on its own, so between
#    the COPY of instances and that of step_history the worker's GC may
#    delete terminal instances older than gen_durable.retention (every
#    terminal row of a dump older than the retention), and then the whole
#    COPY of step_history fails on its foreign key: the history of the live
#    instances is lost too (seen with a restore split in two with pg_restore
#    -L around a GC round).  So restore in one transaction (pg_restore
#    --single-transaction, psql -1: tested below as r_fc_1) or with
#    gen_durable.maintenance_worker off until the restore is done (as this
#    test does to compare the copies with the source).
#  - A copy's claims belong to nobody there: they come back at once, one
#    attempt more, even on the server where the source's workers still hold
#    them.  A copy whose workers run is a fork: its steps run again there.

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use GdWorkload;

sub poll_within
{
	my ($node, $db, $seconds, $query, $expected) = @_;
	local $PostgreSQL::Test::Utils::timeout_default = $seconds;
	return $node->poll_query_until($db, $query, $expected);
}

# run a client program of $node; returns (exit code, stdout, stderr)
sub run_client
{
	my ($node, @cmd) = @_;
	my ($out, $err) = ('', '');
	$cmd[0] = $node->installed_command($cmd[0]);
	IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

# gen_durable.maintenance_worker is PGC_SIGHUP: ALTER SYSTEM, then reload;
# waits until new sessions see it (the worker reads it at its next wake-up,
# which the reload's SIGHUP causes)
sub set_maintenance_worker
{
	my ($node, $on) = @_;
	$node->safe_psql('postgres',
		$on
		? 'ALTER SYSTEM RESET gen_durable.maintenance_worker'
		: 'ALTER SYSTEM SET gen_durable.maintenance_worker = off');
	$node->reload;
	my $want = $on ? 'on' : 'off';
	poll_within($node, 'postgres', 10, 'SHOW gen_durable.maintenance_worker', $want)
	  or die "gen_durable.maintenance_worker did not become $want on " . $node->name;
	return;
}

my $src_node = PostgreSQL::Test::Cluster->new('dump_a');
my $dst_node = PostgreSQL::Test::Cluster->new('dump_b');
for my $node ($src_node, $dst_node)
{
	$node->init;
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'gen_durable'\n");
	$node->start;
}
my $t_start = time;
$src_node->safe_psql('postgres', 'CREATE DATABASE src');
$src_node->safe_psql('src',      'CREATE EXTENSION gen_durable');
ok( poll_within(
		$src_node, 'postgres', 15,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gen_durable worker' AND datname = 'src'",
		'1'),
	'src has its maintenance worker');
my $version = $src_node->safe_psql('src',
	q{SELECT extversion FROM pg_extension WHERE extname = 'gen_durable'});

# --- the source, frozen: the workers idle from here to the comparison ------

set_maintenance_worker($_, 0) for ($src_node, $dst_node);

# the short await's deadline passes while the workers are off: it must
# fire on every copy once they are on again
my $p = GdWorkload::populate($src_node, 'src', await_timeout => '3 s');
is( $src_node->safe_psql(
		'src',
		"SELECT count(*) FROM pg_stat_activity WHERE pid = $p->{holder_pid} AND datname = 'src'"),
	'1',
	'the session holding the claims is connected to src');
my $before = GdWorkload::dump_tables($src_node, 'src');
my %rows;
for my $line (@$before)
{
	my ($what, $rest) = split / /, $line, 2;
	$rows{$what}++ unless $what =~ /_seq$/;
	$rows{$what} = $rest if $what =~ /_seq$/;
}
is( join(' ', map { "$_=" . ($rows{$_} ? 'yes' : 'no') } qw(instances signals limits buckets schedules queue_settings step_history)),
	'instances=yes signals=yes limits=yes buckets=yes schedules=yes queue_settings=yes step_history=yes',
	'the source has rows in every engine table');
like(join(' ', map { $rows{$_} // '' } qw(instances_id_seq signals_id_seq step_history_id_seq)),
	qr/^\d+ true \d+ true \d+ true$/, 'and its sequences have been used');
note join(', ', map { "$_: $rows{$_}" } sort keys %rows);

# --- dumps ---------------------------------------------------------------

my $dir = PostgreSQL::Test::Utils::tempdir;
my %dump = (
	fc       => [ '-Fc', '-f', "$dir/src.dump" ],
	sql      => [ '-f', "$dir/src.sql" ],
	data_fc  => [ '--data-only', '-Fc', '-f', "$dir/src_data.dump" ],
	data_sql => [ '--data-only', '-f', "$dir/src_data.sql" ],);
for my $kind (sort keys %dump)
{
	my ($rc, $out, $err) = run_client($src_node, 'pg_dump', @{ $dump{$kind} }, '-d', $src_node->connstr('src'));
	is($rc, 0, "pg_dump ($kind) succeeds");
	is($err, '', "pg_dump ($kind) prints nothing on stderr");
}
my $plain = slurp_file("$dir/src_data.sql");
like(
	$plain,
	qr/setval\('gen_durable\.instances_id_seq'.*setval\('gen_durable\.signals_id_seq'.*setval\('gen_durable\.step_history_id_seq'/s,
	'a data-only dump keeps the sequences\' positions');
unlike($plain, qr/CREATE EXTENSION/, 'and does not create the extension');

# --- restores --------------------------------------------------------------

# [node, database, dump, options of pg_restore / psql]
my @restores = (
	[ $src_node, 'r_fc',       'fc' ],
	[ $src_node, 'r_sql',      'sql' ],
	[ $src_node, 'r_data_sql', 'data_sql' ],
	[ $dst_node, 'r_fc',       'fc' ],
	[ $dst_node, 'r_fc_1',     'fc', '--single-transaction' ],
	[ $dst_node, 'r_sql',      'sql' ],
	[ $dst_node, 'r_data_fc',  'data_fc' ],);
is($dst_node->safe_psql('postgres', q{SELECT count(*) FROM pg_roles WHERE rolname LIKE 'gen_durable%'}),
	'0', 'the second server has none of the extension\'s roles yet');
for my $r (@restores)
{
	my ($node, $db, $kind, @how) = @$r;
	my $name = "$kind @how into $db on " . $node->name;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION gen_durable') if $kind =~ /^data_/;
	my $file = $dump{$kind}[-1];
	my ($rc, $out, $err) =
	  $kind =~ /sql$/
	  ? run_client($node, 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', @how, '-d', $node->connstr($db), '-f', $file)
	  : run_client($node, 'pg_restore', @how, '-d', $node->connstr($db), $file);
	is($rc, 0, "restore of $name succeeds");
	is($err, '', "restore of $name prints nothing on stderr");
	is($node->safe_psql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'gen_durable'}),
		$version, "$db on " . $node->name . " has gen_durable $version");
}
is($dst_node->safe_psql('postgres', q{SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname LIKE 'gen_durable%'}),
	'gen_durable_admin,gen_durable_producer,gen_durable_worker',
	'the restores created the roles on the second server');

# a data-only restore into engine tables that are not empty fails
$dst_node->safe_psql('postgres', 'CREATE DATABASE r_data_busy');
$dst_node->safe_psql('r_data_busy', q{CREATE EXTENSION gen_durable; SELECT gen_durable.insert('there')});
my ($rc, $out, $err) = run_client($dst_node, 'pg_restore', '-d', $dst_node->connstr('r_data_busy'), $dump{data_fc}[-1]);
isnt($rc, 0, 'a data-only restore into engine tables with rows fails');
like($err, qr/duplicate key value violates unique constraint "instances_pkey"/, 'with a duplicate key');

# --- every copy equals the source, which did not change -------------------

is_deeply(GdWorkload::dump_tables($src_node, 'src'), $before, 'the source did not change since the dump');
for my $r (@restores)
{
	my ($node, $db, $kind) = @$r;
	is_deeply(GdWorkload::dump_tables($node, $db), $before,
		"$db on " . $node->name . " ($kind) equals the source, table by table");
}

# --- every copy works, then the source ------------------------------------

set_maintenance_worker($_, 1) for ($src_node, $dst_node);
for my $r (@restores)
{
	my ($node, $db, $kind) = @$r;
	my $took = GdWorkload::check_workload($node, $db, $p, claims_within => 5);
	note sprintf('%s on %s: claims back after %.2f s', $db, $node->name, $took->{claims_back});
}
is( $src_node->safe_psql(
		'src',
		'SELECT string_agg(status || \':\' || attempt, \',\' ORDER BY id) FROM gen_durable.instances WHERE id IN ('
		  . join(',', @{ $p->{role}{executing} }) . ')'),
	join(',', map { 'executing:' . $p->{attempt}{$_} } @{ $p->{role}{executing} }),
	'meanwhile the source\'s claims stay with the session that holds them');
$p->{holder}->quit;
GdWorkload::check_workload($src_node, 'src', $p, claims_within => 5, label => 'the source (fresh)');

note sprintf('009 ran %.1f s after the servers started', time - $t_start);
$src_node->stop;
$dst_node->stop;
done_testing();
