# GdWorkload.pm - a workload with rows in every status, and the checks a
# database holding it must pass, for the TAP tests of dumps, replicas and
# upgrades: every "fresh / restored / promoted / upgraded" database must
# behave like the one it came from.
#
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use GdWorkload;
#
#   my $p = GdWorkload::populate($node, $dbname, await_timeout => '5 s');
#   ... copy, restore, promote or upgrade ...
#   is_deeply(GdWorkload::dump_tables($copy, $db2), GdWorkload::dump_tables($node, $dbname));
#   $p->{holder}->quit;        # the claims of the source go back now
#   GdWorkload::check_workload($node2, $db2, $p);
#
# The API (keep it stable: other tests use it):
#
# populate($node, $dbname, %opts) puts into $dbname (which has the
#   extension; run as a superuser) rows of every status, in queues whose
#   names begin with "wl_" (use them for nothing else):
#     due        runnable now (wl_due), with a signal "hello" (dedup_key
#                wl-hello-1) in its inbox
#     scheduled  runnable in a day (wl_due)
#     paused     runnable now in wl_paused, a paused queue
#     hist_retry runnable in a day, attempt 1, after a retry recorded in its
#                step history (history => true; wl_retry)
#     executing  6 claims of worker "wl-holder" (wl_exec), written to their
#                rows (gen_durable.claim_in_memory off), held by the
#                session $p->{holder} that stays connected until the caller
#                ends it ($p->{holder}->quit, or a crash); lease $opts{lease}
#                (default 10 min).  One is at attempt 1 (retried before),
#                one holds a slot of gate wl_gate, one took 3 tokens of rate
#                limit wl_rate, one has a K=1 key, one records history.
#     await_long awaiting_signal on "go", no timeout (key wl-await-long),
#                with a signal "note" (dedup_key wl-note-1) in its inbox
#     await_short awaiting_signal on "never" with a timeout of
#                $opts{await_timeout} (default '5 s') from the moment
#                populate parks it (key wl-await-short); its deadline is
#                $p->{await_deadline} (text, UTC)
#     parent     awaiting_children (wl_parent, join all) of
#     children   two runnable children (wl_child)
#     hist_done  done after two steps in wl_hist, a queue with history on
#                (two step_history rows); its first step took a token of
#                wl_rate
#     failed, cancelled  (wl_term)
#   plus rate limit wl_rate (100 per hour, burst 50) and gate wl_gate (2),
#   their buckets, and schedule wl_yearly (cron '0 0 1 1 *', queue
#   wl_sched; it never ticks by itself during a test).
#   It returns a hashref: role => {name => id, children => [ids],
#   executing => [ids]}, status => {id => status}, attempt => {id =>
#   attempt} (every row it made, as populate left them), claim => {id =>
#   claim} (the executing rows), holder, holder_pid, await_deadline,
#   limits ("conc:wl_gate,rate:wl_rate").  populate dies if the engine
#   does not do what it asks (it asserts nothing itself).
#
# check_workload($node, $dbname, $populated, %opts) runs the checks, as
#   Test::More assertions named "<label>: ...", that every database holding
#   a populated workload must pass, with its maintenance worker on (it waits
#   for it) and the session that held the claims ended or connected to
#   another database (a copy's claims belong to nobody there):
#     the rows populate left are as it left them; the claims come back to
#     runnable by themselves, each with attempt + 1 (the reaper counts a
#     returned claim as an attempt), within $opts{claims_within} seconds
#     (default 10); the short await times out by itself (the maintenance
#     worker; not before its deadline); new instances, signals and history
#     rows get ids above every existing one; pick + flush round trips work
#     (for a fresh row and the restored due row, which gets its inbox);
#     signal dedup keys still dedup; a signal wakes the parked instance; the
#     schedule ticks; a long-poll pick is woken by an insert's commit
#     within $opts{wake_within} seconds (default 0.5, under the 1 s
#     re-check that backs the wake-ups up) of a 10 s wait; the
#     parent joins when its children end; the paused queue hands out nothing
#     until resume_queue; the returned claims are handed out again with
#     their attempts (the gate's and the rate limit's buckets admit them).
#   $opts{label} names the database in the test names (default "$dbname on
#   <node name>").  It changes the database (it drains the wl_ queues), so
#   run it once per populated database.  Returns {claims_back => seconds,
#   long_poll_wake => seconds}.
#
# dump_tables($node, $dbname) returns every engine table's rows (SELECT *
#   of instances, signals, limits, buckets, schedules, queue_settings,
#   step_history, ordered by their keys, in UTC) and the identity sequences'
#   last_value and is_called, one line each, as an arrayref, for equality
#   comparisons (is_deeply shows the first line that differs).

