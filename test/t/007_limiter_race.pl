# 007_limiter_race.pl - the limiter under racing pickers (D7, D8, §4.2).
#
# Four picker sessions run at once, each a PL/pgSQL loop of pick(), a hold
# of 1-5 ms, then a flush of 'done' for what it picked in a transaction of
# its own (as a worker would); each pick logs its claims in the pick's own
# transaction.  The four are released together from an advisory-lock
# barrier inside their loop.  A sampler session meanwhile takes, every few
# ms, one statement (so one snapshot) that counts the executing rows per
# concurrency key, and per (key, gate shard) against the gate buckets.  The
# maintenance worker runs every 500 ms, so its reconcile and rate GC race
# the pickers too.
#
#  - Cold-mint race: 400 rows of 50 brand-new keys of gate 'c' (K = 1), 8
#    rows per key, ordered so that every pick (batch 50 in this phase)
#    names all 50 keys: the first picks of the four all mint the same cold
#    keys at once.  The even keys also carry a brand-new rate key
#    'cr:k<n>' (4 per second, burst 4, 2 shards; a key's rows outlast its
#    burst).  No c key is ever seen with more than one executing row, the
#    buckets always equal K - executing, and at quiescence every c key is
#    either gone (cold = full) or one shard with its slot free.  (How many
#    admissions merged into a racing mint and retried is reported.)
#  - Main run: 10,000 rows in queue 'lim', pick batch 10: gate 'g' (K = 3,
#    2 shards) on the hot key 'g:hot' and on 20 partitions 'g:p<n>'; rate
#    limit 'r' (200 per second, burst 20, 2 shards) on a share of the rows,
#    a quarter of them of weight 2; some rows with both; the rest
#    unlimited.  No g key is ever seen above K and the hot key is seen at K
#    (the gate was saturated); in every sample every gate bucket has
#    available = capacity - executing holders of that (key, shard).
#  - Rate: for every window [t, t+w] (w from 50 ms to the whole run,
#    anchored at every claim, per rate key) the weight of the claims that
#    certainly fell into it is at most burst + rate * w.  A claim's
#    admission instant lies between the start of its pick (the flip's
#    instances.updated_at) and the log row written right after the pick,
#    so a claim counts in a window only when that whole interval lies
#    inside it: the check cannot fail by clock slop, only by over-admission.
#  - Afterwards: all rows done, each claimed exactly once; no error in any
#    picker (pick and flush errors are caught, logged and retried, then
#    asserted absent) nor in the server log; every gate bucket full, before
#    and after run_maintenance(); throttled_conc and throttled_rate moved.

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

# the policies (K per gate name; rate and burst per rate name)
my %gate_k = (g => 3, c => 1);
my %rate_policy = (r => { rate => 200, burst => 20 }, cr => { rate => 4, burst => 4 });

my $barrier = 4242;    # advisory lock the pickers start behind

# pump background psqls until all have exited, at most $seconds; returns
# whether they all did
sub wait_all
{
	my ($procs, $seconds) = @_;
	my $until = time + $seconds;
	while (time < $until)
	{
		my $running = 0;
		for my $p (@$procs)
		{
			next if $p->{done};
			# psql reads the script from a pipe: it exits once that is closed
			# (finish closes it), so a script that printed its last line is done
			if ($p->{h}->pumpable && $p->{out} !~ /-finished\n\z/)
			{
				eval { $p->{h}->pump_nb; };
				$running++;
			}
			else
			{
				eval { $p->{h}->finish; };
				$p->{rc} = $p->{h}->result(0);
				$p->{done} = 1;
			}
		}
		return 1 if !$running;
		usleep(10_000);
	}
	for my $p (@$procs)
	{
		next if $p->{done};
		$p->{h}->kill_kill;
		$p->{done} = 1;
		$p->{rc} = -1;
	}
	return 0;
}

# one picker: pick, log the claims, hold, flush done; until its queue has
# nothing runnable or executing left
my $picker_sql = <<'SQL';
DO $do$
DECLARE
	v_ids bigint[];
	v_ok bool;
	v_tries int;
	v_picks int := 0;
	v_empty int := 0;
	v_claimed int := 0;
	v_started timestamptz := clock_timestamp();
	v_deadline timestamptz;
