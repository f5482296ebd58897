#!/usr/bin/env perl
# tests/lineage_history.pl - lineage is history: no function of the query library but the one
# that creates an artifact (charter_create_artifact, with the helpers only it calls) writes an
# artifact's content hash, its labels, its lineage summary or its DERIVED_FROM / FROM_RESOURCE
# edge sets. Decisions trust what was derived at creation (README "Lineage summaries"), so a
# second writer of those keys would let a decision stand on facts the summary no longer names.
#
# Each top-level `local function NAME(` ... `end` (column one: a file's block body is not
# indented) is one function. In each, every redis.call of a write command is found; its key
# argument is expanded through the function's own `local x = ...` assignments, and the call is
# a lineage write when the key names an artifact's `:derived_from` or `:from_resource` set, or
# is an artifact's hash (`:artifact:` .. id, nothing after) and the call deletes or renames it,
# or sets a field named conf, integrity, hash, summary or summary_hash, or a field not written
# as a literal. A helper called by charter_create_artifact and by no other function is allowed.
# Usage: tests/lineage_history.pl SOURCE.lua...
# Exit status: 0 no other writer; 1 a writer is named (file, line, function); 2 usage.
use strict;
use warnings;

@ARGV or do { print STDERR "usage: tests/lineage_history.pl SOURCE.lua...\n"; exit 2 };

my $CREATOR = 'charter_create_artifact';
my %WRITES = map { $_ => 1 } qw(HSET HMSET HSETNX HDEL HINCRBY HINCRBYFLOAT DEL UNLINK RENAME
  RENAMENX SADD SREM SMOVE SPOP SINTERSTORE SUNIONSTORE SDIFFSTORE COPY RESTORE EXPIRE PEXPIRE
  EXPIREAT PEXPIREAT SET GETDEL SETEX);
my %LINEAGE_FIELDS = map { $_ => 1 } qw(conf integrity hash summary summary_hash);

# Code without comments; string literals kept (keys and fields are literals).
sub code_of {
  my ($t) = @_;
  $t =~ s/--\[\[.*?\]\]/ (my $c = $&) =~ s{[^\n]}{}g; $c /gse;    # keep line numbers
  $t =~ s/--[^\n]*//g;
  return $t;
}

# The arguments of a call starting after its opening parenthesis at $pos, split at top-level
# commas (parentheses, braces and strings respected).
sub call_args {
  my ($s, $pos) = @_;
  my ($depth, $cur, $q, @args) = (0, "", "");
  for (my $i = $pos; $i < length $s; $i++) {
    my $ch = substr($s, $i, 1);
    if ($q ne '') {
      $cur .= $ch;
      if ($ch eq '\\') { $cur .= substr($s, ++$i, 1); next }
      $q = '' if $ch eq $q;
      next;
    }
    if ($ch eq "'" || $ch eq '"') { $q = $ch; $cur .= $ch; next }
    if ($ch eq '(' || $ch eq '{') { $depth++; $cur .= $ch; next }
    if ($ch eq ')' || $ch eq '}') {
      if ($depth == 0) { push @args, $cur; last }
      $depth--; $cur .= $ch; next;
    }
    if ($ch eq ',' && $depth == 0) { push @args, $cur; $cur = ''; next }
    $cur .= $ch;
  }
  s/^\s+|\s+$//g for @args;
  return @args;
}

