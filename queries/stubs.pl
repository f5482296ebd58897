#!/usr/bin/env perl
# queries/stubs.pl - the typed C stubs of the query library, generated from the function
# headers of its sources, so C code calls each function by a prototype the compiler checks
# instead of by a name string, and charterd can compare what it was built for with what Redis
# loaded (FUNCTION LIST). Each header carries one machine-readable line:
#
#   call: NAME(PARAM, ...) [-> list] [on graph GRAPH]
#
# NAME is the function's name without "charter_"; each PARAM names one argument, in order, as a
# C parameter: "x" a string, "x?" a string that may be NULL to leave it and every later one out,
# "x..." (last) a variable list passed as (size_t n, const char *const *x), "json x" the one
# argument as a JSON document. "-> list" declares a reply that may be a flat array of strings
# (store_call_list); "on graph GRAPH" a function whose key is another graph's prefix (the tenant
# registry). The stubs go to OUTDIR/queries.h and OUTDIR/queries.c, with the table {name,
# no-writes flag} of registry.lua's FUNCTIONS that the startup check compares.
#
# Usage: queries/stubs.pl OUTDIR SOURCE.lua...   (the sources in library order, as
# CMakeLists.txt lists them). Exit status: 0 written; 1 a header or registration row the stubs
# cannot be made from (each named on one line, with what to do); 2 bad usage or I/O failure.
use strict;
use warnings;

my ($outdir, @sources) = @ARGV;
if (!defined $outdir || !@sources) {
  print STDERR "usage: queries/stubs.pl OUTDIR SOURCE.lua...\n";
  exit 2;
}

sub slurp {
  my ($path) = @_;
  open(my $fh, '<:raw', $path) or do { print STDERR "stubs.pl: cannot read $path: $!\n"; exit 2 };
  local $/;
  my $t = <$fh>;
  close $fh;
  return $t;
}

# Names a C parameter may not take: the stub's own (st, out, list, n, args, nargs) and C's
# keywords.
my %reserved = map { $_ => 1 } qw(st out list n args nargs auto break case char const continue
  default do double else enum extern float for goto if inline int long register restrict return
  short signed sizeof static struct switch typedef union unsigned void volatile while);

my @errors;
my (%readonly, @registered, %registered_in, %headers, @order);
for my $path (@sources) {
  my $text = slurp($path);
  (my $file = $path) =~ s{.*/}{};
  if ($text =~ /^local FUNCTIONS = \{\n(.*?)^\}/ms) {
    my $rows = $1;
    my $line = 0;
    for my $row (split /\n/, $rows) {
      $line++;
      next if $row =~ /^\s*(--.*)?$/;
      if ($row =~ /^    \{'charter_(\w+)', \w+\.charter_\1, (true|false)\},$/) {
        push @errors, "$file: charter_$1 is registered twice in FUNCTIONS" if exists $readonly{$1};
        push @registered, $1;
        $readonly{$1} = $2 eq 'true' ? 1 : 0;
        $registered_in{$1} = $file;
      } else {
        push @errors, "$file: FUNCTIONS row \"$row\" is not of the form "
          . "{'charter_<name>', <module>.charter_<name>, true|false},";
      }
    }
  }
  while ($text =~ /^--\[\[ (charter_\w+)\n(.*?) ?\]\]\n/msg) {
    my ($name, $body) = ($1, $2);
    $name =~ s/^charter_//;
    if (exists $headers{$name}) {
      push @errors, "$file: a second header for charter_$name (the first is in $headers{$name}{file})";
      next;
    }
    $headers{$name} = {file => $file, body => $body};
    push @order, $name;
  }
}

if (!@registered) {
  print STDERR "stubs.pl: no FUNCTIONS table in the sources (registry.lua must be among them)\n";
  exit 2;
}