BEGIN
	-- the barrier: wait here until the test lets all four go at once
	PERFORM pg_advisory_lock_shared(@BARRIER@);
	PERFORM pg_advisory_unlock_shared(@BARRIER@);
	v_started := clock_timestamp();
	v_deadline := clock_timestamp() + interval '@DEADLINE@ seconds';
	LOOP
		IF clock_timestamp() > v_deadline THEN
			RAISE EXCEPTION 'picker @W@ (@Q@): deadline passed with work left';
		END IF;
		v_ids := NULL;
		BEGIN
			SELECT array_agg(p.id) INTO v_ids FROM gen_durable.pick('@Q@', '@W@', @BATCH@) p;
		EXCEPTION WHEN OTHERS THEN
			v_ids := NULL;
			INSERT INTO picker_errors
				VALUES ('@Q@', '@W@', clock_timestamp(), 'pick', SQLSTATE, SQLERRM);
		END;
		IF v_ids IS NULL THEN
			COMMIT;
			v_empty := v_empty + 1;
			EXIT WHEN NOT EXISTS (SELECT 1 FROM gen_durable.instances
								   WHERE queue = '@Q@' AND status = 'runnable')
				  AND NOT EXISTS (SELECT 1 FROM gen_durable.instances
								   WHERE queue = '@Q@' AND status = 'executing');
			PERFORM pg_sleep(0.002);
			CONTINUE;
		END IF;
		-- in the pick's transaction: the flip set updated_at to the start
		-- of the pick, clock_timestamp() is now, just after it
		INSERT INTO claim_log (id, phase, worker, pick_start, logged_at,
							   concurrency_key, rate_limit, weight)
			SELECT i.id, '@Q@', '@W@', i.updated_at, clock_timestamp(),
				   i.concurrency_key, i.rate_limit, i.weight
			  FROM gen_durable.instances i WHERE i.id = ANY (v_ids);
		COMMIT;
		v_picks := v_picks + 1;
		v_claimed := v_claimed + cardinality(v_ids);
		PERFORM pg_sleep(0.001 + random() * 0.004);
		v_tries := 0;
		LOOP
			v_ok := true;
			v_tries := v_tries + 1;
			BEGIN
				INSERT INTO picker_errors
					SELECT '@Q@', '@W@', clock_timestamp(), 'flush entry ' || f.id,
						   f.applied, f.detail
					  FROM gen_durable.flush((
						SELECT jsonb_agg(jsonb_build_object('id', x, 'worker', '@W@',
															'kind', 'done'))
						  FROM unnest(v_ids) x)) f
					 WHERE f.applied <> 'ok';
			EXCEPTION WHEN OTHERS THEN
				v_ok := false;
				INSERT INTO picker_errors
					VALUES ('@Q@', '@W@', clock_timestamp(), 'flush', SQLSTATE, SQLERRM);
			END;
			COMMIT;
			EXIT WHEN v_ok;
			IF v_tries >= 5 THEN
				RAISE EXCEPTION 'picker @W@ (@Q@): flush failed % times', v_tries;
			END IF;
		END LOOP;
	END LOOP;
	INSERT INTO picker_stats
		VALUES ('@Q@', '@W@', v_picks, v_empty, v_claimed, v_started, clock_timestamp());
END
$do$;
SELECT 'picker-finished';
SQL

# the sampler: one statement per sample, so one snapshot
my $sampler_sql = <<'SQL';
DO $do$
DECLARE
	v_stop bool;
	v_deadline timestamptz := clock_timestamp() + interval '@DEADLINE@ seconds';