package GdWorkload;

use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use GdPsql;

# the engine's tables with their keys, in the order dump_tables lists them
my @TABLES = (
	[ instances      => 'id' ],
	[ signals        => 'id' ],
	[ limits         => 'kind, name' ],
	[ buckets        => 'kind, key, shard' ],
	[ schedules      => 'name' ],
	[ queue_settings => 'queue' ],
	[ step_history   => 'id' ],);
my @SEQUENCES = qw(instances_id_seq signals_id_seq step_history_id_seq);

# the roles whose rows check_workload expects as populate left them
my @STEADY_ROLES =
  qw(due scheduled paused hist_retry await_long parent hist_done failed cancelled);

# ---- helpers ------------------------------------------------------------

sub _q
{
	my ($node, $db, $sql) = @_;
	return $node->safe_psql($db, $sql);
}

# _try runs $sql like _q but does not die: an error comes back as its
# message ("ERROR: ..."), so that the assertion comparing it fails and the
# checks go on
sub _try
{
	my ($node, $db, $sql) = @_;
	my ($rc, $out, $err) = $node->psql($db, $sql);
	return $out if $rc == 0;
	$err =~ s/^psql:<stdin>:\d+: //mg;
	my ($first) = split /\n/, $err;
	return $first // "psql exited with $rc";
}

sub _poll_within
{
	my ($node, $db, $seconds, $query, $expected) = @_;
	local $PostgreSQL::Test::Utils::timeout_default = $seconds;
	return $node->poll_query_until($db, $query, $expected);
}

# _step picks one job of $queue as $worker and flushes $outcome (a JSON
# object without id, worker and claim) for it, in one session; dies unless
# a job was picked and the outcome applied.  Returns the job's id.
sub _step
{
	my ($node, $db, $queue, $worker, $outcome) = @_;
	my $out = _q(
		$node, $db, qq{
SELECT id AS wl_id, claim AS wl_claim FROM gen_durable.pick('$queue', '$worker', batch => 1) \\gset
SELECT :wl_id || ' ' || applied FROM gen_durable.flush(jsonb_build_array(
  '$outcome'::jsonb || jsonb_build_object('id', :wl_id, 'worker', '$worker', 'claim', :wl_claim)));
});
	die "populate: outcome $outcome in queue $queue not applied: $out"
	  unless $out =~ /^(\d+) ok$/;
	return $1;
}

