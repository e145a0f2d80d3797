-- today: the engine as it is (gen_durable.pick and gen_durable.flush, a
-- one-step job done), driven the same way as the prototypes.
-- @schema
CREATE EXTENSION gen_durable;
-- @fill
SELECT count(*) FROM generate_series(0, :n - 1, 10000) b,
	LATERAL gen_durable.insert_many(
		(SELECT jsonb_agg(jsonb_build_object('fsm', 'bench', 'step', 'run',
											 'queue', 'q' || (i % :queues)))
		   FROM generate_series(b, least(b + 9999, :n - 1)) i));
-- @round
SELECT jsonb_agg(jsonb_build_object('id', id, 'claim', claim, 'worker', 'w' || :client_id,
									'kind', 'done')) AS outs
  FROM gen_durable.pick('q' || :qn, 'w' || :client_id, :batch) \gset
SELECT count(*) FROM gen_durable.flush(:outs::jsonb);