BEGIN
	LOOP
		WITH e AS (
			SELECT concurrency_key AS key, concurrency_shard AS shard, count(*) AS n
			  FROM gen_durable.instances
			 WHERE status = 'executing' AND concurrency_key IS NOT NULL
			 GROUP BY 1, 2
		), k AS (
			SELECT e.key, sum(e.n)::int AS n, min(l.capacity)::int AS cap
			  FROM e LEFT JOIN gen_durable.limits l
					 ON l.kind = 'conc' AND l.name = split_part(e.key, ':', 1)
			 GROUP BY e.key
		), b AS (
			SELECT key, shard, capacity, available FROM gen_durable.buckets WHERE kind = 'conc'
		), d AS (
			SELECT coalesce(b.key, e.key) AS key, coalesce(b.shard, e.shard) AS shard,
				   b.capacity, b.available, coalesce(e.n, 0) AS held
			  FROM b FULL JOIN e ON e.key = b.key AND e.shard = b.shard
			 WHERE coalesce(b.capacity, 0) - coalesce(b.available, 0) <> coalesce(e.n, 0)
		), mx AS (
			INSERT INTO conc_max AS m (key, max_exec, busy_samples, at_cap_samples)
			SELECT key, n, 1, coalesce((n >= cap)::int, 0) FROM k
			ON CONFLICT (key) DO UPDATE
			   SET max_exec = greatest(m.max_exec, EXCLUDED.max_exec),
				   busy_samples = m.busy_samples + 1,
				   at_cap_samples = m.at_cap_samples + EXCLUDED.at_cap_samples
			RETURNING 1
		), dr AS (
			INSERT INTO drift_log (at, key, shard, capacity, available, held)
			SELECT clock_timestamp(), key, shard, capacity, available, held FROM d
			RETURNING 1
		)
		UPDATE sampler
		   SET samples = samples + 1,
			   max_total = greatest(max_total, (SELECT coalesce(sum(n), 0) FROM k)),
			   first_at = coalesce(first_at, clock_timestamp()),
			   last_at = clock_timestamp();
		COMMIT;
		SELECT stop INTO v_stop FROM control;
		EXIT WHEN v_stop OR clock_timestamp() > v_deadline;
		PERFORM pg_sleep(0.002);
	END LOOP;
END
$do$;
SELECT 'sampler-finished';
SQL

sub fill
{
	my ($sql, %v) = @_;
	$sql =~ s/\@(\w+)\@/exists $v{$1} ? $v{$1} : die "no value for $1"/ge;
	return $sql;
}

my $t_start = time;
my $node = PostgreSQL::Test::Cluster->new('limiter_race');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'gen_durable'
fsync = off
full_page_writes = off
max_connections = 20
gen_durable.maintenance_interval = '500ms'
));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION gen_durable');

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub stat_value
{
	my ($counter) = @_;
	return sql("SELECT value FROM gen_durable.stats WHERE counter = '$counter'");
}

sql(<<'SQL');
CREATE TABLE claim_log (id bigint, phase text, worker text, pick_start timestamptz,
	logged_at timestamptz, concurrency_key text, rate_limit text, weight float8);
CREATE TABLE conc_max (key text PRIMARY KEY, max_exec int, busy_samples int,
	at_cap_samples int);
CREATE TABLE drift_log (at timestamptz, key text, shard int, capacity float8,
	available float8, held bigint);
CREATE TABLE sampler (samples int, max_total int, first_at timestamptz, last_at timestamptz);
INSERT INTO sampler VALUES (0, 0, NULL, NULL);
CREATE TABLE control (stop bool);
INSERT INTO control VALUES (false);
CREATE TABLE picker_stats (phase text, worker text, picks int, empty_picks int,
	claimed int, started timestamptz, finished timestamptz);
CREATE TABLE picker_errors (phase text, worker text, at timestamptz, what text,
	sqlstate text, message text);
SELECT gen_durable.set_concurrency_limit('g', 3, 2);
SELECT gen_durable.set_concurrency_limit('c', 1, 1);
SELECT gen_durable.set_rate_limit('r', 200, '1 second', 20, 2);
SELECT gen_durable.set_rate_limit('cr', 4, '1 second', 4, 2);
SQL

# the cold phase: 8 rows per key, row j has key c:k<j mod 50>, so that
# each run of 50 rows (a pick of the cold phase) names all 50 keys
sql(<<'SQL');
SELECT count(*) FROM gen_durable.insert_many((
	SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
			'fsm', 'job', 'queue', 'cold',
			'run_at', now() - interval '1 hour' + pos * interval '1 ms',
			'concurrency_key', 'c:k' || key,
			'rate_limit', CASE WHEN key % 2 = 0 THEN 'cr:k' || key END)))
	  FROM (SELECT pos, pos % 50 AS key FROM generate_series(0, 399) pos) s));
SQL

