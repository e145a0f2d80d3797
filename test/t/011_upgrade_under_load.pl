# 011_upgrade_under_load.pl - a new build installed, the server restarted
# and ALTER EXTENSION gen_durable UPDATE run, all while workers pick and
# flush, producers insert and long-poll picks wait.
#
# The server runs from a private copy of the PostgreSQL installation
# (bin, lib and share keep their layout, so the binaries find their
# pkglibdir and sharedir relative to themselves), so that the library can
# be swapped: the functions' probin is '$libdir/gen_durable'.
#
# Phase 1: the released 0.6.0 (commit 74a455b, built here with PGXS) with
#   CREATE EXTENSION gen_durable VERSION '0.6.0' in database postgres, and
#   in database legacy an older schema, VERSION '0.5.0', which the 0.6.0
#   library does not serve (its pick fails with the hint to run ALTER
#   EXTENSION UPDATE).  GdWorkload::populate's rows in postgres, and a
#   session holding its claims.  Then the load: in each database worker
#   processes loop over pick (batch 10, long polls of 3 s) and flush
#   (next steps, then done, each naming its claim), and producers insert
#   one instance per call (1 to 4 steps, a correlation key in every
#   status, so that an insert retried after a lost answer creates nothing
#   twice).  Each call is a psql of its own (so claims do not follow the
#   connection: gen_durable.reclaim_on_disconnect is off, the lease of 5 s
#   is the limit), and each flush writes, in the flush's own statement
#   (its transaction), a ledger row per outcome applied 'ok' (load.ledger,
#   unique (id, steps)).
# Phase 2: with long polls waiting, the server is stopped (fast), the new
#   build (the installed library and SQL scripts) put in place of the old
#   one, and the server started: the new library serves the 0.6.0 schema
#   (its maintenance worker returns the claims of the sessions the restart
#   ended), and the load goes on.  Then, with long polls waiting again,
#   ALTER EXTENSION gen_durable UPDATE in postgres (0.6.0 -> the current
#   version) and in legacy (0.5.0 -> the current version), while the load goes on; then the producers
#   stop and the workers drain both databases.
#
# Checks: every instance a producer got an id for exists (and no other);
# every instance ran to done, each step committed exactly once (the
# ledger has each (id, steps) once, no second commit was counted, and the
# final steps, state and result agree with it); every phase committed
# work; every error a worker or producer saw is one the README tells a
# worker to retry: connection loss (the restart) or, on the old schema of
# legacy, the hint to run ALTER EXTENSION gen_durable UPDATE (whose text
# names the library: 0.6.0 before the restart, the current version after
# it); the
# catalogs of both databases match a fresh install's in the members,
# columns, constraints and privileges (sql/upgrade.sql compares
# everything).  Then GdWorkload::check_workload on the upgraded postgres.

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::MD5;
use File::Basename qw(dirname);
use File::Path qw(make_path remove_tree);
use IPC::Run;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use GdWorkload;

my $RELEASE_060 = '74a455b';
my $repo        = "$FindBin::RealBin/../..";
# the version the tree under test installs
my ($current) = slurp_file("$repo/gen_durable.control") =~ /default_version = '([\d.]+)'/;
my $tmp         = PostgreSQL::Test::Utils::tempdir;
my $t_start     = time;

sub run_or_die
{
	my ($what, @cmd) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err)
	  or die "$what failed: @cmd\n$out$err";
	return $out;
}

sub md5_of
{
	my ($path) = @_;
	open(my $fh, '<:raw', $path) or die "could not read $path: $!";
	return Digest::MD5->new->addfile($fh)->hexdigest;
}

# ---- the two builds ------------------------------------------------------

# (the released library is built from the clone's history)
plan skip_all => "release 0.6.0 ($RELEASE_060) is not in the git history of $repo"
  unless system("git -c safe.directory='*' -C '$repo' cat-file -e '$RELEASE_060^{commit}' 2>/dev/null") == 0;

my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
my %dir;
for my $d (qw(bindir pkglibdir sharedir))
{
	$dir{$d} = run_or_die('pg_config', $pg_config, "--$d");
	chomp $dir{$d};
}

