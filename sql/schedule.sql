-- schedule.sql: recurring schedules (issue 9): cron_next's syntax and
-- arithmetic in time zones, schedule / unschedule, the schedule_status
-- view, and the sweep that fires each tick once, with the skip and
-- catch_up policies for missed ticks.
CREATE EXTENSION gen_durable;
\set VERBOSITY terse
SET TimeZone = 'UTC';

------------------------------------------------------------------------
-- cron_next: the first tick after an instant
------------------------------------------------------------------------
SELECT c AS cron, gen_durable.cron_next(c, '2026-01-02 10:07:30+00') AS next
  FROM unnest(ARRAY[
	'* * * * *', '*/15 * * * *', '5/20 * * * *', '0 9 * * mon-fri', '0 9 * * 1-5',
	'30 8,12,18 * * *', '0 0 1 */3 *', '0 0 * * 0', '0 0 * * 7', '0 0 * * SUN',
	'0 12 * JAN,jul *', '0 0 13 * *', '0 0 13 * fri', '0 0 29 2 *', '0 0 30 2 *',
	'@hourly', '@daily', '@midnight', '@weekly', '@monthly', '@yearly', '@annually',
	'  0   0  1 1 *  ']) AS c;

-- time zones: the wall clock of the zone
SELECT z AS time_zone, gen_durable.cron_next('0 9 * * *', t, z) AS next
  FROM unnest(ARRAY['UTC', 'Europe/Paris', 'America/New_York', 'Asia/Kolkata']) AS z,
	   unnest(ARRAY['2026-01-15 12:00+00', '2026-07-15 12:00+00']::timestamptz[]) AS t
 ORDER BY t, z;
-- New York springs forward on 2026-03-08 at 02:00: 02:30 does not exist
-- and fires at 03:30 EDT; the other days at 02:30
SELECT gen_durable.cron_next('30 2 * * *', t, 'America/New_York') AS next
  FROM unnest(ARRAY['2026-03-07 12:00+00', '2026-03-08 05:00+00',
					'2026-03-08 12:00+00']::timestamptz[]) AS t;
-- ... and falls back on 2026-11-01: 01:30 happens twice and fires once,
-- at its later occurrence (EST, 06:30 UTC), as PostgreSQL reads 01:30,
-- also from an instant in the first 01:00-02:00 (05:30 UTC is 01:30 EDT)
SELECT t AS after, gen_durable.cron_next('30 1 * * *', t, 'America/New_York') AS next
  FROM unnest(ARRAY['2026-11-01 04:00+00', '2026-11-01 05:30+00', '2026-11-01 06:15+00',
					'2026-11-01 06:45+00']::timestamptz[]) AS t;
-- every 30 minutes through that night: each wall-clock tick once (01:00
-- and 01:30 at their EST occurrences, so 04:30 is followed by 06:00 UTC)
SELECT n, next FROM (
	WITH RECURSIVE ticks(n, next) AS (
		SELECT 1, gen_durable.cron_next('*/30 * * * *', '2026-11-01 04:10+00', 'America/New_York')
		UNION ALL
		SELECT n + 1, gen_durable.cron_next('*/30 * * * *', next, 'America/New_York')
		  FROM ticks WHERE n < 6)
	SELECT * FROM ticks) t;

-- bad expressions and zones
SELECT gen_durable.cron_next('* * * *');
SELECT gen_durable.cron_next('* * * * * *');
SELECT gen_durable.cron_next('60 * * * *');
SELECT gen_durable.cron_next('x * * * *');
SELECT gen_durable.cron_next('*/0 * * * *');
SELECT gen_durable.cron_next('5-1 * * * *');
SELECT gen_durable.cron_next('1- * * * *');
SELECT gen_durable.cron_next('0 0 * foo *');
SELECT gen_durable.cron_next('0 0 0 * *');
SELECT gen_durable.cron_next('@often');
SELECT gen_durable.cron_next('');
SELECT gen_durable.cron_next(NULL);
SELECT gen_durable.cron_next('* * * * *', NULL);
SELECT gen_durable.cron_next('* * * * *', now(), 'Mars/Olympus');

------------------------------------------------------------------------
-- schedule, unschedule and the schedule_status view
------------------------------------------------------------------------
SELECT gen_durable.schedule('nightly', '0 3 * * *', 'report', '{"k": 1}', queue => 'sq')
	   = gen_durable.cron_next('0 3 * * *') AS next_is_first_tick;