# _pick_done picks up to 10 jobs of $queue, describes them with $describe
# (an SQL text expression over the job "j"; joined with "," in id order)
# and flushes a done for each with its claim, in one session.  Returns the
# description and the flush's answers ("ok,ok").
sub _pick_done
{
	my ($node, $db, $queue, $describe) = @_;
	my $out = _try(
		$node, $db, qq{
SELECT coalesce(string_agg($describe, ',' ORDER BY j.id), '') AS wl_seen,
       coalesce(jsonb_agg(jsonb_build_object('id', j.id, 'worker', 'wl-check', 'kind', 'done',
                                             'claim', j.claim) ORDER BY j.id), '[]') AS wl_outs
  FROM gen_durable.pick('$queue', 'wl-check', batch => 10) j \\gset
\\echo seen=:wl_seen
SELECT 'applied=' || coalesce(string_agg(applied, ',' ORDER BY id), '')
  FROM gen_durable.flush(:'wl_outs');
});
	my ($seen)    = $out =~ /^seen=(.*)$/m;
	my ($applied) = $out =~ /^applied=(.*)$/m;
	return ($seen // "<no pick: $out>", $applied // "<no flush: $out>");
}

sub _id_list
{
	return join(',', sort { $a <=> $b } @_);
}

# ---- populate -----------------------------------------------------------

sub populate
{
	my ($node, $db, %opts) = @_;
	my $await_timeout = $opts{await_timeout} // '5 s';
	my $lease = $opts{lease} // '10 min';
	my %role;

	# policy: limits, queue settings, a schedule that does not tick by
	# itself during a test (check_workload moves its next tick)
	_q(
		$node, $db, q{
SELECT gen_durable.set_rate_limit('wl_rate', 100, '1 hour', burst => 50);
SELECT gen_durable.set_concurrency_limit('wl_gate', 2);
SELECT gen_durable.pause_queue('wl_paused');
SELECT gen_durable.set_queue_history('wl_hist', true);
SELECT gen_durable.schedule('wl_yearly', '0 0 1 1 *', 'tick', '{"from": "wl_yearly"}',
                            queue => 'wl_sched');
});

	# runnable: due (with a signal in its inbox), scheduled, paused
	$role{due} = _q($node, $db,
		q{SELECT gen_durable.insert('job', '{"role": "due"}', queue => 'wl_due', metadata => '{"wl": "due"}')});
	$role{scheduled} = _q($node, $db,
		q{SELECT gen_durable.insert('job', '{"role": "scheduled"}', queue => 'wl_due', delay => '1 day')});
	$role{paused} = _q($node, $db,
		q{SELECT gen_durable.insert('job', '{"role": "paused"}', queue => 'wl_paused')});
	my $sig = _q($node, $db,
		qq{SELECT gen_durable.signal($role{due}::bigint, 'hello', '{"to": "due"}', dedup_key => 'wl-hello-1')});
	die "populate: signal to the due row: $sig" unless $sig eq 'delivered';

	# terminal: done in a queue with history (its first step rate limited),
	# failed, cancelled
	$role{hist_done} = _q($node, $db,
		q{SELECT gen_durable.insert('job', '{"role": "hist_done"}', queue => 'wl_hist', rate_limit => 'wl_rate')});
	_step($node, $db, 'wl_hist', 'wl-prep', '{"kind": "next", "step": "two", "state": {"n": 1}}');
	_step($node, $db, 'wl_hist', 'wl-prep', '{"kind": "done", "result": {"ok": true}}');
	$role{failed} = _q($node, $db,
		q{SELECT gen_durable.insert('job', '{"role": "failed"}', queue => 'wl_term')});
	_step($node, $db, 'wl_term', 'wl-prep',
		'{"kind": "fail", "error": {"message": "populate fails it"}}');
	$role{cancelled} = _q($node, $db,
		q{SELECT gen_durable.insert('job', '{"role": "cancelled"}', queue => 'wl_term')});
	my $n = _q($node, $db, qq{SELECT gen_durable.cancel($role{cancelled}, 'populate cancels it')});
	die "populate: cancel: $n" unless $n eq '1';

	# a retry recorded in the instance's own history, due in a day
	$role{hist_retry} = _q($node, $db,
		q{SELECT gen_durable.insert('job', '{"role": "hist_retry"}', queue => 'wl_retry', history => true)});
	_step($node, $db, 'wl_retry', 'wl-prep',
		'{"kind": "retry", "delay": "1 day", "error": {"message": "later"}}');

	# parked on signals: without a timeout (and a signal it does not await
	# in its inbox), and with a short one
	$role{await_long} = _q($node, $db,
		q{SELECT gen_durable.insert('order', '{"role": "await_long"}', queue => 'wl_await', correlation_key => 'wl-await-long')});
	_step($node, $db, 'wl_await', 'wl-prep', '{"kind": "await", "names": ["go"], "step": "after"}');
	$sig = _q($node, $db,
		q{SELECT gen_durable.signal('wl-await-long', 'note', '{"n": 1}', dedup_key => 'wl-note-1')});
	die "populate: signal to the parked row: $sig" unless $sig eq 'delivered';
	$role{await_short} = _q($node, $db,
		q{SELECT gen_durable.insert('order', '{"role": "await_short"}', queue => 'wl_await', correlation_key => 'wl-await-short')});
	_step($node, $db, 'wl_await', 'wl-prep',
		qq{{"kind": "await", "names": ["never"], "step": "after", "timeout": "$await_timeout"}});
	my $deadline = _q($node, $db,
		qq{SET TimeZone = 'UTC'; SELECT await_deadline FROM gen_durable.instances WHERE id = $role{await_short}});

	# a parent waiting for two children
	$role{parent} = _q($node, $db,
		q{SELECT gen_durable.insert('parent', '{"role": "parent"}', queue => 'wl_parent', correlation_key => 'wl-parent')});
	_step(
		$node, $db, 'wl_parent', 'wl-prep', q{{"kind": "spawn", "step": "joined", "join": "all",
		  "children": [{"fsm": "child", "queue": "wl_child", "state": {"n": 0}},
		               {"fsm": "child", "queue": "wl_child", "state": {"n": 1}}]}});
	$role{children} = [ split /\n/,
		_q($node, $db, qq{SELECT id FROM gen_durable.instances WHERE parent_id = $role{parent} ORDER BY child_index}) ];

	# claims held by a session that stays connected: one retried before
	# (attempt 1), one gated, one rate limited, one with a K=1 key, one
	# recording history, one plain
	my $retried = _q($node, $db,
		q{SELECT gen_durable.insert('job', '{"role": "exec_retried"}', queue => 'wl_exec')});
	_step($node, $db, 'wl_exec', 'wl-prep',
		'{"kind": "retry", "delay": 0, "error": {"message": "flaky"}}');
	_q(
		$node, $db, q{
SELECT gen_durable.insert('job', '{"role": "exec_gated"}', queue => 'wl_exec', concurrency_key => 'wl_gate:1');
SELECT gen_durable.insert('job', '{"role": "exec_rated"}', queue => 'wl_exec', rate_limit => 'wl_rate', weight => 3);
SELECT gen_durable.insert('job', '{"role": "exec_k1"}', queue => 'wl_exec', concurrency_key => 'wl-k1');
SELECT gen_durable.insert('job', '{"role": "exec_hist"}', queue => 'wl_exec', history => true);
SELECT gen_durable.insert('job', '{"role": "exec_plain"}', queue => 'wl_exec');
});
	# (its psql's timer runs from here: long enough for any test using it)
	my $holder = $node->background_psql($db, timeout => 900);
	my $holder_pid = $holder->query_safe('SELECT pg_backend_pid()');
	# claims written to their rows (executing), which a dump or a standby
	# carries; claims kept in memory are 015_memory_claims.pl's (a library
	# older than 0.8.0 has no such setting: it claims on the rows anyway)
	$holder->query_safe(
		"SELECT set_config('gen_durable.claim_in_memory', 'off', false)"
		  . " FROM pg_settings WHERE name = 'gen_durable.claim_in_memory'");
	my $claimed = $holder->query_safe(
		"SELECT string_agg(id || ':' || claim, ',' ORDER BY id) FROM gen_durable.pick('wl_exec', 'wl-holder', batch => 10, lease => '$lease')"
	);
	my %claim = map { split /:/ } split /,/, $claimed;
	die "populate: the holder claimed $claimed" unless keys %claim == 6 && exists $claim{$retried};
	$role{executing} = [ sort { $a <=> $b } keys %claim ];

	# what populate left, read back, and checked against what it asked for
	my %status;
	my %attempt;
	for my $line (split /\n/,
		_q($node, $db, 'SELECT id, status, attempt FROM gen_durable.instances ORDER BY id'))
	{
		my ($id, $st, $at) = split /\|/, $line;
		$status{$id}  = $st;
		$attempt{$id} = $at;
	}
	my %want = (
		due         => 'runnable',
		scheduled   => 'runnable',
		paused      => 'runnable',
		hist_retry  => 'runnable',
		await_long  => 'awaiting_signal',
		await_short => 'awaiting_signal',
		parent      => 'awaiting_children',
		hist_done   => 'done',
		failed      => 'failed',
		cancelled   => 'cancelled');
	for my $r (sort keys %want)
	{
		my $got = $status{ $role{$r} } // 'missing';
		die "populate: $r ($role{$r}) is $got, not $want{$r}" unless $got eq $want{$r};
	}
	for my $id (@{ $role{children} })
	{
		die "populate: child $id is $status{$id}" unless $status{$id} eq 'runnable';
	}
	for my $id (@{ $role{executing} })
	{
		die "populate: claim $id is $status{$id}" unless $status{$id} eq 'executing';
	}
	die "populate: the retried claim has attempt $attempt{$retried}" unless $attempt{$retried} == 1;

	return {
		role           => \%role,
		status         => \%status,
		attempt        => \%attempt,
		claim          => \%claim,
		holder         => $holder,
		holder_pid     => $holder_pid,
		await_deadline => $deadline,
		limits => _q($node, $db, q{SELECT string_agg(kind || ':' || name, ',' ORDER BY kind, name) FROM gen_durable.limits}),
	};
}

# ---- dump_tables ----------------------------------------------------------

sub dump_tables
{
	my ($node, $db) = @_;
	my $sql = "SET TimeZone = 'UTC';\n";
	for my $t (@TABLES)
	{
		my ($name, $key) = @$t;
		$sql .= "SELECT '$name ' || t::text FROM gen_durable.$name t ORDER BY $key;\n";
	}
	for my $s (@SEQUENCES)
	{
		$sql .= "SELECT '$s ' || last_value || ' ' || is_called FROM gen_durable.$s;\n";
	}
	return [ split /\n/, _q($node, $db, $sql) ];
}

# ---- check_workload -----------------------------------------------------

sub check_workload
{
	my ($node, $db, $p, %opts) = @_;
	my $label = $opts{label} // "$db on " . $node->name;
	my $claims_within = $opts{claims_within} // 10;
	my $wake_within = $opts{wake_within} // 0.5;
	my $role = $p->{role};
	my %took;
	local $Test::Builder::Level = $Test::Builder::Level + 1;

	ok( _poll_within(
			$node, $db, 15,
			"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gen_durable worker' AND datname = current_database()",
			'1'),
		"$label: the maintenance worker runs");

	# the rows nothing should have touched are as populate left them
	my @steady = ((map { $role->{$_} } @STEADY_ROLES), @{ $role->{children} });
	my $steady = _id_list(@steady);
	is( _try(
			$node, $db,
			"SELECT string_agg(id || ':' || status || ':' || attempt, ',' ORDER BY id) FROM gen_durable.instances WHERE id IN ($steady)"
		),
		join(',', map { "$_:$p->{status}{$_}:$p->{attempt}{$_}" } sort { $a <=> $b } @steady),
		"$label: the runnable, parked and terminal rows are as populated");

	# the claims of the holder (ended, or connected elsewhere) come back by
	# themselves, each with one attempt more, long before their lease
	my $exec = _id_list(@{ $role->{executing} });
	my $t0 = time;
	my $back = _poll_within(
		$node, $db,
		$claims_within,
		"SELECT string_agg(id || ':' || status || ':' || attempt || ':' || (locked_by IS NULL AND claim_session IS NULL), ',' ORDER BY id) "
		  . "FROM gen_durable.instances WHERE id IN ($exec)",
		join(',',
			map { "$_:runnable:" . ($p->{attempt}{$_} + 1) . ':true' } @{ $role->{executing} }));
	$took{claims_back} = time - $t0;
	ok($back, "$label: the claims come back to runnable, each with attempt + 1, within $claims_within s")
	  or diag _try($node, $db,
		"SELECT id, status, attempt, locked_by, lease_expires_at, claim_session FROM gen_durable.instances WHERE id IN ($exec) ORDER BY id");

	# the short await times out by itself, not before its deadline
	my $short = $role->{await_short};
	my $left = _try($node, $db,
		"SELECT greatest(0, ceil(extract(epoch FROM '$p->{await_deadline}'::timestamptz - now())))");
	$left = 0 unless $left =~ /^\d+$/;
	ok( _poll_within(
			$node, $db, $left + 10,
			"SELECT status || ':' || timed_out FROM gen_durable.instances WHERE id = $short",
			'runnable:true'),
		"$label: the short await times out by itself");
	is( _try(
			$node, $db,
			"SELECT eligible_at >= '$p->{await_deadline}'::timestamptz AND await_deadline IS NULL FROM gen_durable.instances WHERE id = $short"
		),
		't',
		"$label: not before its deadline");
	my ($seen, $applied) = _pick_done($node, $db, 'wl_await', q{j.id || ':' || j.step || ':' || j.timed_out});
	is("$seen $applied", "$short:after:true ok", "$label: the timed-out instance is picked at its next step, timed_out");

	# new rows get ids above every existing one (the sequences came along)
	my ($max_i, $max_s, $max_h) = split /\|/, _try(
		$node, $db,
		'SELECT (SELECT coalesce(max(id), 0) FROM gen_durable.instances), '
		  . '(SELECT coalesce(max(id), 0) FROM gen_durable.signals), '
		  . '(SELECT coalesce(max(id), 0) FROM gen_durable.step_history)');
	($max_i, $max_s, $max_h) = map { defined $_ && /^\d+$/ ? $_ : 0 } ($max_i, $max_s, $max_h);
	my ($rc, $fresh, $err) = $node->psql($db,
		q{SELECT gen_durable.insert('job', '{"role": "fresh"}', queue => 'wl_hist')});
	is($rc, 0, "$label: an insert succeeds") or diag $err;
	$fresh = 0 unless $rc == 0 && $fresh =~ /^\d+$/;
	cmp_ok($fresh, '>', $max_i, "$label: its id is above every existing instance's");
	($seen, $applied) = _pick_done($node, $db, 'wl_hist', q{j.id::text});
	is("$seen $applied", "$fresh ok", "$label: pick + flush round trip of a new instance");
	is( _try(
			$node, $db,
			"SELECT count(*) || ':' || (min(id) > $max_h) FROM gen_durable.step_history WHERE instance_id = $fresh"
		),
		'1:true',
		"$label: its history row (queue setting kept) gets an id above every existing one");
	($seen, $applied) = _pick_done($node, $db, 'wl_due',
		q{j.id || ':' || (SELECT string_agg(e->>'name', '+') FROM jsonb_array_elements(j.inbox) e)});
	is("$seen $applied", "$role->{due}:hello ok",
		"$label: pick + flush round trip of the due row, its inbox with it (the scheduled row not due)");

	# signals: dedup keys still dedup, and a signal wakes the parked row
	is( _try(
			$node, $db,
			q{SELECT gen_durable.signal('wl-await-long', 'note', '{"n": 2}', dedup_key => 'wl-note-1')}),
		'duplicate',
		"$label: a signal with a dedup key already in the inbox is a duplicate");
	is( _try($node, $db, q{SELECT gen_durable.signal('wl-await-long', 'go', '{"k": 1}')}),
		'delivered', "$label: a signal to the parked instance is delivered");
	is( _try(
			$node, $db,
			"SELECT (SELECT status FROM gen_durable.instances WHERE id = $role->{await_long}) || ':' || "
			  . "(SELECT min(id) > $max_s FROM gen_durable.signals WHERE target_id = $role->{await_long} AND name = 'go')"
		),
		'runnable:true',
		"$label: it wakes the instance, and its id is above every existing signal's");
	($seen, $applied) = _pick_done(
		$node, $db, 'wl_await',
		q{j.id || ':' || j.step || ':' || j.timed_out || ':'
		  || (SELECT string_agg(e->>'name', '+') FROM jsonb_array_elements(j.awaited) e) || ':'
		  || (SELECT string_agg(e->>'name', '+') FROM jsonb_array_elements(j.inbox) e)});
	is("$seen $applied", "$role->{await_long}:after:false:go:note+go ok",
		"$label: the woken instance runs its next step with the awaited signal and its inbox");

	# the schedule ticks: move its next tick to now with a direct UPDATE
	# (as superuser) rather than wait for a cron minute, and reload, which
	# wakes the maintenance worker (it sleeps until the earliest deadline
	# it knew of, and a direct UPDATE wakes nobody)
	my $ticks = q{SELECT count(*) FROM gen_durable.find('{"schedule": "wl_yearly"}')};
	my $before = _try($node, $db, $ticks);
	$before = 0 unless $before =~ /^\d+$/;
	_try($node, $db,
		q{UPDATE gen_durable.schedules SET next_at = now() WHERE name = 'wl_yearly'; SELECT pg_reload_conf()});
	ok(_poll_within($node, $db, 15, $ticks, $before + 1), "$label: the schedule ticks");
	is( _try(
			$node, $db,
			q{SELECT next_at > now() AND last_id IS NOT NULL FROM gen_durable.schedule_status WHERE name = 'wl_yearly'}),
		't',
		"$label: its next tick moved on");

	# a long-poll pick is woken by the commit of an insert
	my $lp = start_psql(
		$node, q{
SELECT id AS lp_id, claim AS lp_claim FROM gen_durable.pick('wl_lp', 'wl-lp', wait => '10 s') \gset
\echo picked :lp_id
SELECT applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
  'id', :lp_id, 'worker', 'wl-lp', 'kind', 'done', 'claim', :lp_claim)));
}, 30, $db);
	my $waiting = _poll_within(
		$node, $db, 10,
		"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Extension' "
		  . "AND state = 'active' AND query LIKE '%pick(''wl_lp''%'",
		'1');
	ok($waiting, "$label: a long-poll pick waits");
	# (timed from before the insert's call: the commit is a little later)
	my $t_commit = time;
	my $lp_id = _try($node, $db, q{SELECT gen_durable.insert('job', queue => 'wl_lp')});
	my $t_woken;
	while (time < $t_commit + 12)
	{
		# pump_nb dies once psql has exited (say, on an error)
		last unless eval { $lp->{h}->pump_nb; 1 };
		if ($lp->{out} =~ /^picked \d+\n/)
		{
			$t_woken = time;
			last;
		}
		usleep(2_000);
	}
	eval { $lp->{h}->finish; };
	$took{long_poll_wake} = defined $t_woken ? $t_woken - $t_commit : undef;
	is($lp->{out}, "picked $lp_id\nok\n", "$label: it gets the inserted row (and flushes it)")
	  or diag "stderr: $lp->{err}";
	ok(defined $t_woken && $t_woken - $t_commit < $wake_within,
		"$label: woken by the insert's commit within $wake_within s of a 10 s wait")
	  and note sprintf('%s: long-poll pick woken %.3f s after the commit', $label, $took{long_poll_wake});

	# the parent joins when its children end
	my $kids = _id_list(@{ $role->{children} });
	($seen, $applied) = _pick_done($node, $db, 'wl_child', q{j.id::text});
	is("$seen $applied", "$kids ok,ok", "$label: the children are picked and done");
	($seen, $applied) = _pick_done(
		$node, $db, 'wl_parent',
		q{j.id || ':' || j.step || ':'
		  || (SELECT string_agg(e->>'status', '+' ORDER BY (e->>'index')::int) FROM jsonb_array_elements(j.children) e)});
	is("$seen $applied", "$role->{parent}:joined:done+done ok", "$label: the parent joins, with its children's ends");

	# the paused queue hands out nothing until it is resumed
	($seen, $applied) = _pick_done($node, $db, 'wl_paused', q{j.id::text});
	is("$seen|$applied", '|', "$label: the paused queue hands out nothing");
	is(_try($node, $db, q{SELECT paused FROM gen_durable.queues WHERE queue = 'wl_paused'}),
		't', "$label: the queues view shows it paused");
	is(_try($node, $db, q{SELECT gen_durable.resume_queue('wl_paused')}),
		't', "$label: resume_queue resumes it");
	($seen, $applied) = _pick_done($node, $db, 'wl_paused', q{j.id::text});
	is("$seen $applied", "$role->{paused} ok", "$label: then its row is handed out");

	# the returned claims are handed out again, with their attempts, through
	# the gate and the rate limit (their buckets came along)
	is(_try($node, $db, q{SELECT string_agg(kind || ':' || name, ',' ORDER BY kind, name) FROM gen_durable.limits}),
		$p->{limits}, "$label: the limits are there");
	($seen, $applied) = _pick_done($node, $db, 'wl_exec', q{j.id || ':' || j.attempt});
	is( "$seen $applied",
		join(',', map { "$_:" . ($p->{attempt}{$_} + 1) } @{ $role->{executing} }) . ' '
		  . join(',', map { 'ok' } @{ $role->{executing} }),
		"$label: the returned claims are picked again with attempt + 1, and done");

	return \%took;
}

1;