# the released 0.6.0, from git history, built with PGXS (not installed);
# a clean environment for make (prove may run under make, whose command
# line variables would otherwise reach this build through MAKEFLAGS)
my $src = "$tmp/gen_durable-0.6.0";
make_path($src);
run_or_die('git archive', 'sh', '-c',
	"git -c safe.directory='*' -C '$repo' archive $RELEASE_060 | tar -x -C '$src'");
{
	local %ENV = %ENV;
	delete @ENV{qw(MAKEFLAGS MAKELEVEL MFLAGS MAKEOVERRIDES)};
	# (target all: the Makefile's first rule is not all)
	run_or_die('building 0.6.0', 'make', '-C', $src, '-j2', 'all', 'with_llvm=no',
		"PG_CONFIG=$pg_config");
}
my $old_so = "$src/gen_durable.so";
ok(-f $old_so, 'the 0.6.0 library is built from commit ' . $RELEASE_060);
my $new_so = "$dir{pkglibdir}/gen_durable.so";
isnt(md5_of($old_so), md5_of($new_so), 'the installed library is another build');
note sprintf('built 0.6.0 in %.1f s', time - $t_start);

# a private copy of the installation, with the same layout under $inst
my $inst = "$tmp/inst";
for my $d (qw(bindir pkglibdir sharedir))
{
	make_path(dirname("$inst$dir{$d}"));
	run_or_die('copying the installation', 'cp', '-a', $dir{$d}, "$inst$dir{$d}");
}
# (the installed build's bitcode would not match the old library)
remove_tree(glob("$inst$dir{pkglibdir}/bitcode/gen_durable*"));

# install_build puts a build's library and SQL scripts into the copy (the
# server is stopped: a library is replaced by a new file, never rewritten
# in place under a running server)
sub install_build
{
	my ($so, @sql) = @_;
	my $ext = "$inst$dir{sharedir}/extension";
	unlink glob("$ext/gen_durable*");
	run_or_die('installing the SQL scripts', 'cp', @sql, "$ext/");
	run_or_die('installing the library', 'cp', $so, "$inst$dir{pkglibdir}/gen_durable.so.new");
	rename("$inst$dir{pkglibdir}/gen_durable.so.new", "$inst$dir{pkglibdir}/gen_durable.so")
	  or die "rename: $!";
}
install_build($old_so, glob("$src/sql/gen_durable--*.sql"), "$src/gen_durable.control");

# ---- phase 1: 0.6.0 ----------------------------------------------------

my $node = PostgreSQL::Test::Cluster->new('upgrade', install_path => dirname("$inst$dir{bindir}"));
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'gen_durable'
gen_durable.maintenance_interval = '1s'
jit = off
max_connections = 60
));
$node->start;

is( $node->safe_psql(
		'postgres', q{
CREATE EXTENSION gen_durable VERSION '0.6.0';
CREATE DATABASE legacy;
SELECT default_version FROM pg_available_extensions WHERE name = 'gen_durable';
}),
	'0.6.0',
	'phase 1 runs release 0.6.0');
$node->safe_psql('legacy', q{CREATE EXTENSION gen_durable VERSION '0.5.0'});
for my $db (qw(postgres legacy))
{
	$node->safe_psql(
		$db, q{
CREATE SCHEMA load;
-- one row per outcome a flush applied 'ok', written by the flush's own
-- statement; a second commit of the same (id, steps) is counted (dups)
CREATE TABLE load.ledger (
	id bigint NOT NULL, steps bigint NOT NULL, claim bigint, kind text NOT NULL, n int NOT NULL,
	worker text NOT NULL, at float8 NOT NULL DEFAULT extract(epoch FROM clock_timestamp()),
	dups int NOT NULL DEFAULT 0,
	PRIMARY KEY (id, steps));
});
}
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gen_durable worker' AND datname = 'postgres'",
		'1'),
	'the 0.6.0 maintenance worker runs in postgres (not in legacy, whose schema it does not serve)');

my $p = GdWorkload::populate($node, 'postgres', await_timeout => '20 s');
is(scalar(@{ $p->{role}{executing} }), 6, 'GdWorkload::populate on 0.6.0: a session holds 6 claims');

# ---- the load ------------------------------------------------------------

# load.pl: a worker or a producer, one psql per call
my $load_pl = "$tmp/load.pl";
open(my $fh, '>', $load_pl) or die "could not write $load_pl: $!";
print $fh <<'EOF';
use strict;
use warnings;
use IPC::Run;
use Time::HiRes qw(time usleep);

