#!/usr/bin/env perl
# tests/lua_scopes.pl - checks the scopes of the query library (queries/*.lua, concatenated into
# one Lua chunk). Each file declares exactly one top-level local, its module table named after
# the file, then one `do ... end` block that ends on the file's last line and holds everything
# else (the block's body is not indented: its top level is the lines that begin in column one).
# A name one file exports (`graph.now = now`) and another uses must be imported there
# (`local now = graph.now`): Redis Functions have no globals, so a missing import would fail only
# when the line runs. Prints the locals at the top of each block; fails when one nears Lua's
# limit of 200 active locals per function.
# Usage: tests/lua_scopes.pl SOURCE.lua...   (the library's sources in library order)
use strict;
use warnings;

my $LIMIT = 150;
@ARGV or die "usage: tests/lua_scopes.pl SOURCE.lua...\n";
my ($failed, $top, %exported) = (0, 0);

# Code without comments and string literals, so names inside them are not counted as uses.
sub code_of {
  my ($t) = @_;
  $t =~ s/--\[\[.*?\]\]//gs;
  $t =~ s/--[^\n]*//g;
  $t =~ s/'(?:[^'\\\n]|\\.)*'/''/g;
  $t =~ s/"(?:[^"\\\n]|\\.)*"/""/g;
  return $t;
}

for my $path (@ARGV) {
  open(my $fh, '<', $path) or die "lua_scopes: cannot read $path: $!\n";
  my $text = do { local $/; <$fh> };
  close $fh;
  (my $name = $path) =~ s{.*/}{};
  $name =~ s/\.lua$//;
  my @bad;
  my @lines = grep { !/^\s*$/ && !/^#!lua/ } split /\n/, code_of($text);
  if ($name eq 'registry') {
    push @bad, 'the file does not begin with "do"' unless @lines && $lines[0] =~ /^do\b/;
    $top--;
  } else {
    push @bad, "the first line of code is not \"local $name = {}\""
      unless @lines >= 2 && $lines[0] eq "local $name = {}";
    push @bad, 'the module table is not followed by "do"' unless @lines >= 2 && $lines[1] =~ /^do\b/;
  }
  push @bad, "the file does not end with the block's \"end\"" unless @lines && $lines[-1] eq 'end';
  my ($count, %local) = (0);
  for my $l (@lines[($name eq 'registry' ? 1 : 2) .. $#lines]) {
    next unless $l =~ /^local (?:function )?([\w, ]+?)\s*(?:=|\(|$)/;
    my @names = map { s/\s//gr } split /,/, $1;
    $count += @names;
    $local{$_} = 1 for @names;
  }
  # Names of earlier files used here but neither imported nor defined here.
  my $code = code_of($text);
  for my $n (sort keys %exported) {
    next if $local{$n};
    push @bad, "uses $n of $exported{$n}.lua without importing it (local $n = $exported{$n}.$n)"
      if $code =~ /(?<![\w.:])\Q$n\E\b/;
  }
  while ($code =~ /^\Q$name\E\.(\w+) = (\w+)$/mg) { $exported{$1} = $name if $1 eq $2 }
  $top++;
  printf "lua_scopes: %-20s %3d locals at the top of its block\n", "$name.lua", $count;
  if ($count > $LIMIT) {
    push @bad, "$count locals at the top of its block (Lua allows 200; keep it under $LIMIT)";
  }
  if (@bad) {
    print STDERR "lua_scopes: $path: $_\n" for @bad;
    $failed = 1;
  }
}
print "lua_scopes: $top locals at the chunk's top level (one module table per file)\n";
exit $failed;
