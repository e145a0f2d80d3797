# GdPsql.pm - a psql running a script in the background, for the TAP tests
# that need sessions they can leave running (a waiting pick, racing
# pickers) or kill.
#
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use GdPsql;
#   my $p = start_psql($node, "SELECT ...;\n", 60);       # database postgres
#   my $p = start_psql($node, "SELECT ...;\n", 60, 'db');  # another one
#   ... $p->{h} is the IPC::Run harness, $p->{out} and $p->{err} its output.

package GdPsql;

use strict;
use warnings FATAL => 'all';
use Exporter 'import';
use IPC::Run;
use Time::HiRes qw(time usleep);

our @EXPORT = qw(start_psql);

# start_psql starts psql on database $db (default postgres) of $node
# running $script, killed after $seconds (default 60), and feeds it the
# whole script now (IPC::Run writes input only while it is pumped, and
# empties the scalar as it goes).
sub start_psql
{
	my ($node, $script, $seconds, $db) = @_;
	my %p = (in => $script, out => '', err => '');
	$p{h} = IPC::Run::start(
		[
			$node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr($db // 'postgres'), '-f', '-'
		],
		'<', \$p{in}, '>', \$p{out}, '2>', \$p{err},
		IPC::Run::timeout($seconds // 60));
	my $until = time + 10;
	while ($p{in} ne '' && time < $until)
	{
		$p{h}->pump_nb;
		usleep(1_000);
	}
	die "could not feed the script to psql" if $p{in} ne '';
	return \%p;
}

1;