SELECT name, cron, time_zone, fsm, queue, missed, last_tick, last_id
  FROM gen_durable.schedule_status;
SELECT spec FROM gen_durable.schedules WHERE name = 'nightly';

-- redefining it with the same expression and zone keeps its next tick
-- (a tick due and not yet fired is not dropped); another expression
-- computes it again
UPDATE gen_durable.schedules SET next_at = '2000-01-01 03:00+00' WHERE name = 'nightly';
SELECT gen_durable.schedule('nightly', '0 3 * * *', 'report', '{"k": 2}', queue => 'sq')
	   AS kept_next_at;
SELECT gen_durable.schedule('nightly', '0 4 * * *', 'report', '{"k": 2}', queue => 'sq')
	   = gen_durable.cron_next('0 4 * * *') AS recomputed;
SELECT spec ->> 'state' AS state FROM gen_durable.schedules WHERE name = 'nightly';

------------------------------------------------------------------------
-- the sweep: ticks missed for two hours, skip against catch_up
------------------------------------------------------------------------
SELECT gen_durable.schedule('skipper', '0 * * * *', 'tick', queue => 'sk') IS NOT NULL AS scheduled;
SELECT gen_durable.schedule('catcher', '0 * * * *', 'tick', queue => 'ca', missed => 'catch_up',
							options => '{"priority": 3, "metadata": {"team": "ops"}}')
	   IS NOT NULL AS scheduled;
UPDATE gen_durable.schedules SET next_at = date_trunc('hour', now()) - interval '2 hours'
 WHERE name IN ('skipper', 'catcher');
SELECT gen_durable.run_maintenance() -> 'schedules_fired' AS fired;
-- skip: the latest missed tick only; catch_up: all three, oldest first
SELECT queue, correlation_key = s.name || '@' || to_char(t AT TIME ZONE 'UTC',
														   'YYYY-MM-DD"T"HH24:MI"Z"') AS keyed,
	   t - date_trunc('hour', now()) AS tick_from_this_hour, fsm, status, priority,
	   metadata - 'tick' AS metadata
  FROM gen_durable.instances i
  JOIN gen_durable.schedules s ON s.name = i.metadata ->> 'schedule',
	   LATERAL (SELECT (i.metadata ->> 'tick')::timestamptz AS t) tk
 ORDER BY queue, id;
SELECT name, next_at - date_trunc('hour', now()) AS next_from_this_hour,
	   last_tick = date_trunc('hour', now()) AS last_is_this_hour, last_status
  FROM gen_durable.schedule_status WHERE name IN ('skipper', 'catcher') ORDER BY name;
-- nothing more is due
SELECT gen_durable.run_maintenance() -> 'schedules_fired' AS fired;
-- a tick already fired never fires again, even with next_at moved back by hand
UPDATE gen_durable.schedules SET next_at = date_trunc('hour', now()) - interval '2 hours'
 WHERE name = 'catcher';
SELECT gen_durable.run_maintenance() -> 'schedules_fired' AS fired;
SELECT count(*) AS catcher_instances FROM gen_durable.instances WHERE queue = 'ca';

-- unschedule: the schedule goes, its instances stay
SELECT gen_durable.unschedule('skipper') AS removed, gen_durable.unschedule('skipper') AS again;
SELECT count(*) AS skipper_instances FROM gen_durable.instances WHERE queue = 'sk';
SELECT name FROM gen_durable.schedule_status ORDER BY name;

-- bad definitions
SELECT gen_durable.schedule('bad', '0 0 30 2 *', 'x');
SELECT gen_durable.schedule('bad', '0 0 * * *', 'x', missed => 'sometimes');
SELECT gen_durable.schedule('bad', '0 0 * * *', 'x', time_zone => 'Nowhere');
SELECT gen_durable.schedule('bad', '0 0 * * *', 'x', options => '{"delay": 5}');
SELECT gen_durable.schedule('bad', '0 0 * * *', 'x', options => '{"priority": "high"}');
SELECT gen_durable.schedule('bad', '0 0 * * *', 'x', options => '[]');
SELECT gen_durable.schedule('bad', '0 0 * * *', 'x', state => '[1]');
SELECT gen_durable.schedule(NULL, '0 0 * * *', 'x');
SELECT count(*) AS bad_saved FROM gen_durable.schedules WHERE name = 'bad';

DROP EXTENSION gen_durable;