# load.pl worker|producer NAME DATABASE QUEUE STOPFILE OUTDIR
my ($role, $name, $db, $queue, $stop, $outdir) = @ARGV;
$ENV{PGOPTIONS} = '-c gen_durable.reclaim_on_disconnect=off';
$| = 1;
open(my $errors, '>>', "$outdir/$name.errors") or die "$name: $!";
$errors->autoflush(1);
my %count;

# sql runs one statement, from a file of its own (psql reads nothing on
# stdin, so a psql that cannot connect is not written to), in a psql of
# its own; returns (ok, stdout, stderr, start time)
my $n_file = 0;
my %file_of;
sub sql
{
	my ($sql, %v) = @_;
	my $file = $file_of{$sql};
	if (!defined $file)
	{
		$file = $file_of{$sql} = "$outdir/$name." . ++$n_file . '.sql';
		open(my $fh, '>', $file) or die "$name: $!";
		print $fh $sql;
		close $fh;
	}
	my @cmd = ($ENV{GD_PSQL}, '-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-v',
		'VERBOSITY=verbose', '-d', $db, '-f', $file,
		map { ('-v', "$_=$v{$_}") } sort keys %v);
	my ($out, $err) = ('', '');
	my $t0 = time;
	my $ok = eval { IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err,
								  IPC::Run::timeout(60)) };
	$err .= $@ if $@;
	return ($ok ? 1 : 0, $out, $err, $t0);
}

# error records a failed call: when it started and ended, the call, its
# stderr on one line
sub error
{
	my ($call, $err, $t0) = @_;
	$err =~ s/\s+/ /g;
	printf $errors "%.3f\t%.3f\t%s\t%s\n", $t0, time, $call, $err;
	$count{"$call errors"}++;
	usleep(200_000);
}

my $flush = <<'SQL';
WITH f AS MATERIALIZED (
	SELECT f.id, f.applied, f.ord
	  FROM gen_durable.flush(:'outs'::jsonb) WITH ORDINALITY AS f(id, applied, detail, job, ord)
), m AS (
	SELECT m.ord, m.meta
	  FROM jsonb_array_elements(:'metas'::jsonb) WITH ORDINALITY AS m(meta, ord)
), l AS (
	INSERT INTO load.ledger AS l (id, steps, claim, kind, n, worker)
	SELECT f.id, (m.meta->>'steps')::bigint, (m.meta->>'claim')::bigint, m.meta->>'kind',
		   (m.meta->>'n')::int, :'w'
	  FROM f JOIN m USING (ord)
	 WHERE f.applied = 'ok'
	ON CONFLICT (id, steps) DO UPDATE SET dups = l.dups + 1
	RETURNING 1
)
SELECT f.applied || ' ' || count(*) FROM f GROUP BY f.applied ORDER BY 1;
SQL