# Expands identifiers of expr through the function's assignments (a few rounds).
sub expand {
  my ($expr, $assign) = @_;
  for (1 .. 4) {
    my $changed = 0;
    $expr =~ s/(?<![\w'".:])([A-Za-z_]\w*)(?![\w'"(])/exists $assign->{$1} ? do { $changed = 1; "($assign->{$1})" } : $1/ge;
    last unless $changed;
  }
  return $expr;
}

my (@functions, %calls_of);
for my $path (@ARGV) {
  open(my $fh, '<', $path) or do { print STDERR "lineage_history: cannot read $path: $!\n"; exit 2 };
  my $code = code_of(do { local $/; <$fh> });
  close $fh;
  my @lines = split /\n/, $code, -1;
  my $cur;
  for my $i (0 .. $#lines) {
    my $l = $lines[$i];
    if (!$cur && $l =~ /^local function (\w+)\s*\(/) {
      $cur = {name => $1, file => $path, line => $i + 1, body => ''};
      next;
    }
    next unless $cur;
    if ($l =~ /^end\b/) { push @functions, $cur; undef $cur; next }
    $cur->{body} .= "$l\n";
  }
}
my %names = map { $_->{name} => 1 } @functions;
for my $f (@functions) {
  for my $n (keys %names) {
    push @{$calls_of{$n}}, $f->{name} if $n ne $f->{name} && $f->{body} =~ /(?<![\w.])\Q$n\E\s*\(/;
  }
}
# Allowed: the creator, and helpers whose every caller is the creator (or such a helper).
my %allowed = ($CREATOR => 1);
for (1 .. 4) {
  for my $n (keys %names) {
    my @c = @{$calls_of{$n} || []};
    $allowed{$n} = 1 if @c && !grep { !$allowed{$_} } @c;
  }
}

my $bad = 0;
for my $f (@functions) {
  next if $allowed{$f->{name}};
  my $body = $f->{body};
  my %assign;
  while ($body =~ /\blocal\s+(\w+)\s*=\s*([^\n]+)/g) {
    my ($n, $v) = ($1, $2);
    $assign{$n} = $v unless $v =~ /,/;    # multiple assignment: not followed
  }
  while ($body =~ /redis\.p?call\s*\(/g) {
    my $at = pos($body);
    my ($cmd, $key, @rest) = call_args($body, $at);
    next unless defined $cmd && $cmd =~ /^['"](\w+)['"]$/ && $WRITES{uc $1};
    $cmd = uc $1;
    my $k = expand($key // '', \%assign);
    my $line = $f->{line} + (substr($body, 0, $at) =~ tr/\n//) + 1;
    my $why;
    if ($k =~ /['"][^'"]*:(derived_from|from_resource)['"]/) {
      $why = "writes an artifact's $1 edge set";
    } elsif ($k =~ /:artifact:['"]\s*\.\.\s*[^.'"]+$/) {
      if ($cmd =~ /^(DEL|UNLINK|RENAME|RENAMENX|SET|COPY|RESTORE|GETDEL|SETEX|EXPIRE|PEXPIRE|EXPIREAT|PEXPIREAT)$/) {
        $why = "$cmd of an artifact's hash";
      } elsif ($cmd =~ /^(HSET|HMSET|HSETNX|HINCRBY|HINCRBYFLOAT)$/) {
        for (my $i = 0; $i < @rest; $i += 2) {
          my $field = $rest[$i];
          if ($field !~ /^['"](\w+)['"]$/) { $why = "$cmd of an artifact's hash with field $field not a literal"; last }
          if ($LINEAGE_FIELDS{$1}) { $why = "$cmd of an artifact's $1"; last }
        }
      } elsif ($cmd eq 'HDEL') {
        for my $field (@rest) {
          if ($field !~ /^['"](\w+)['"]$/ || $LINEAGE_FIELDS{$1}) { $why = "HDEL $field of an artifact's hash"; last }
        }
      }
    }
    if ($why) {
      print "lineage_history: $f->{file}:$line: $f->{name} $why (only $CREATOR may)\n";
      $bad++;
    }
  }
}
if ($bad) {
  print "lineage_history: $bad write(s) of lineage outside $CREATOR\n";
  exit 1;
}
printf "lineage_history: %d functions checked; only %s (and %s) write lineage\n", scalar @functions,
  $CREATOR, join(', ', sort grep { $_ ne $CREATOR } keys %allowed) || 'no helper';
exit 0;
