# 015_memory_claims.pl - claims kept in memory (docs/contract.md §4.7)
# outliving what memory does not: a dead client, a long step, a crash of
# the server, a failover.  Nobody calls run_maintenance(): the maintenance
# worker does it all.
#
# On a primary with a streaming standby, gen_durable preloaded on both:
#  - a client holds 50 claims in memory (the rows stay runnable, the claims
#    view shows them); its backend is terminated: within 5 s the claims are
#    gone and the 50 rows are runnable with attempt 1;
#  - with gen_durable.memory_claim_max_age = 500ms, a client's 10 claims
#    are written to their rows within 5 s (executing, its worker, the same
#    claim numbers), and their outcomes then commit;
#  - two clients hold 100 claims each in memory (max age back to an hour),
#    and the server stops with -m immediate: after the restart, within 15 s
#    the 200 rows are runnable with attempt 1, the rest untouched at 0, and
#    an outcome of a claim made before the crash is stale;
#  - a client holds 30 claims in memory; once the standby has replayed
#    them its claims view lists them; the primary stops with -m immediate
#    and the standby is promoted: within 15 s the 30 rows are runnable
#    there with attempt 1;
#  - neither server's log has an ERROR, FATAL or PANIC line naming
#    gen_durable;
#  - on a server whose claim table has 8 slots, a pick of 20 claims 8 in
#    memory and 12 on their rows, a pick while it is full claims on the rows,
#    and every outcome commits.

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

sub poll_within
{
	my ($node, $db, $seconds, $query, $expected) = @_;
	local $PostgreSQL::Test::Utils::timeout_default = $seconds;
	return $node->poll_query_until($db, $query, $expected);
}

# hold: a background session that picks batch jobs of queue q as worker w
# (10 min lease) and stays connected; returns the session and the claims
sub hold
{
	my ($node, $q, $w, $batch) = @_;
	my $s = $node->background_psql('postgres');
	my $claims = $s->query_safe(
		"SELECT string_agg(id || ':' || claim, ',') FROM gen_durable.pick('$q', '$w', batch => $batch, lease => '10 min')"
	);
	return ($s, [ split /,/, $claims ]);
}

my $primary = PostgreSQL::Test::Cluster->new('mem_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'gen_durable'
gen_durable.maintenance_interval = '1s'
gen_durable.memory_claim_max_age = '1h'
log_line_prefix = '%m [%p] %b %e '
));
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION gen_durable');
$primary->safe_psql('postgres', q{
SELECT count(*) FROM gen_durable.insert_many((
  SELECT jsonb_agg(jsonb_build_object('fsm', 'job', 'queue', q))
    FROM unnest('{dead,long,crash,failover}'::text[]) q, generate_series(1, 300)))});

# --- a dead client ------------------------------------------------------------

my ($dead, $dead_claims) = hold($primary, 'dead', 'client-dead', 50);
is(scalar(@$dead_claims), 50, 'the client holds 50 claims');
is( $primary->safe_psql(
		'postgres', q{
SELECT count(*) FILTER (WHERE c.in_memory), count(*) FILTER (WHERE i.status = 'runnable')
  FROM gen_durable.claims c JOIN gen_durable.instances i USING (id) WHERE c.queue = 'dead'}),
	'50|50',
	'they are in memory, their rows runnable');
my $pid = $dead->query_safe('SELECT pg_backend_pid()');
$primary->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$dead->{run}->finish;
ok( poll_within(
		$primary, 'postgres', 5, q{
SELECT count(*) FILTER (WHERE attempt = 1 AND status = 'runnable')
       + (SELECT count(*) FROM gen_durable.claims WHERE queue = 'dead')
  FROM gen_durable.instances WHERE queue = 'dead'}, '50'),
	'within 5 s of the client\'s end its 50 claims are back, attempt 1');

# --- a long step -------------------------------------------------------------

$primary->safe_psql('postgres',
	"ALTER SYSTEM SET gen_durable.memory_claim_max_age = '500ms'; SELECT pg_reload_conf()");
my ($long, $long_claims) = hold($primary, 'long', 'client-long', 10);
ok( poll_within(
		$primary, 'postgres', 5, q{
SELECT count(*) FROM gen_durable.instances
 WHERE queue = 'long' AND status = 'executing' AND locked_by = 'client-long'}, '10'),
	'a claim older than memory_claim_max_age is written to its row');
my @numbers = map { (split /:/)[1] } @$long_claims;
my $in_list = join(',', map { (split /:/)[0] } @$long_claims);
is( $primary->safe_psql(
		'postgres',
		"SELECT string_agg(claim::text, ',' ORDER BY id) FROM gen_durable.instances WHERE id IN ($in_list)"),
	join(',', @numbers),
	'with the claim numbers the pick handed out');
is( $long->query_safe(
		"SELECT string_agg(applied, ',') FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object("
		  . "'id', id, 'worker', 'client-long', 'kind', 'done', 'claim', claim)) FROM gen_durable.instances WHERE id IN ($in_list)))"
	),
	join(',', ('ok') x 10),
	'their outcomes commit on the rows');