if ($role eq 'worker')
{
	while (!-e $stop)
	{
		# (the job has a claim number from 0.6.0 on; before, an outcome
		# names none)
		my ($ok, $out, $err, $t0) = sql(
			q{SELECT id, coalesce(to_jsonb(j)->>'claim', 'none'), steps, state->>'n', state->>'total'
				FROM gen_durable.pick(:'q', :'w', batch => 10, lease => '5 s', wait => '3 s') j},
			q => $queue, w => $name);
		if (!$ok)
		{
			error('pick', $err, $t0);
			next;
		}
		my @jobs = map { [ split /\|/ ] } grep { length } split /\n/, $out;
		next unless @jobs;
		$count{picked} += @jobs;
		usleep(2_000 + int(rand(10_000)));    # the step
		my (@outs, @metas);
		for my $j (@jobs)
		{
			my ($id, $claim, $steps, $n, $total) = @$j;
			my $next = $n + 1;
			my $kind = $next < $total ? 'next' : 'done';
			my $fence = $claim eq 'none' ? '' : qq("claim": $claim, );
			$claim = 'null' if $claim eq 'none';
			push @outs,
			  $kind eq 'next'
			  ? qq({"id": $id, "worker": "$name", ${fence}"kind": "next", "step": "s$next", "state": {"n": $next, "total": $total}})
			  : qq({"id": $id, "worker": "$name", ${fence}"kind": "done", "result": {"n": $next}});
			push @metas, qq({"steps": $steps, "claim": $claim, "kind": "$kind", "n": $n});
		}
		($ok, $out, $err, $t0) = sql($flush,
			outs => '[' . join(',', @outs) . ']', metas => '[' . join(',', @metas) . ']',
			w => $name);
		if (!$ok)
		{
			error('flush', $err, $t0);
			next;
		}
		my $took = time - $t0;
		$count{slowest_flush_ms} = int($took * 1000)
		  if $took * 1000 > ($count{slowest_flush_ms} // 0);
		for (split /\n/, $out)
		{
			my ($applied, $n) = split / /;
			$count{$applied} += $n;
		}
	}
}
else
{
	open(my $acked, '>>', "$outdir/$name.acked") or die "$name: $!";
	$acked->autoflush(1);
	my $i = 0;
	while (!-e $stop)
	{
		$i++;
		my $key = "$name-$i";
		my $total = 1 + $i % 4;
		print $acked "try $key\n";
		while (1)
		{
			my ($ok, $out, $err, $t0) = sql(
				q{SELECT coalesce(gen_durable.insert('load', jsonb_build_object('n', 0, 'total', :total),
						queue => :'q', correlation_key => :'k',
						correlation_scope => '{runnable,executing,awaiting_signal,awaiting_children,done,failed,cancelled}'),
					(SELECT id FROM gen_durable.instances WHERE correlation_key = :'k'))},
				q => $queue, k => $key, total => $total);
			if ($ok)
			{
				chomp $out;
				print $acked "acked $key $out\n";
				$count{inserted}++;
				my $took = time - $t0;
				$count{slowest_insert_ms} = int($took * 1000)
				  if $took * 1000 > ($count{slowest_insert_ms} // 0);
				last;
			}
			error('insert', $err, $t0);
			last if -e $stop;
		}
		usleep(15_000);
	}
}
print join(', ', map { "$_ $count{$_}" } sort keys %count), "\n";
EOF
close $fh;

my $outdir = "$tmp/out";
make_path($outdir);
my $stop_producers = "$tmp/stop-producers";
my $stop_workers   = "$tmp/stop-workers";
my %procs;

# start_load starts a worker or a producer of queue load in $db
sub start_load
{
	my ($role, $name, $db) = @_;
	my %p = (out => '', err => '');
	local %ENV = %ENV;
	$ENV{GD_PSQL} = $node->installed_command('psql');
	$ENV{PGHOST}  = $node->host;
	$ENV{PGPORT}  = $node->port;
	$p{h} = IPC::Run::start(
		[
			$^X, $load_pl, $role, $name, $db, 'load',
			$role eq 'worker' ? $stop_workers : $stop_producers, $outdir
		],
		'<', \undef, '>', \$p{out}, '2>', \$p{err},
		IPC::Run::timeout(600));
	$procs{$name} = \%p;
}

# long_polls waits until a worker's pick of $db waits in the server
sub long_polls
{
	my ($db) = @_;
	return $node->poll_query_until($db,
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database() "
		  . "AND wait_event_type = 'Extension' AND state = 'active' AND query LIKE '%pick(%'");
}

# committed: ledger rows of $db committed between two moments (Perl time)
sub committed
{
	my ($db, $from, $to) = @_;
	return $node->safe_psql($db,
		"SELECT count(*) FROM load.ledger WHERE at >= $from AND at < $to");
}

# (should the test die, the load goes with it)
END
{
	for my $p (values %procs)
	{
		eval { $p->{h}->kill_kill if $p->{h}->pumpable; };
	}
}

my %mark;
$mark{load} = time;
start_load('worker',   "w$_", 'postgres') for 1 .. 3;
start_load('producer', "p$_", 'postgres') for 1 .. 2;
start_load('worker',   'lw1', 'legacy');
start_load('producer', 'lp1', 'legacy');
sleep 6;
ok(long_polls('postgres'), 'phase 1: long polls wait in postgres');

# ---- phase 2: the new build, the restart ------------------------------------

$mark{stop} = time;
$node->stop('fast');
install_build($new_so, glob("$dir{sharedir}/extension/gen_durable*"));
$node->start;
$mark{started} = time;
note sprintf('the restart took %.1f s', $mark{started} - $mark{stop});
is( $node->safe_psql(
		'postgres', q{
SELECT default_version || ' ' || (SELECT extversion FROM pg_extension WHERE extname = 'gen_durable')
  FROM pg_available_extensions WHERE name = 'gen_durable'}),
	"$current 0.6.0",
	'phase 2: the new build is installed, the schema still 0.6.0');

# the new library serves the 0.6.0 schema: its maintenance worker runs and
# returns the claims of the session the restart ended (populate's holder)
my $exec = join(',', @{ $p->{role}{executing} });
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gen_durable worker' AND datname = 'postgres'",
		'1'),
	'the new maintenance worker runs on the 0.6.0 schema');