# the main run: 10,000 rows in a random order
my $mix = sql(<<'SQL');
SELECT setseed(0.42);
WITH r AS (
	SELECT pos, random() AS c, random() AS w, (random() * 20)::int % 20 AS part
	  FROM generate_series(1, 10000) pos
), s AS (
	SELECT pos,
		   CASE WHEN c < 0.09 THEN 'g:hot'
				WHEN c < 0.39 THEN 'g:p' || part
				WHEN c < 0.51 THEN NULL
				WHEN c < 0.55 THEN 'g:p' || part
				WHEN c < 0.56 THEN 'g:hot' END AS ck,
		   CASE WHEN c >= 0.39 AND c < 0.56 THEN 'r' END AS rl,
		   CASE WHEN c >= 0.39 AND c < 0.56 AND w < 0.25 THEN 2 ELSE 1 END AS weight
	  FROM r
), ins AS (
	SELECT * FROM gen_durable.insert_many((
		SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
				'fsm', 'job', 'queue', 'lim',
				'run_at', now() - interval '1 hour' + pos * interval '1 ms',
				'concurrency_key', ck, 'rate_limit', rl, 'weight', weight)))
		  FROM s))
)
SELECT (SELECT count(*) FROM ins) || ' rows: '
	|| count(*) FILTER (WHERE ck = 'g:hot' AND rl IS NULL) || ' hot, '
	|| count(*) FILTER (WHERE ck LIKE 'g:p%' AND rl IS NULL) || ' partitioned, '
	|| count(*) FILTER (WHERE ck IS NULL AND rl IS NOT NULL) || ' rate only, '
	|| count(*) FILTER (WHERE ck IS NOT NULL AND rl IS NOT NULL) || ' gate and rate, '
	|| count(*) FILTER (WHERE ck IS NULL AND rl IS NULL) || ' unlimited; rate weight '
	|| sum(weight) FILTER (WHERE rl IS NOT NULL)
  FROM s;
SQL
$mix =~ s/^\s+//;
like($mix, qr/^10000 rows: /, 'inserted 10,000 rows for the main run') or diag $mix;
note "main run: $mix";
my ($rate_weight) = $mix =~ /rate weight (\d+)/;
is(sql("SELECT count(*) FROM gen_durable.buckets"), '0', 'no bucket exists yet: every key is cold');

# the sampler runs through both phases; $gate holds the pickers' barrier
my $sampler = start_psql($node, fill($sampler_sql, DEADLINE => 150), 180);
my $gate = $node->background_psql('postgres');

# start 4 pickers on a queue behind the barrier, release them together and
# wait for them to drain the queue; returns how long they took
sub run_pickers
{
	my ($queue, $batch, $deadline) = @_;
	my @procs;
	$gate->query_safe("SELECT pg_advisory_lock($barrier)");
	for my $w (1 .. 4)
	{
		push @procs,
		  start_psql(
			$node,
			fill(
				$picker_sql,
				BARRIER => $barrier,
				DEADLINE => $deadline,
				Q => $queue,
				BATCH => $batch,
				W => "$queue-w$w"),
			$deadline + 30);
	}
	$node->poll_query_until('postgres',
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $barrier "
		  . "AND NOT granted", '4')
	  or die "the pickers did not reach the barrier";
	my $t0 = time;
	$gate->query_safe("SELECT pg_advisory_unlock($barrier)");
	my $all = wait_all(\@procs, $deadline + 20);
	my $elapsed = time - $t0;
	ok($all, "$queue: the 4 pickers finished");
	for my $p (@procs)
	{
		is($p->{rc}, 0, "$queue: a picker exited cleanly") or diag $p->{err};
		is($p->{out}, "picker-finished\n", "$queue: the picker's output") or diag $p->{out};
		is($p->{err}, '', "$queue: nothing on the picker's stderr");
	}
	return $elapsed;
}

# --- cold-mint race ---------------------------------------------------------

my $contended0 = stat_value('limiter_contended');
my $cold_elapsed = run_pickers('cold', 50, 40);
note sprintf('cold phase: 400 rows in %.2f s', $cold_elapsed);
is(sql("SELECT count(*) FILTER (WHERE status = 'done') || '/' || count(*) "
	  . "FROM gen_durable.instances WHERE queue = 'cold'"),
	'400/400', 'cold: every row is done');
is(sql("SELECT count(*) || '/' || count(DISTINCT id) FROM claim_log WHERE phase = 'cold'"),
	'400/400', 'cold: every row was claimed exactly once');
