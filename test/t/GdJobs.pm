# GdJobs.pm - no-op jobs run to their end in one psql call, for the TAP
# tests that need many finished jobs (table statistics, dead rows).
#
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use GdJobs;
#   finish_jobs($node, 'queue', 12000);                   # archived (0.9.0)
#   finish_jobs($node, 'queue', 500,
#       'SET gen_durable.archive_finished = off;');       # kept in place

package GdJobs;

use strict;
use warnings FATAL => 'all';
use Exporter 'import';

our @EXPORT = qw(finish_jobs);

# finish_jobs inserts $n one-step jobs into $queue of database postgres
# and flushes each as done, in batches of at most 6,000 (insert_many and
# pick take at most 10,000 at a time), after running $before (SQL, in the
# same session) when given.
sub finish_jobs
{
	my ($node, $queue, $n, $before) = @_;
	my $sql = $before // '';
	for (my $left = $n; $left > 0; $left -= 6000)
	{
		my $k = $left < 6000 ? $left : 6000;
		$sql .= qq{
			SELECT count(*) FROM gen_durable.insert_many(
				(SELECT jsonb_agg(jsonb_build_object('fsm', 'job', 'queue', '$queue'))
				   FROM generate_series(1, $k)));
			SELECT count(*) FROM gen_durable.flush(
				(SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done',
													 'claim', claim))
				   FROM gen_durable.pick('$queue', 'w', $k)));
		};
	}
	$node->safe_psql('postgres', $sql);
	return;
}

1;