$long->quit;
$primary->safe_psql('postgres',
	"ALTER SYSTEM RESET gen_durable.memory_claim_max_age; SELECT pg_reload_conf()");

# --- a crash of the server ------------------------------------------------------

my ($c1, $crash1) = hold($primary, 'crash', 'client-c1', 100);
my ($c2, $crash2) = hold($primary, 'crash', 'client-c2', 100);
is(scalar(@$crash1) + scalar(@$crash2), 200, 'two clients hold 100 claims each');
is( $primary->safe_psql(
		'postgres', "SELECT count(*) FROM gen_durable.claims WHERE queue = 'crash' AND in_memory"),
	'200',
	'all in memory');
# the pick's WAL record reaches disk within wal_writer_delay
usleep(500_000);
$primary->stop('immediate');
$c1->{run}->finish;
$c2->{run}->finish;
$primary->start;
ok( poll_within(
		$primary, 'postgres', 15, q{
SELECT string_agg(attempt || ':' || status || ':' || n, ' ' ORDER BY attempt)
  FROM (SELECT attempt, status, count(*) n FROM gen_durable.instances
         WHERE queue = 'crash' GROUP BY 1, 2) s}, '0:runnable:100 1:runnable:200'),
	'after the restart the 200 claims are back, attempt 1; the other 100 rows untouched');
my ($id, $claim) = split /:/, $crash1->[0];
is( $primary->safe_psql(
		'postgres',
		"SELECT applied FROM gen_durable.flush('[{\"id\": $id, \"worker\": \"client-c1\", \"kind\": \"done\", \"claim\": $claim}]')"
	),
	'stale',
	'an outcome of a claim made before the crash is stale');

# --- a failover -------------------------------------------------------------

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('mem_standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
my ($f, $failover) = hold($primary, 'failover', 'client-f', 30);
is(scalar(@$failover), 30, 'a client holds 30 claims');
# a commit after the pick, so that its record is sent on
$primary->safe_psql('postgres', "SELECT gen_durable.insert('job', queue => 'other')");
$primary->wait_for_catchup($standby, 'replay');
is( $standby->safe_psql(
		'postgres', "SELECT count(*) FROM gen_durable._memory_claims() WHERE worker = 'client-f'"),
	'30',
	'the standby has replayed them into its claim table');
$primary->stop('immediate');
$f->{run}->finish;
$standby->promote;
ok( poll_within(
		$standby, 'postgres', 15, q{
SELECT count(*) FROM gen_durable.instances
 WHERE queue = 'failover' AND status = 'runnable' AND attempt = 1}, '30'),
	'after the promotion the 30 claims are back there, attempt 1');

for my $node ($primary, $standby)
{
	my @bad = grep { /(ERROR|FATAL|PANIC)/ && /gen_durable/ } split /\n/, slurp_file($node->logfile);
	is(join("\n", @bad), '', $node->name . ': no ERROR, FATAL or PANIC of gen_durable in the log');
}

$standby->stop;

# --- a full claim table -----------------------------------------------------

# with room for 8 claims, a pick of 20 claims 8 in memory and the rest on
# their rows, and every outcome commits; a later pick, while the table is
# full, claims on the rows
my $small = PostgreSQL::Test::Cluster->new('mem_small');
$small->init;
$small->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'gen_durable'
gen_durable.memory_claims = 8
gen_durable.memory_claim_max_age = '1h'
));
$small->start;
$small->safe_psql('postgres', 'CREATE EXTENSION gen_durable');
$small->safe_psql('postgres', q{
SELECT count(*) FROM gen_durable.insert_many((
  SELECT jsonb_agg(jsonb_build_object('fsm', 'job', 'queue', 'small')) FROM generate_series(1, 30)))});
my $s1 = $small->background_psql('postgres');
is( $s1->query_safe(q{
CREATE TEMP TABLE got AS SELECT id, claim FROM gen_durable.pick('small', 's1', batch => 20, lease => '10 min');
SELECT count(*) FROM got}), '20', 'a pick of 20 with room for 8 claims 20');
is( $small->safe_psql(
		'postgres', q{SELECT string_agg(in_memory || ':' || n, ' ' ORDER BY in_memory)
  FROM (SELECT in_memory, count(*) n FROM gen_durable.claims GROUP BY 1) c}),
	'false:12 true:8',
	'8 in memory, 12 on their rows');
is( $small->safe_psql(
		'postgres', "SELECT count(*) FROM gen_durable.pick('small', 's2', batch => 20)"),
	'10', 'a pick while the table is full claims the other 10 on their rows');
is( $s1->query_safe(q{
SELECT string_agg(applied || ':' || n, ' ') FROM (
  SELECT f.applied, count(*) n FROM gen_durable.flush((
    SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 's1', 'kind', 'done', 'claim', claim)) FROM got)) f
   GROUP BY 1) x}), 'ok:20', 'the 20 outcomes commit, both kinds');
$s1->quit;
is($small->safe_psql('postgres', "SELECT count(*) FROM gen_durable._memory_claims()"),
	'0', 'the table is empty again');
$small->stop;

done_testing();
