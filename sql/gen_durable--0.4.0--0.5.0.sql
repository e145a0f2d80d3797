/* gen_durable--0.4.0--0.5.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gen_durable UPDATE TO '0.5.0'" to load this file. \quit

-- pick and flush build a job from the instance's columns in place
-- (src/job.h) instead of calling this function over the whole row, which
-- cost a claim about a tenth of its time: nothing calls it any more.
DROP FUNCTION gen_durable._job(gen_durable.instances);