# Parses one call line of function name into {params => [...], list => 0|1, graph => ...}.
sub parse_call {
  my ($name, $file, $line) = @_;
  my $where = "$file: charter_$name: call: $line";
  my ($fn, $plist, $rest) = $line =~ /^(\w+)\(([^()]*)\)(.*)$/ or do {
    push @errors, "$where: not of the form NAME(PARAM, ...) [-> list] [on graph GRAPH]";
    return undef;
  };
  if ($fn ne $name) {
    push @errors, "$where: names $fn, but the header is charter_$name";
    return undef;
  }
  my %c = (params => [], list => 0, graph => undef);
  if ($rest =~ s/^ -> list//) {
    $c{list} = 1;
  }
  if ($rest =~ s/^ on graph ([A-Za-z0-9_.-]{1,64})//) {
    $c{graph} = $1;
  }
  if ($rest ne '') {
    push @errors, "$where: cannot read \"$rest\" (expected \" -> list\", then \" on graph GRAPH\")";
    return undef;
  }
  my %seen;
  for my $p (split /, /, $plist) {
    my ($json, $id, $mark) = $p =~ /^(json )?([a-z][a-z0-9_]*)(\?|\.\.\.)?$/ or do {
      push @errors, "$where: parameter \"$p\" is not [json ]name[?|...] (lowercase C identifier)";
      return undef;
    };
    if ($reserved{$id} || $seen{$id}++) {
      push @errors, "$where: parameter name \"$id\" is " . ($reserved{$id} ? 'reserved' : 'repeated');
      return undef;
    }
    my $kind = $json ? 'json' : !defined $mark ? 'str' : $mark eq '?' ? 'opt' : 'var';
    my $prev = @{$c{params}} ? $c{params}[-1]{kind} : '';
    if ($prev eq 'var' || ($prev eq 'opt' && $kind eq 'str')) {
      push @errors, "$where: \"$p\" follows "
        . ($prev eq 'var' ? 'a variable list (it must be last)' : 'an optional parameter');
      return undef;
    }
    push @{$c{params}}, {name => $id, kind => $kind};
  }
  my $n_json = grep { $_->{kind} eq 'json' } @{$c{params}};
  if ($n_json && (@{$c{params}} != 1 || $c{list} || defined $c{graph})) {
    push @errors, "$where: a json parameter must be the only one, with a JSON reply on the "
      . "graph's own key";
    return undef;
  }
  if ($c{list} && defined $c{graph}) {
    push @errors, "$where: \"-> list\" and \"on graph\" do not go together";
    return undef;
  }
  return \%c;
}

my %call;
for my $name (@order) {
  my $h = $headers{$name};
  if (!exists $readonly{$name}) {
    push @errors, "$h->{file}: the header charter_$name names a function registry.lua's "
      . "FUNCTIONS does not register (register it, or remove the header)";
    next;
  }
  my @lines = $h->{body} =~ /^call: (.*)$/mg;
  if (@lines != 1) {
    push @errors, "$h->{file}: charter_$name: its header has " . (@lines ? 'more than one' : 'no')
      . " \"call:\" line (give it one, e.g. \"call: $name(arg, ...)\", as queries/stubs.pl says)";
    next;
  }
  my $c = parse_call($name, $h->{file}, $lines[0]);
  $call{$name} = $c if $c;
}
for my $name (@registered) {
  push @errors, "$registered_in{$name}: charter_$name is registered but no source has its header "
    . "(\"--[[ charter_$name\" with a \"call:\" line)" unless exists $headers{$name};
}
if (@errors) {
  print STDERR "stubs.pl: $_\n" for @errors;
  print STDERR "stubs.pl: the typed stubs of the query library were not generated\n";
  exit 1;
}

# --- the C text ---------------------------------------------------------------------------

sub c_params {
  my ($c) = @_;
  my @p;
  for my $p (@{$c->{params}}) {
    if ($p->{kind} eq 'json') {
      push @p, "const json_t *$p->{name}";
    } elsif ($p->{kind} eq 'var') {
      push @p, 'size_t n', "const char *const *$p->{name}";
    } else {
      push @p, "const char *$p->{name}";
    }
  }
  push @p, 'json_t **out';
  push @p, 'store_list **list' if $c->{list};
  return join(', ', 'store *st', @p);
}