my $cold_contended = stat_value('limiter_contended') - $contended0;
note "cold phase: $cold_contended admission attempts retried after a racing mint";
is(sql("SELECT coalesce(max(max_exec), 0) FROM conc_max WHERE key LIKE 'c:%'"), '1',
	'cold: no c key was ever seen with more than 1 executing (K = 1), and some with 1');
note 'cold phase: '
  . sql("SELECT count(*) || ' c keys seen executing, in ' || sum(busy_samples) "
	  . "|| ' (key, sample) pairs' FROM conc_max WHERE key LIKE 'c:%'");
is(sql("SELECT count(*) FROM drift_log WHERE key LIKE 'c:%'"), '0',
	'cold: in every sample each c bucket had available = capacity - executing holders')
  or diag sql("SELECT * FROM drift_log WHERE key LIKE 'c:%' ORDER BY at LIMIT 20");
# quiescent: nothing executes, so every c key is cold (no rows) or one free slot
is( sql(<<'SQL'),
SELECT count(*) FROM (
	SELECT k.key, count(b.shard) AS shards, coalesce(sum(b.available), 1) AS avail,
		   coalesce(min(b.capacity), 1) AS cap,
		   (SELECT count(*) FROM gen_durable.instances i
			 WHERE i.concurrency_key = k.key AND i.status = 'executing') AS executing
	  FROM (SELECT 'c:k' || n AS key FROM generate_series(0, 49) n) k
	  LEFT JOIN gen_durable.buckets b ON b.kind = 'conc' AND b.key = k.key
	 GROUP BY k.key) x
 WHERE shards > 1 OR cap <> 1 OR avail <> 1 - executing OR executing <> 0
SQL
	'0', 'cold: at quiescence every c key has at most 1 shard and available = K - executing = 1');
note 'cold phase: '
  . sql("SELECT count(DISTINCT key) FROM gen_durable.buckets WHERE kind = 'conc' AND key LIKE 'c:%'")
  . ' of 50 c keys still have bucket rows (the others were reconciled away as idle-full)';

# --- main run -----------------------------------------------------------------

my %stat0 = map { $_ => stat_value($_) }
  qw(throttled_conc throttled_rate limiter_contended claim_contended claimed);
my $main_elapsed = run_pickers('lim', 10, 55);
$gate->quit;
sql('UPDATE control SET stop = true');
ok(wait_all([$sampler], 20), 'the sampler stopped');
is($sampler->{out}, "sampler-finished\n", 'the sampler ran to the end') or diag $sampler->{err};
is($sampler->{err}, '', 'nothing on the sampler\'s stderr');
my %delta = map { $_ => stat_value($_) - $stat0{$_} } keys %stat0;
note sprintf('main run: 10,000 rows in %.2f s (%.0f rows/s)', $main_elapsed,
	10000 / $main_elapsed);
note 'main run stats: ' . join(', ', map { "$_ +$delta{$_}" } sort keys %delta);

is(sql("SELECT count(*) FILTER (WHERE status = 'done') || '/' || count(*) "
	  . "FROM gen_durable.instances WHERE queue = 'lim'"),
	'10000/10000', 'main: all 10,000 rows are done');
is(sql("SELECT count(*) || '/' || count(DISTINCT id) FROM claim_log WHERE phase = 'lim'"),
	'10000/10000', 'main: every row was claimed exactly once');
is(sql('SELECT count(*) FROM picker_errors'), '0', 'no pick or flush failed in any picker')
  or diag sql('SELECT * FROM picker_errors ORDER BY at LIMIT 30');
note 'pickers: '
  . sql("SELECT string_agg(worker || ' ' || picks || ' picks/' || empty_picks || ' empty/' "
	  . "|| claimed || ' rows', '; ' ORDER BY worker) FROM picker_stats");

# the gate, as sampled
my $samples = sql("SELECT samples || ' samples, one per '"
	  . " || round((extract(epoch FROM last_at - first_at) * 1000 / greatest(samples - 1, 1))::numeric, 2)"
	  . " || ' ms, at most ' || max_total || ' gated rows executing at once' FROM sampler");