ok( $node->poll_query_until(
		'postgres',
		"SELECT bool_and(status = 'runnable' AND locked_by IS NULL) FROM gen_durable.instances WHERE id IN ($exec)"),
	'it returns the claims of the session the restart ended, before the update');
my $rounds = $node->safe_psql('postgres',
	q{SELECT value FROM gen_durable.stats WHERE counter = 'maintenance_rounds'});
sleep 4;
ok(long_polls('postgres'), 'long polls wait again');
cmp_ok(
	$node->safe_psql('postgres',
		q{SELECT value FROM gen_durable.stats WHERE counter = 'maintenance_rounds'}),
	'>', $rounds,
	'its rounds go on');
is( $node->safe_psql('postgres',
		q{SELECT value FROM gen_durable.stats WHERE counter = 'maintenance_errors'}),
	'0', 'without errors');

# ---- the update, under load ------------------------------------------------

$mark{alter} = time;
$node->safe_psql('postgres', 'ALTER EXTENSION gen_durable UPDATE');
$mark{altered} = time;
note sprintf("ALTER EXTENSION gen_durable UPDATE (0.6.0 -> $current) took %.2f s under load",
	$mark{altered} - $mark{alter});
$node->safe_psql('legacy', 'ALTER EXTENSION gen_durable UPDATE');
$mark{legacy_altered} = time;
note sprintf("ALTER EXTENSION gen_durable UPDATE (0.5.0 -> $current) took %.2f s under load",
	$mark{legacy_altered} - $mark{altered});
is( $node->safe_psql('postgres',
		q{SELECT extversion FROM pg_extension WHERE extname = 'gen_durable'}),
	$current, "postgres is at $current");
is( $node->safe_psql('legacy',
		q{SELECT extversion FROM pg_extension WHERE extname = 'gen_durable'}),
	$current, "legacy is at $current");
ok( $node->poll_query_until(
		'legacy',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gen_durable worker' AND datname = 'legacy'",
		'1'),
	'legacy gets its maintenance worker with the update');
sleep 5;

# ---- the drain ---------------------------------------------------------------

$mark{producers_stop} = time;
open(my $sp, '>', $stop_producers) or die;
close $sp;
for my $name (qw(p1 p2 lp1))
{
	$procs{$name}{h}->finish;
	note "$name: $procs{$name}{out}";
	is($procs{$name}{err}, '', "producer $name wrote nothing on stderr");
}
for my $db (qw(postgres legacy))
{
	ok( $node->poll_query_until(
			$db,
			"SELECT count(*) FROM gen_durable.instances WHERE queue = 'load' AND status <> 'done'",
			'0'),
		"$db: the workers drain queue load");
}
$mark{drained} = time;
open(my $sw, '>', $stop_workers) or die;
close $sw;
for my $name (qw(w1 w2 w3 lw1))
{
	$procs{$name}{h}->finish;
	note "$name: $procs{$name}{out}";
	is($procs{$name}{err}, '', "worker $name wrote nothing on stderr");
}

# ---- the checks ----------------------------------------------------------------

