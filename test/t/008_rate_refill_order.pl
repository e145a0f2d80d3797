# 008_rate_refill_order.pl - a rate admission that waits for its bucket
# refills up to the moment it holds the lock, never to an earlier one.
#
# Admission A starts, then waits (here: behind a table lock another
# session queued) while admission B refills and debits the same bucket and
# commits two seconds later.  If A took its refill clock before the wait,
# it would see B's later last_refill, add no refill, and write its earlier
# clock back: the next admission would grant those two seconds of refill
# again.  So right after A, a pick of 20 rows must get only what the burst
# allows: the tokens granted from B's pick on stay within burst + rate * w.
#
# The wait is made deterministic with locks on gen_durable.buckets: B holds
# a row-share lock in an open transaction, H queues an EXCLUSIVE lock behind
# it, and A's lock statement queues behind H until B commits.

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('refill');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'gen_durable'\n"
	  . "gen_durable.maintenance_worker = off\n"
	  . "gen_durable.reclaim_on_disconnect = off\n");
$node->start;

sub sql { return $node->safe_psql('postgres', $_[0]); }

# 10 tokens a second, burst 10; the bucket is warm and full
sql(q{
	CREATE EXTENSION gen_durable;
	SELECT gen_durable.set_rate_limit('x', 10, '1 second', 10, 1);
	SELECT gen_durable.insert('j', queue => 'qw', rate_limit => 'x');
	SELECT gen_durable.insert('j', queue => 'qa', rate_limit => 'x');
	SELECT gen_durable.insert('j', queue => 'qb', rate_limit => 'x');
	SELECT count(gen_durable.insert('j', queue => 'qc', rate_limit => 'x'))
	  FROM generate_series(1, 20);
	SELECT count(*) FROM gen_durable.pick('qw', 'warm', 1);
});
usleep(500_000);

my $b = $node->background_psql('postgres');
$b->query_safe('BEGIN');
$b->query_safe('SELECT 1 FROM gen_durable.buckets WHERE false FOR UPDATE');

# start_queued runs $sql in a new session and returns it once the session
# waits for a lock of $mode on gen_durable.buckets
sub start_queued
{
	my ($sql, $mode, $what) = @_;
	my $s = $node->background_psql('postgres', wait => 0);
	$s->query_until(qr/go/, "\\echo go\n$sql\n");
	ok( $node->poll_query_until(
			'postgres', qq{SELECT count(*) FROM pg_locks WHERE NOT granted
			   AND mode = '$mode' AND relation = 'gen_durable.buckets'::regclass}, '1'),
		$what);
	return $s;
}

my $h = start_queued('BEGIN; LOCK TABLE gen_durable.buckets IN EXCLUSIVE MODE; COMMIT;',
	'ExclusiveLock', 'H queues its exclusive lock behind B');
my $a = start_queued(q{SELECT count(*) FROM gen_durable.pick('qa', 'A', 1);},
	'RowShareLock', 'A waits for the buckets behind H');

# two seconds of refill that only B may take
usleep(2_000_000);
my $t0 = sql('SELECT clock_timestamp()');
is($b->query_safe(q{SELECT count(*) FROM gen_durable.pick('qb', 'B', 1)}), '1',
	'B is granted a token');
$b->query_safe('COMMIT');
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) FROM gen_durable.instances
		   WHERE queue = 'qa' AND status = 'executing'}, '1'),
	'A is granted a token after the wait');

my $c = sql(q{SELECT count(*) FROM gen_durable.pick('qc', 'C', 20)});
my $span = sql("SELECT extract(epoch FROM clock_timestamp() - '$t0'::timestamptz)");
my $granted = 2 + $c;
cmp_ok($granted, '<=', 10 + 10 * $span,
	"tokens granted from B on ($granted in $span s) stay within burst + rate * w");
cmp_ok($c, '>=', 1, 'the pick after A is still granted what is left');

$a->quit;
$h->quit;
$b->quit;
$node->stop;
done_testing();
