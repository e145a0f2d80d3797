/* gen_durable--0.5.0--0.6.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gen_durable UPDATE TO '0.6.0'" to load this file. \quit

-- The claim fence.  Every claim of an instance (a pick, an inline
-- continue) gets the next number; the job carries it, and an outcome that
-- names it applies only while that claim is the instance's latest.  Before
-- this, flush told claims apart only by (id, worker): when a worker lost a
-- claim (lease expiry, reclaim) and claimed the same instance again, the
-- late outcome of the lost claim was applied to the new one.
ALTER TABLE gen_durable.instances ADD COLUMN claim bigint NOT NULL DEFAULT 0;

COMMENT ON COLUMN gen_durable.instances.claim IS
	'The number of the latest claim: 0 before the first, +1 at every pick and inline continue';

ALTER TYPE gen_durable.job ADD ATTRIBUTE claim bigint;
