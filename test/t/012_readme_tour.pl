# 012_readme_tour.pl - the README's five-minute tour says what the server says.
#
# Reads README.md (or the file named by $GD_TOUR_README, to try the test on
# an edited copy), takes the first ```sql block of its section "## A
# five-minute tour" and the ``` block right after it, runs the SQL
# statement by statement in one psql session on a new server set up as the
# README recommends (shared_preload_libraries = 'gen_durable', every other
# setting at its default, so the maintenance worker runs; test/gen_durable.conf
# is not used because it turns the worker off), and compares each answer
# written in the README with the server's.
#
# The answer format (the README's tour states it too):
#  - a statement ends at the line that ends with ';';
#  - its answer is every line that starts with '-->' after it, up to the
#    next statement, plus a '-->' at the end of its last line, after the
#    ';'; one '-->' line per row, in the order the server returns them;
#  - a row is its columns as psql prints them (the types' text output),
#    separated by ' | ', with NULL for SQL NULL;
#  - a statement with no '-->' must return no rows (CREATE EXTENSION);
#  - the last statement's answer is instead the ``` block under the sql
#    block: psql's aligned output (header, rule, rows) without the
#    "(N rows)" footer;
#  - other lines starting with '--' are comments; trailing white space is
#    ignored, on both sides.
# Anything else fails: a different answer, a missing or extra row, an error,
# and any warning or notice on stderr.

use strict;
use warnings FATAL => 'all';
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $readme = $ENV{GD_TOUR_README} // "$FindBin::RealBin/../../README.md";

# --- the parser -------------------------------------------------------------

# tour_blocks returns the lines of the tour's sql block and of the block
# after it (the last query's table), with the README line number of the
# first line of the sql block
sub tour_blocks
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "cannot open $path: $!";
	my @lines = map { s/\s+$//r } <$fh>;
	close $fh;

	my $i = 0;
	$i++ while $i < @lines && $lines[$i] ne '## A five-minute tour';
	die "$path has no section \"## A five-minute tour\"" if $i == @lines;
	$i++ while $i < @lines && $lines[$i] ne '```sql';
	die "the tour has no ```sql block" if $i == @lines;
	my $first = $i + 2;    # 1-based number of the block's first line

	my (@sql, @table);
	push @sql, $lines[$i] while ++$i < @lines && $lines[$i] ne '```';
	$i++;
	$i++ while $i < @lines && $lines[$i] eq '';
	die "no ``` block (the last query's table) right after the tour's sql block"
	  unless $i < @lines && $lines[$i] eq '```';
	push @table, $lines[$i] while ++$i < @lines && $lines[$i] ne '```';
	return (\@sql, \@table, $first);
}

# statements splits the sql block into statements, each
# { sql => text, line => README line number, answer => [rows] }
sub statements
{
	my ($lines, $first) = @_;
	my (@stmts, $buf, $start);
	for my $n (0 .. $#$lines)
	{
		my $line = $lines->[$n];
		my $lineno = $first + $n;
		if ($line =~ /^\s*-->\s?(.*)$/)    # an answer line
		{
			die "README line $lineno: an answer inside or before a statement"
			  if defined $buf || !@stmts;
			push @{ $stmts[-1]{answer} }, $1;
			next;
		}
		next if $line =~ /^\s*--/ || $line eq '';    # a comment, a blank line

		my $inline;
		$inline = $2 if $line =~ s/^(.*;)\s*-->\s?(.*)$/$1/;
		$start = $lineno unless defined $buf;
		$buf = defined $buf ? "$buf\n$line" : $line;
		next unless $line =~ /;\s*$/;
		push @stmts, { sql => $buf, line => $start, answer => [] };
		push @{ $stmts[-1]{answer} }, $inline if defined $inline;
		undef $buf;
	}
	die "the tour's last statement does not end with ';'" if defined $buf;
	return @stmts;
}

my ($sql, $table, $first) = tour_blocks($readme);
my @stmts = statements($sql, $first);
cmp_ok(scalar @stmts, '>=', 2, 'the tour has statements');
die "the last statement has '-->' answers; its answer is the table under the block"
  if @{ $stmts[-1]{answer} };
$stmts[-1]{answer} = $table;

# --- running it ---------------------------------------------------------------

my $node = PostgreSQL::Test::Cluster->new('tour');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'gen_durable'\n");
$node->start;

# One script for one psql session: the statements in order, each followed
# by a marker line, printed as the answer format says.
my $marker = '@@ end of answer @@';
my $script = join("\n",
	'\pset format unaligned', '\pset tuples_only on',
	q(\pset fieldsep ' | '), '\pset null NULL', '');
for my $k (0 .. $#stmts)
{
	$script .= join("\n",
		'\pset format aligned', '\pset tuples_only off',
		q(\pset null ''), '\pset footer off', '')
	  if $k == $#stmts;
	$script .= "$stmts[$k]{sql}\n\\echo $marker\n";
}

my ($stdout, $stderr) = ('', '');
my $rc = $node->psql(
	'postgres', $script,
	stdout => \$stdout,
	stderr => \$stderr,
	on_error_stop => 1,
	timeout => 120);

# what the server answered each statement, lines without trailing space
my @got = ([]);
for (split /\n/, $stdout, -1)
{
	if ($_ eq $marker) { push @got, []; next; }
	push @{ $got[-1] }, s/\s+$//r;
}
pop @got;    # after the last marker
# psql ends an aligned table with an empty line (where the footer would be)
pop @{ $got[$#stmts] } while @got > $#stmts && @{ $got[$#stmts] } && $got[$#stmts][-1] eq '';

# --- comparing --------------------------------------------------------------

for my $k (0 .. $#stmts)
{
	my $s = $stmts[$k];
	my ($what) = split /\n/, $s->{sql};
	if ($k > $#got)
	{
		fail("README line $s->{line}: $what: not run (psql stopped: $stderr)");
		next;
	}
	is( join("\n", @{ $got[$k] }),
		join("\n", map { s/\s+$//r } @{ $s->{answer} }),
		"README line $s->{line}: $what");
}
is($rc, 0, 'psql ran the whole tour');
is($stderr, '', 'no error, warning or notice');

$node->stop;
done_testing();