# Wraps a prototype at 100 columns, continuation lines under the opening parenthesis.
sub wrap_proto {
  my ($head, $params, $tail) = @_;
  my $indent = ' ' x length($head);
  my @parts = split /, /, $params;
  my ($out, $line) = ('', $head);
  for my $i (0 .. $#parts) {
    my $piece = $parts[$i] . ($i < $#parts ? ',' : $tail);
    if ($line ne $head && $line ne $indent && length($line) + 1 + length($piece) > 100) {
      $out .= "$line\n";
      $line = $indent . $piece;
    } else {
      $line .= ($line eq $head || $line eq $indent ? '' : ' ') . $piece;
    }
  }
  return $out . $line;
}

sub comment_of {
  my ($body) = @_;
  (my $b = $body) =~ s{\*/}{* /}g;
  $b =~ s{/\*}{/ *}g;
  return join('', map { $_ eq '' ? " *\n" : " * $_\n" } split /\n/, $b);
}

my $h = <<'EOT';
/*
 * queries.h - generated by queries/stubs.pl from the function headers in queries/: do
 * not edit. One typed stub per function of the query library; C code reaches the graph only
 * through these (the raw call by name is private to the database layer, server/db/store_raw.h).
 *
 * Every stub returns what store_call returns (server/db/store_raw.h): STATUS_OK, or the STATUS_E*
 * code of an error reply, STATUS_EUNAVAILABLE, STATUS_EPROTO, STATUS_EINVAL (an argument that is
 * NULL, or too many), STATUS_ENOMEM; store_last_error says why. *out (may be NULL to discard)
 * is the decoded JSON reply, owned by the caller (json_decref), or NULL for a nil reply or on
 * failure. A stub with a list reply (out and list both required) sets *list instead
 * (store_list_free) when the function answered a flat array, and then leaves *out NULL. An optional argument (NULL) leaves it and
 * every later one out of the call; a variable list passes its n strings.
 */
#ifndef CHARTER_QUERIES_H
#define CHARTER_QUERIES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct store store;
typedef struct store_list store_list;

/* One function of the library as registry.lua registers it: its name ("charter_<name>") and
 * whether it carries the no-writes flag. */
typedef struct {
    const char *name;
    bool readonly;
} queries_function;

/* Every registered function, in registry.lua's order. */
extern const queries_function queries_functions[];
extern const size_t queries_functions_len;

EOT
my $c = <<'EOT';
/*
 * queries.c - generated by queries/stubs.pl from the function headers in queries/: do
 * not edit. Each stub passes its arguments, in the header's order, to the raw call.
 */
#include "queries.h"
#include "db/store_raw.h"

#include <stddef.h>

/* The count of arguments given: the fixed ones, then the optional ones up to the first NULL;
 * -1 (which the raw call refuses as STATUS_EINVAL) when a later optional one is not NULL. */
static int queries_count(const char *const *args, int fixed, int total)
{
    int n = fixed;
    while (n < total && args[n] != NULL)
        n++;
    for (int i = n; i < total; i++)
        if (args[i] != NULL)
            return -1;
    return n;
}

/* args[fixed ..] = the n strings of var; the count, or -1 when they do not fit. */
static int queries_append(const char **args, int fixed, size_t n, const char *const *var)
{
    if (n > (size_t)(STORE_CALL_MAX_ARGS - fixed) || (n > 0 && var == NULL))
        return -1;
    for (size_t i = 0; i < n; i++)
        args[fixed + (int)i] = var[i];
    return fixed + (int)n;
}

const queries_function queries_functions[] = {
EOT
for my $name (@registered) {
  $c .= "    {\"charter_$name\", " . ($readonly{$name} ? 'true' : 'false') . "},\n";
}
$c .= "};\nconst size_t queries_functions_len = sizeof queries_functions / sizeof queries_functions[0];\n";

for my $name (@registered) {
  my $k = $call{$name};
  my @ps = @{$k->{params}};
  my $proto = wrap_proto("int q_$name(", c_params($k), ')');
  $h .= "/* charter_$name (" . ($readonly{$name} ? 'read only' : 'writes') . ")\n"
    . comment_of($headers{$name}{body}) . " */\n$proto;\n\n";
  $c .= "\n$proto\n{\n";
  my $lit = "\"$name\"";
  if (@ps == 1 && $ps[0]{kind} eq 'json') {
    $c .= "    return store_call_json(st, $lit, $ps[0]{name}, out);\n}\n";
    next;
  }
  my @fixed = grep { $_->{kind} eq 'str' } @ps;
  my @opt = grep { $_->{kind} eq 'opt' } @ps;
  my ($var) = grep { $_->{kind} eq 'var' } @ps;
  my $nargs;
  if ($var) {
    $c .= "    const char *args[STORE_CALL_MAX_ARGS]"
      . (@fixed ? " = {" . join(', ', map { $_->{name} } @fixed) . "}" : '') . ";\n";
    $c .= "    int nargs = queries_append(args, " . scalar(@fixed) . ", n, $var->{name});\n";
    $nargs = 'nargs';
  } elsif (@ps) {
    $c .= "    const char *" . (@opt ? '' : 'const ') . "args[" . scalar(@ps) . "] = {"
      . join(', ', map { $_->{name} } @ps) . "};\n";
    if (@opt) {
      $c .= "    int nargs = queries_count(args, " . scalar(@fixed) . ", " . scalar(@ps) . ");\n";
      $nargs = 'nargs';
    } else {
      $nargs = scalar(@ps);
    }
  } else {
    $nargs = 0;
  }
  my $argv = @ps ? 'args' : 'NULL';
  if ($k->{list}) {
    $c .= "    return store_call_list(st, $lit, $nargs, $argv, out, list);\n}\n";
  } elsif (defined $k->{graph}) {
    $c .= "    return store_call_on(st, \"$k->{graph}\", $lit, $nargs, $argv, out);\n}\n";
  } else {
    $c .= "    return store_call(st, $lit, $nargs, $argv, out);\n}\n";
  }
}
$h .= "#endif\n";

for my $f (['queries.h', $h], ['queries.c', $c]) {
  my $path = "$outdir/$f->[0]";
  open(my $fh, '>:raw', "$path.tmp") or do { print STDERR "stubs.pl: cannot write $path: $!\n"; exit 2 };
  print $fh $f->[1];
  close $fh or do { print STDERR "stubs.pl: cannot write $path: $!\n"; exit 2 };
  rename("$path.tmp", $path) or do { print STDERR "stubs.pl: cannot write $path: $!\n"; exit 2 };
}
exit 0;