for my $db (qw(postgres legacy))
{
	my @producers = $db eq 'postgres' ? qw(p1 p2) : qw(lp1);

	# every acknowledged insert exists, with the id it was acknowledged
	# with; every instance of queue load was tried by a producer
	my (%acked, %tried);
	for my $name (@producers)
	{
		open(my $a, '<', "$outdir/$name.acked") or die;
		while (<$a>)
		{
			$tried{$1} = 1 if /^try (\S+)$/;
			$acked{$1} = $2 if /^acked (\S+) (\d+)$/;
		}
	}
	my %have = map { split /\|/ } split /\n/, $node->safe_psql($db,
		"SELECT correlation_key, id FROM gen_durable.instances WHERE queue = 'load'");
	my @lost    = grep { ($have{$_} // '') ne $acked{$_} } sort keys %acked;
	my @unknown = grep { !$tried{$_} } sort keys %have;
	cmp_ok(scalar(keys %acked), '>', 100, "$db: the producers got ids for many inserts");
	is(scalar(@lost), 0, "$db: every acknowledged insert exists, with its id")
	  or diag "lost: @lost[0 .. ($#lost < 9 ? $#lost : 9)]";
	is(scalar(@unknown), 0, "$db: no instance nobody inserted") or diag "unknown: @unknown";
	note sprintf('%s: %d inserts acknowledged, %d tried', $db, scalar(keys %acked),
		scalar(keys %tried));

	# each step committed once: the ledger has (id, steps) for steps 0 ..
	# steps of the instance, each once; the state and result agree
	is( $node->safe_psql($db, 'SELECT count(*) FROM load.ledger WHERE dups > 0'),
		'0', "$db: no outcome was committed twice (no second commit of an (id, steps))");
	is( $node->safe_psql(
			$db, q{
SELECT count(*) FROM gen_durable.instances i
  LEFT JOIN LATERAL (SELECT count(*) AS n, max(steps) AS last,
							count(*) FILTER (WHERE kind = 'done') AS done
					   FROM load.ledger l WHERE l.id = i.id) l ON true
 WHERE i.queue = 'load'
   AND NOT (l.n = i.steps + 1 AND l.last = i.steps AND l.done = 1
			AND (i.state->>'n')::int = i.steps
			AND (i.result->>'n')::int = (i.state->>'total')::int
			AND i.steps + 1 = (i.state->>'total')::int)}),
		'0',
		"$db: every instance's steps, state and result agree with its ledger");
	is( $node->safe_psql($db,
			"SELECT count(*) FROM load.ledger l WHERE NOT EXISTS (SELECT 1 FROM gen_durable.instances i WHERE i.id = l.id AND i.queue = 'load')"
		),
		'0',
		"$db: no ledger row for an instance that is not there");
}

# every phase committed work in postgres; legacy only once updated
cmp_ok(committed('postgres', $mark{load}, $mark{stop}), '>', 0,
	'postgres: steps committed under the 0.6.0 library');
cmp_ok(committed('postgres', $mark{started}, $mark{alter}), '>', 0,
	'postgres: steps committed under the new library on the 0.6.0 schema');
cmp_ok(committed('postgres', $mark{altered}, $mark{producers_stop}), '>', 0,
	"postgres: steps committed at $current while the producers went on");
is(committed('legacy', $mark{load}, $mark{altered}), '0',
	'legacy: nothing committed at 0.5.0 (its pick needs the update)');
cmp_ok(committed('legacy', $mark{altered}, $mark{drained} + 1), '>', 0,
	'legacy: steps committed once updated');

# every error a worker or producer saw is one to retry: a connection lost
# to the restart (a call that ended after the stop and began before the
# server was up again, give or take), or in legacy before its update the
# hint to run ALTER EXTENSION UPDATE, whose text names the library that
# served the call (0.6.0 for a call that began before the restart, the
# current version for one that began after it).  A call of insert() in legacy while its
# update ran may also fail with "cache lookup failed for function": the
# update 0.5.0 -> 0.6.0 drops insert() and makes it again (a released
# script), and PostgreSQL locks no function a query calls, so a query
# planned with the old one meets its absence (XX000): docs/operations.md
# ("Upgrading") tells a producer to retry it when updating from before
# 0.6.0, so it counts as one to retry there, and only there.
my %class;
my @unexpected;
my $connection = qr/connection to server .* failed|server closed the connection unexpectedly|connection to server was lost|terminating connection due to administrator command|\b57P0[123]\b|the database system is (?:starting up|shutting down|not yet accepting connections)|no connection to the server/;
my $update_hint = qr/HINT: The installed gen_durable extension may be older than its library \((\d+\.\d+\.\d+)\): run ALTER EXTENSION gen_durable UPDATE\./;
my %hint_lib;
for my $file (glob("$outdir/*.errors"))
{
	my ($name) = $file =~ m{/([^/]+)\.errors$};
	my $legacy = $name =~ /^l/;
	open(my $e, '<', $file) or die;
	while (<$e>)
	{
		chomp;
		my ($t0, $t1, $call, $msg) = split /\t/, $_, 4;
		if ($msg =~ $update_hint)
		{
			my $lib = $1;
			$class{"$name $call: run ALTER EXTENSION UPDATE"}++;
			my $when = $t0 < $mark{stop} ? 'before' : $t0 > $mark{started} ? 'after' : 'during';
			$hint_lib{"$when $lib"}++;
			push @unexpected, "$name $call: the hint outside legacy before its update: $msg"
			  if !$legacy || $t0 > $mark{legacy_altered};
		}
		elsif ($msg =~ $connection)
		{
			$class{"$name $call: connection"}++;
			push @unexpected, "$name $call: a connection error away from the restart: $msg"
			  if $t1 < $mark{stop} || $t0 > $mark{started} + 5;
		}
		elsif ($legacy && $call eq 'insert' && $msg =~ /cache lookup failed for function/
			&& $t1 >= $mark{altered} && $t0 <= $mark{legacy_altered})
		{
			$class{"$name $call: cache lookup failed (insert() made again)"}++;
		}
		else
		{
			push @unexpected, "$name $call: $msg";
		}
	}
}
note "errors seen: " . join(', ', map { "$_ $class{$_}" } sort keys %class);
is(scalar(@unexpected), 0, 'every error a worker or producer saw is one to retry')
  or diag join("\n", @unexpected[0 .. ($#unexpected < 19 ? $#unexpected : 19)]);
ok((grep { /connection$/ } keys %class), 'the restart broke calls in progress (connection errors)');
ok($hint_lib{'before 0.6.0'} && $hint_lib{"after $current"} && !$hint_lib{"before $current"}
	  && !$hint_lib{'after 0.6.0'},
	'legacy\'s picks got the hint to update from the 0.6.0 library, then from the new one')
  or diag explain \%hint_lib;

# the upgraded catalogs equal a fresh install's: every member by kind,
# name and owner, the columns of the tables and the functions' ACLs (the
# full comparison is sql/upgrade.sql's)
my $shape = q{
SELECT x FROM (
  SELECT pg_describe_object(classid, objid, objsubid) AS x
    FROM pg_depend WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
     AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gen_durable')
  UNION ALL
  SELECT attrelid::regclass || '.' || attname || ' ' || format_type(atttypid, atttypmod) || ' ' || attnum
    FROM pg_attribute WHERE attnum > 0 AND NOT attisdropped
     AND attrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'gen_durable'::regnamespace)
  UNION ALL
  SELECT p.oid::regprocedure || ' ' || coalesce(p.proacl::text, '') || ' ' || p.prosecdef
    FROM pg_proc p WHERE p.pronamespace = 'gen_durable'::regnamespace
  UNION ALL
  SELECT conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace = 'gen_durable'::regnamespace
  UNION ALL
  SELECT c.relname || ' ' || coalesce(c.relacl::text, '')
    FROM pg_class c WHERE c.relnamespace = 'gen_durable'::regnamespace) s ORDER BY x};
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION gen_durable');
my @fresh = split /\n/, $node->safe_psql('fresh', $shape);
for my $db (qw(postgres legacy))
{
	is_deeply([ split /\n/, $node->safe_psql($db, $shape) ],
		\@fresh, "$db: the catalog is a fresh install's");
}
$node->safe_psql('postgres', 'DROP DATABASE fresh');

# ---- the shared workload checks, on the upgraded install ----------------------

eval { $p->{holder}->quit; };    # (its connection ended with the restart)
GdWorkload::check_workload($node, 'postgres', $p, label => 'upgraded under load');

note sprintf('phases: load %.1f s before the restart, %.1f s on the 0.6.0 schema, '
	  . 'drained %.1f s after the update; %.1f s in all',
	$mark{stop} - $mark{load}, $mark{alter} - $mark{started},
	$mark{drained} - $mark{altered}, time - $t_start);

$node->stop;
done_testing();
