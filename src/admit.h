/*-------------------------------------------------------------------------
 *
 * admit.h
 *		Admission of claimed candidates against rate limits and
 *		concurrency gates: the seam between the claim and the flip.
 *
 * IDENTIFICATION
 *		src/admit.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_ADMIT_H
#define GD_ADMIT_H

#include "postgres.h"

/* what a candidate asks of the concurrency gates */
typedef enum AdmitGate
{
	GATE_NONE,					/* no gate slot to take */
	GATE_CONFIGURED,			/* its key names a configured gate */
	GATE_IF_CONFIGURED			/* a continue's new key: a slot, or denied when
								 * the key's name is not a gate */
} AdmitGate;

/* why a candidate was denied */
typedef enum AdmitDenial
{
	DENIED_NOT = 0,
	DENIED_GATE,				/* every slot of its gate key is taken */
	DENIED_RATE,				/* its rate limit has too few tokens */
	DENIED_UNCONFIGURED,		/* GATE_IF_CONFIGURED, and it is not a gate */
	DENIED_UNKNOWN_RATE,		/* its rate limit is not configured */
	DENIED_CONTENDED			/* admission kept racing other pickers */
} AdmitDenial;

/*
 * The columns, in this order, that a statement reading candidates for
 * gd_read_candidates returns first (pick's candidates, admit()'s owned
 * rows): GD_CANDIDATE_COLUMNS(t) selects them from the relation named t,
 * CandidateColumn numbers them.
 */
#define GD_CANDIDATE_COLUMNS(t) \
	t ".id, " t ".concurrency_key, " t ".gated, " t ".rate_limit, " t ".weight"

typedef enum CandidateColumn
{
	CAND_ID = 1,
	CAND_CONCURRENCY_KEY,
	CAND_GATED,					/* it takes a slot of a configured gate */
	CAND_RATE_LIMIT,
	CAND_WEIGHT
} CandidateColumn;

/* A locked candidate of a pick, in claim order. */
typedef struct AdmitCandidate
{
	int64		id;
	char	   *concurrency_key;	/* NULL = none */
	AdmitGate	gate;
	char	   *rate_limit;		/* NULL = none */
	double		weight;
	bool		admitted;		/* set by gd_admit */
	AdmitDenial denial;			/* set by gd_admit */
	int16		shard;			/* set by gd_admit: the gate slot's shard */
	bool		has_shard;		/* a gate slot was taken */
} AdmitCandidate;

extern int	gd_admit(AdmitCandidate *candidates, int n);
extern AdmitCandidate *gd_read_candidates(int rows);

#endif							/* GD_ADMIT_H */