note "sampler: $samples";
my ($nsamples) = $samples =~ /^(\d+)/;
cmp_ok($nsamples, '>', 1000, 'the sampler took more than 1000 samples');
for my $name (sort keys %gate_k)
{
	is( sql("SELECT count(*) FROM conc_max WHERE key LIKE '$name:%' AND max_exec > $gate_k{$name}"),
		'0', "no key of gate $name was ever seen with more than $gate_k{$name} executing")
	  or diag sql("SELECT * FROM conc_max WHERE key LIKE '$name:%' AND max_exec > $gate_k{$name}");
}
is(sql("SELECT max_exec FROM conc_max WHERE key = 'g:hot'"), '3',
	'the hot key was seen at K = 3: the gate was saturated');
note 'gate g: '
  . sql("SELECT string_agg(key || ' max ' || max_exec || ' (at K in ' || at_cap_samples || '/' "
	  . "|| busy_samples || ' busy samples)', ', ' ORDER BY key) FROM conc_max "
	  . "WHERE key IN ('g:hot', 'g:p0', 'g:p1')");
note 'gate g: max executing per key over all g keys: '
  . sql("SELECT string_agg(max_exec || ' on ' || cnt || ' keys', ', ' ORDER BY max_exec) FROM "
	  . "(SELECT max_exec, count(*) AS cnt FROM conc_max WHERE key LIKE 'g:%' GROUP BY max_exec) x");
is(sql('SELECT count(*) FROM drift_log'), '0',
	'in every sample, every gate bucket had available = capacity - executing holders')
  or diag sql('SELECT * FROM drift_log ORDER BY at LIMIT 30');

# --- the rate limits, from the claim log ---------------------------------------

# every claim of a rate key: [u, l] brackets its admission instant
my @wlens = (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 'all');
my %claims;
for my $row (split /\n/, sql(<<'SQL'))
SELECT rate_limit,
	   extract(epoch FROM pick_start - min(pick_start) OVER ()),
	   extract(epoch FROM logged_at - min(pick_start) OVER ()),
	   weight
  FROM claim_log WHERE rate_limit IS NOT NULL ORDER BY rate_limit, pick_start
