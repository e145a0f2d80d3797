-- path.sql: one upgrade path.  Installs release :from, then steps through
-- every later release in turn (ALTER EXTENSION gen_durable UPDATE TO the
-- next one).  Before each step, at-X.Y.Z.sql runs at the version the step
-- starts from: what the releases before left, with that version's API,
-- then instances using that version's features.  After each step,
-- survived() shows that every row of every table is still there,
-- unchanged, and what the step's new columns hold.  At 0.9.0,
-- at-0.9.0.sql runs everything to its end; then the upgraded catalog is
-- compared with the fresh install's, object by object.
CREATE EXTENSION gen_durable VERSION :'from';
SELECT extversion FROM pg_extension WHERE extname = 'gen_durable';
-- since_X: the path started at X or before, so X's data exists
SELECT v <= '{0,1,0}' AS since_010, v <= '{0,2,0}' AS since_020, v <= '{0,3,0}' AS since_030,
	   v <= '{0,4,0}' AS since_040, v <= '{0,5,0}' AS since_050, v <= '{0,6,0}' AS since_060,
	   v <= '{0,7,0}' AS since_070
  FROM CAST(string_to_array(:'from', '.') AS int[]) v \gset

\if :since_010
\i test/upgrade/at-0.1.0.sql
SELECT FROM pg_temp.snapshot();
ALTER EXTENSION gen_durable UPDATE TO '0.2.0';
SELECT * FROM pg_temp.survived();
\endif

\if :since_020
\i test/upgrade/at-0.2.0.sql
SELECT FROM pg_temp.snapshot();
ALTER EXTENSION gen_durable UPDATE TO '0.3.0';
SELECT * FROM pg_temp.survived();
\endif

\if :since_030
\i test/upgrade/at-0.3.0.sql
SELECT FROM pg_temp.snapshot();
ALTER EXTENSION gen_durable UPDATE TO '0.4.0';
SELECT * FROM pg_temp.survived();
\endif

\if :since_040
\i test/upgrade/at-0.4.0.sql
SELECT FROM pg_temp.snapshot();
ALTER EXTENSION gen_durable UPDATE TO '0.5.0';
SELECT * FROM pg_temp.survived();
\endif

\if :since_050
\i test/upgrade/at-0.5.0.sql
SELECT FROM pg_temp.snapshot();
ALTER EXTENSION gen_durable UPDATE TO '0.6.0';
SELECT * FROM pg_temp.survived();
\endif

\if :since_060
\i test/upgrade/at-0.6.0.sql
SELECT FROM pg_temp.snapshot();
ALTER EXTENSION gen_durable UPDATE TO '0.7.0';
SELECT * FROM pg_temp.survived();
\endif

\if :since_070
\i test/upgrade/at-0.7.0.sql
SELECT FROM pg_temp.snapshot();
ALTER EXTENSION gen_durable UPDATE TO '0.8.0';
SELECT * FROM pg_temp.survived();
\endif

\i test/upgrade/at-0.8.0.sql
SELECT FROM pg_temp.snapshot();
ALTER EXTENSION gen_durable UPDATE TO '0.9.0';
SELECT * FROM pg_temp.survived();

\i test/upgrade/at-0.9.0.sql

-- the upgraded catalog against the fresh install's: the objects that
-- differ, with what each side has (none)
SELECT extversion FROM pg_extension WHERE extname = 'gen_durable';
SELECT pg_temp.worker_running() AS worker_running;
TRUNCATE upgraded;
INSERT INTO upgraded SELECT * FROM pg_temp.describe();
SELECT * FROM pg_temp.differences('upgraded', 'fresh', 'upgraded from ' || :'from', 'fresh');
SELECT (SELECT count(*) FROM upgraded) AS upgraded_rows, (SELECT count(*) FROM fresh) AS fresh_rows;

DROP EXTENSION gen_durable;
SELECT FROM pg_temp.clean_slate();