SQL
{
	my ($key, $u, $l, $wt) = split /\|/, $row;
	push @{ $claims{$key} }, [ $u, $l, $wt ];
}
my $rate_claims = scalar @{ $claims{r} // [] };
is($rate_claims, sql("SELECT count(*) FROM gen_durable.instances WHERE queue = 'lim' "
	  . "AND rate_limit IS NOT NULL"), 'main: every rate-limited row has its claim logged');
my @spans = sort { $a <=> $b } map { $_->[1] - $_->[0] } map { @$_ } values %claims;
note sprintf('claim brackets (pick start .. logged): median %.2f ms, p99 %.2f ms, max %.2f ms',
	1000 * $spans[ int(@spans / 2) ], 1000 * $spans[ int(@spans * 0.99) ], 1000 * $spans[-1]);

my ($windows, @over, %worst) = (0);
for my $key (sort keys %claims)
{
	my ($name) = split /:/, $key;
	my $pol = $rate_policy{$name} or die "no policy for $key";
	my $c = $claims{$key};
	my $n = @$c;
	# prefix sums of the weights, and the longest bracket: a claim that
	# starts at least that long before a window's end surely ends in it
	my @pre = (0);
	push @pre, $pre[-1] + $_->[2] for @$c;
	my $maxspan = 0;
	for (@$c) { $maxspan = $_->[1] - $_->[0] if $_->[1] - $_->[0] > $maxspan; }
	for my $wl (@wlens)
	{
		my $w = $wl eq 'all' ? $c->[-1][1] - $c->[0][0] : $wl;
		my $bound = $pol->{burst} + $pol->{rate} * $w;
		my $wk = $name eq 'r' ? "r $wl" : "cr:* $wl";
		my ($j0, $ja, $je) = (0, 0, 0);
		for my $i (0 .. $n - 1)
		{
			my $t = $c->[$i][0];
			my $end = $t + $w;
			$j0++ while $c->[$j0][0] < $t;    # first claim starting at t
			$je++ while $je < $n && $c->[$je][0] <= $end;
			$ja++ while $ja < $n && $c->[$ja][0] <= $end - $maxspan;
			my $sure = $ja > $j0 ? $ja : $j0;
			my $sum = $pre[$sure] - $pre[$j0];
			for my $j ($sure .. $je - 1)
			{
				$sum += $c->[$j][2] if $c->[$j][1] <= $end;
			}
			$windows++;
			$worst{$wk} = [ $sum, $bound ]
			  if !$worst{$wk} || $sum / $bound > $worst{$wk}[0] / $worst{$wk}[1];
			push @over,
			  sprintf('%s: %s tokens in [%.6f, +%.3f s], bound %.3f', $key, $sum, $t, $w, $bound)
			  if $sum > $bound + 1e-6;
		}
	}
}
is(scalar(@over), 0,
	"rate: in none of $windows windows did the claims exceed burst + rate * w")
  or diag join("\n", @over[ 0 .. ($#over < 30 ? $#over : 29) ]);
note 'rate: worst window per length (claimed weight / bound): '
  . join(', ', map { sprintf('%s: %s/%.1f', $_, @{ $worst{$_} }) } sort { $a cmp $b } keys %worst);
my $r_span = $claims{r}[-1][1] - $claims{r}[0][0];
note sprintf('rate r: %d weight over %.2f s = %.1f per second (limit 200, burst 20)',
	$rate_weight, $r_span, $rate_weight / $r_span);
cmp_ok($r_span, '>=', ($rate_weight - 20) / 200 - 0.01,
	'rate r: the claims took at least (total weight - burst) / rate seconds');

# --- the buckets at rest --------------------------------------------------------

is(sql("SELECT count(*) FROM gen_durable.instances WHERE status = 'executing'"), '0',
	'nothing executes any more');
is(sql("SELECT count(*) FROM gen_durable.buckets WHERE kind = 'conc' AND available <> capacity"),
	'0', 'every gate bucket is full');
is(sql("SELECT count(*) FROM gen_durable.buckets b JOIN gen_durable.limits l "
	  . "ON l.kind = b.kind AND l.name = split_part(b.key, ':', 1) "
	  . "WHERE b.kind = 'conc' AND b.capacity <> floor(l.capacity / l.shards) "
	  . "+ CASE WHEN b.shard < l.capacity::int % l.shards THEN 1 ELSE 0 END"),
	'0', 'every gate bucket has its shard\'s share of K as capacity');
is(sql("SELECT count(*) FROM gen_durable.buckets b JOIN gen_durable.limits l "
	  . "ON l.kind = b.kind AND l.name = split_part(b.key, ':', 1) "
	  . "WHERE b.kind = 'rate' AND (b.capacity <> l.capacity / l.shards "
	  . "OR b.available > b.capacity OR b.available < 0)"),
	'0', 'every rate bucket has burst / shards as capacity, and tokens within it');
my $maint = sql('SELECT gen_durable.run_maintenance()');
note "run_maintenance(): $maint";
is(sql("SELECT count(*) FROM gen_durable.buckets WHERE kind = 'conc' AND available <> capacity"),
	'0', 'after run_maintenance() every gate bucket is still full');
is(sql("SELECT count(*) FROM gen_durable.buckets b WHERE kind = 'conc' AND "
	  . "(SELECT count(*) FROM gen_durable.buckets s WHERE s.kind = 'conc' AND s.key = b.key) "
	  . "NOT IN (0, (SELECT shards FROM gen_durable.limits l WHERE l.kind = 'conc' "
	  . "AND l.name = split_part(b.key, ':', 1)))"),
	'0', 'every gate key that has buckets has all of its shards');
note 'buckets left after run_maintenance(): '
  . sql("SELECT coalesce(string_agg(kind || ' ' || n, ', '), 'none') FROM "
	  . "(SELECT kind, count(*) AS n FROM gen_durable.buckets GROUP BY kind) x");

# --- counters and the log ---------------------------------------------------------

cmp_ok($delta{throttled_conc}, '>', 0, 'stats: throttled_conc moved');
cmp_ok($delta{throttled_rate}, '>', 0, 'stats: throttled_rate moved');
is($delta{claimed}, 10000, 'stats: claimed moved by 10,000');
is(stat_value('maintenance_errors'), '0', 'no maintenance round failed');
my @bad = grep { /\b(ERROR|FATAL|PANIC):/ } split /\n/, slurp_file($node->logfile);
is(scalar(@bad), 0, 'no ERROR, FATAL or PANIC in the server log')
  or diag join("\n", @bad[ 0 .. ($#bad < 20 ? $#bad : 19) ]);

note sprintf('total test time %.1f s', time - $t_start);
$node->stop;
done_testing();
