#!/usr/bin/env bash
# Fails when a statement of the docs that restates the code has drifted from it. Each check
# prints one "docs_drift: FAIL ..." line per difference, naming the document, the statement and
# the code it restates:
#   1. charterd's options: every option `charterd --help` prints is in the OPTIONS table of
#      docs/operator.md and in its SYNOPSIS, and every option those name is one charterd
#      accepts (asked of charterd itself: it must not call the option unknown).
#   2. the API reference: docs/api.md's generated part equals what docs/api.pl makes of the
#      proto and the method tables (every method of the dispatch table is there).
#   3. codes: the status codes docs/api.md says charterd sends, the Connect codes and HTTP
#      statuses of docs/http.md and libcharter's local codes of docs/client.md against
#      proto/charter_codes.h and server/rpc/http.c; the decision codes of docs/concepts.md
#      against server/core/decision.c, both ways.
#   4. limits: the defaults and bounds the docs state (options, per-call limits, the envelope's
#      deadline) against server/main/config.h, server/main/config.c and the limits headers.
#   5. links: every relative link of README.md and docs/*.md names a file that exists, and every
#      #anchor a heading of that file (GitHub's anchor spelling).
#   6. the evaluator version docs/evidence.md says this build decides by against
#      EVALUATOR_VERSION of server/policy/evaluator.h.
#   7. charter-bench: every option and workload `charter-bench --help` prints has a row in the
#      Options or Workloads table of docs/measuring.md, and every row names one it prints.
#   8. transcripts: every evaluator fingerprint a transcript of README.md or docs/*.md prints
#      (`evaluator <hex>`) is the one server/policy/evaluator.c computes for EVALUATOR_VERSION
#      under a workflow version (a reference workflow's, or one the same document prints), and
#      the query library version docs/http.md shows Health/Check answering is
#      STORE_LIBRARY_VERSION of server/db/store.h.
#
# Usage: tests/docs_drift.sh [SOURCE_DIR [BUILD_DIR]]   (default: this tree and its build/)
# Exit status: 0 in step; 1 a statement drifted; 2 a file or charterd could not be read.
set -uo pipefail
src=$(cd "${1:-$(dirname "$0")/..}" && pwd) || exit 2
build=${2:-$src/build}
charterd=$build/charterd
cd "$src" || exit 2
for f in README.md docs/operator.md docs/api.md docs/http.md docs/client.md docs/concepts.md \
  docs/evidence.md server/main/config.h server/main/config.c server/core/decision.c \
  proto/charter_codes.h server/rpc/http.c server/workflow/registry.h server/policy/evaluator.h \
  server/policy/evaluator.c server/db/store.h; do
  [ -r "$f" ] || { echo "docs_drift: cannot read $f" >&2; exit 2; }
done
[ -x "$charterd" ] || { echo "docs_drift: no charterd at $charterd (build first)" >&2; exit 2; }

fails=0
fail() {
  echo "docs_drift: FAIL $*"
  fails=$((fails + 1))
}

# section FILE HEADING: the lines under the heading (exactly "HEADING"), up to the next heading
# of any level.
section() {
  awk -v h="$2" '/^#/ { on = ($0 == h); next } on' "$1"
}

# cell FILE HEADING KEY COLUMN: column COLUMN (from 1) of the table row under HEADING whose first
# cell starts with KEY (a backticked option or a limit's name).
cell() {
  section "$1" "$2" | KEY="$3" COL="$4" perl -ne '
    next unless /^\|/;
    my @c = map { s/^\s+|\s+$//gr } split /(?<!\\)\|/;
    shift @c;
    if (index($c[0], $ENV{KEY}) == 0) { print $c[$ENV{COL} - 1], "\n"; exit }'
}

# define NAME FILE: the value of "#define NAME value" in FILE.
define() {
  sed -n "s/^#define $1 \\(.*\\)\$/\\1/p" "$2" | head -n 1
}

# expect DOC WHAT ACTUAL CODE TEXT: fail unless TEXT (a statement of DOC) contains ACTUAL, not
# as a part of a longer number (5000 is not in 50000).
expect() {
  local doc=$1 what=$2 actual=$3 code=$4 text=$5 re
  re="(^|[^0-9])$(sed 's/[][\\.*^$(){}+?|]/\\&/g' <<<"$actual")([^0-9]|\$)"
  if [ -z "$text" ]; then
    fail "$doc: $what: the statement is missing (the code, $code, says $actual)"
  elif ! [[ "$text" =~ $re ]]; then
    fail "$doc: $what says \"$text\"; the code ($code) says $actual"
  fi
}

# --- 1. charterd's options ----------------------------------------------------------------
help_opts=$("$charterd" --help | grep -oE '^  --[a-z-]+(, --[a-z-]+)*' | grep -oE -- '--[a-z-]+' | sort -u)
[ -n "$help_opts" ] || { echo "docs_drift: charterd --help lists no option" >&2; exit 2; }
table_opts=$(section docs/operator.md '### OPTIONS' | grep -E '^\| `-' | cut -d'|' -f2 |
  grep -oE -- '--[a-z-]+' | sort -u)
synopsis_opts=$(section docs/operator.md '### SYNOPSIS' | awk '/^```/ { n++; next } n == 1' |
  grep -oE -- '--[a-z-]+' | sort -u)
for o in $help_opts; do
  grep -qx -- "$o" <<<"$table_opts" ||
    fail "docs/operator.md OPTIONS: $o is printed by charterd --help but has no row"
  grep -qx -- "$o" <<<"$synopsis_opts" ||
    fail "docs/operator.md SYNOPSIS: $o is printed by charterd --help but not in the synopsis"
done
# Every documented option, asked of charterd: followed by an option that does not exist, an
# option charterd accepts either takes that word as its value or is a flag that leaves it
# unknown; only an option charterd does not accept is itself called unknown. No token is set,
# so nothing starts.
probe_dir=$(mktemp -d) || exit 2
trap 'rm -rf "$probe_dir"' EXIT
for o in $(sort -u <<<"$table_opts"$'\n'"$synopsis_opts"); do
  err=$(cd "$probe_dir" && env -i PATH="$PATH" timeout 10 "$charterd" "$o" --docs-drift-probe 2>&1 >/dev/null)
  if grep -qF "unknown option \"$o\"" <<<"$err"; then
    fail "docs/operator.md: $o is documented but charterd does not accept it ($err)"
  fi
  grep -qx -- "$o" <<<"$help_opts" ||
    fail "docs/operator.md: $o is documented but charterd --help does not print it"
done
[ -z "$(ls -A "$probe_dir")" ] || fail "the option probe left files behind: $(ls -A "$probe_dir")"

# --- 2. the generated API reference -------------------------------------------------------
if ! out=$(perl docs/api.pl --check docs/api.md "$src" 2>&1); then
  fail "docs/api.md: the generated reference is out of date: ${out//$'\n'/ }"
fi

# --- 3. status and decision codes ---------------------------------------------------------
# name number, from CHARTER_<NAME> = <number>
codes=$(sed -nE 's/^\s*CHARTER_([A-Z_]+) = ([0-9]+),.*/\1 \2/p' proto/charter_codes.h)
[ -n "$codes" ] || { echo "docs_drift: no codes in proto/charter_codes.h" >&2; exit 2; }
while read -r num name; do
  want=$(awk -v n="$name" '$1 == n { print $2 }' <<<"$codes")
  if [ -z "$want" ]; then
    fail "docs/api.md Status codes charterd sends: $name is not a status of proto/charter_codes.h"
  elif [ "$want" != "$num" ]; then
    fail "docs/api.md Status codes charterd sends: $name is $num; proto/charter_codes.h says $want"
  fi
done < <(section docs/api.md '## Status codes charterd sends' |
  sed -nE 's/^\| ([0-9]+) \| `([A-Z_]+)` \|.*/\1 \2/p')
[ -n "$(section docs/api.md '## Status codes charterd sends' | grep -E '^\| [0-9]+ \|')" ] ||
  fail "docs/api.md: no table under '## Status codes charterd sends'"

# Connect names and HTTP statuses: server/rpc/http.c's table against docs/http.md's.
code_http=$(sed -nE 's/^\s*\{"([a-z_]+)", ([0-9]+)\},$/\1 \2/p' server/rpc/http.c | grep -v '^ok ')
doc_http=$(section docs/http.md '## HTTP/JSON' | perl -ne '
  next unless /^\| `/;
  my @c = map { s/^\s+|\s+$//gr } split /\|/;
  shift @c;
  for (my $i = 0; $i + 1 < @c; $i += 2) {
    my ($names, $status) = ($c[$i], $c[$i + 1]);
    print "$_ $status\n" for $names =~ /`([a-z_]+)`/g;
  }' | sort -u)
while read -r name status; do
  [ -n "$name" ] || continue
  got=$(awk -v n="$name" '$1 == n { print $2 }' <<<"$doc_http")
  [ "$got" = "$status" ] ||
    fail "docs/http.md: the Connect code $name is ${got:-missing}; server/rpc/http.c answers HTTP $status"
  upper=$(tr a-z A-Z <<<"$name" | sed 's/^CANCELED$/CANCELLED/')
  grep -q "^$upper " <<<"$codes" || fail "server/rpc/http.c: $name is no status of proto/charter_codes.h"
done <<<"$code_http"
while read -r name status; do
  [ -n "$name" ] || continue
  grep -q "^$name " <<<"$code_http" || fail "docs/http.md: $name is not a Connect code server/rpc/http.c answers"
done <<<"$doc_http"

# libcharter's local codes.
while read -r name; do
  grep -q "^$name " <<<"$codes" || fail "docs/client.md local codes: $name is not a status of proto/charter_codes.h"
done < <(section docs/client.md '# The client library (libcharter)' | sed -nE 's/^ *\| `([A-Z_]+)` \|.*/\1/p')

# Decision codes, both ways.
code_names=$(sed -nE 's/^\s*\[GUARD_[A-Z_]+\] = "([A-Z_]+)",/\1/p' server/core/decision.c | sort -u)
doc_names=$(section docs/concepts.md '### Codes' | sed -nE 's/^\| `([A-Z_]+)` \|.*/\1/p' | sort -u)
[ -n "$code_names" ] || { echo "docs_drift: no decision codes in server/core/decision.c" >&2; exit 2; }
for c in $code_names; do
  grep -qx "$c" <<<"$doc_names" || fail "docs/concepts.md Codes: $c (server/core/decision.c) has no row"
done
for c in $doc_names; do
  grep -qx "$c" <<<"$code_names" || fail "docs/concepts.md Codes: $c is not a decision code of server/core/decision.c"
done

# --- 4. limits ----------------------------------------------------------------------------
max_message=$(($(define CONFIG_DEFAULT_MAX_MESSAGE server/main/config.h | grep -oE '[0-9]+' | paste -sd'*')))
mib=$((max_message / 1048576))
timeout_ms=$(define CONFIG_DEFAULT_TIMEOUT_MS server/main/config.h)
max_timeout_ms=$(define CONFIG_MAX_TIMEOUT_MS server/main/config.h)
queue=$(define CONFIG_DEFAULT_QUEUE server/main/config.h)
max_listen=$(define CONFIG_MAX_LISTEN server/main/config.h)
tcp_url=$(define CONFIG_DEFAULT_TCP_URL server/main/config.h | tr -d '"')
data_dir=$(define CONFIG_DEFAULT_DATA_DIR server/main/config.h | tr -d '"')
graph=$(define CONFIG_DEFAULT_GRAPH server/main/config.h | tr -d '"')
http_conns=$(define CONFIG_DEFAULT_HTTP_MAX_CONNECTIONS server/main/config.h)
http_header=$(define CONFIG_DEFAULT_HTTP_HEADER_TIMEOUT_S server/main/config.h)
http_body=$(define CONFIG_DEFAULT_HTTP_BODY_TIMEOUT_S server/main/config.h)
http_idle=$(define CONFIG_DEFAULT_HTTP_IDLE_TIMEOUT_S server/main/config.h)
runners=$(sed -nE 's/^\s*cfg->runners = ([0-9]+);/\1/p' server/main/config.c)
ancestry=$(sed -nE 's/^\s*out->max_ancestry = ([0-9]+);/\1/p' server/main/config.c)
max_ids=$(sed -nE 's/^\s*out->max_ids = ([0-9]+);/\1/p' server/main/config.c)
max_content=$(($(sed -nE 's/^\s*out->max_content = \(size_t\)([0-9]+) \* ([0-9]+);/\1*\2/p' server/main/config.c)))
narrowed=$(define REGISTRY_MAX_NARROWED server/workflow/registry.h)
for v in max_message timeout_ms max_timeout_ms queue max_listen tcp_url data_dir graph http_conns \
  http_header http_body http_idle runners ancestry max_ids max_content narrowed; do
  [ -n "${!v}" ] || { echo "docs_drift: cannot read $v from the code" >&2; exit 2; }
done

op=docs/operator.md
opts='### OPTIONS'
expect $op "option --max-message default" "$max_message ($mib MiB)" CONFIG_DEFAULT_MAX_MESSAGE "$(cell $op "$opts" '`--max-message' 2)"
expect $op "option --timeout-ms default" "$timeout_ms" CONFIG_DEFAULT_TIMEOUT_MS "$(cell $op "$opts" '`--timeout-ms' 2)"
expect $op "option --timeout-ms range" "1–$max_timeout_ms." CONFIG_MAX_TIMEOUT_MS "$(cell $op "$opts" '`--timeout-ms' 3)"
expect $op "option --queue default" "$queue" CONFIG_DEFAULT_QUEUE "$(cell $op "$opts" '`--queue' 2)"
expect $op "option --listen default" "\`$tcp_url\`" CONFIG_DEFAULT_TCP_URL "$(cell $op "$opts" '`--listen' 2)"
expect $op "option --listen count" "at most $max_listen" CONFIG_MAX_LISTEN "$(cell $op "$opts" '`--listen' 3)"
expect $op "option --data-dir default" "\`$data_dir\`" CONFIG_DEFAULT_DATA_DIR "$(cell $op "$opts" '`--data-dir' 2)"
expect $op "option --graph default" "\`$graph\`" CONFIG_DEFAULT_GRAPH "$(cell $op "$opts" '`--graph' 2)"
expect $op "option --runners default" "$runners" "config.c cfg->runners" "$(cell $op "$opts" '`--runners' 2)"
expect $op "option --http-max-connections default" "$http_conns" CONFIG_DEFAULT_HTTP_MAX_CONNECTIONS "$(cell $op "$opts" '`--http-max-connections' 2)"
expect $op "option --http-header-timeout default" "$http_header" CONFIG_DEFAULT_HTTP_HEADER_TIMEOUT_S "$(cell $op "$opts" '`--http-header-timeout' 2)"
expect $op "option --http-body-timeout default" "$http_body" CONFIG_DEFAULT_HTTP_BODY_TIMEOUT_S "$(cell $op "$opts" '`--http-body-timeout' 2)"
expect $op "option --http-idle-timeout default" "$http_idle" CONFIG_DEFAULT_HTTP_IDLE_TIMEOUT_S "$(cell $op "$opts" '`--http-idle-timeout' 2)"
lim='### Limits enforced per call'
expect $op "limit on the encoded request" "(${mib} MiB)" CONFIG_DEFAULT_MAX_MESSAGE "$(cell $op "$lim" 'encoded request' 2)"
expect $op "limit on the call deadline" "at most $max_timeout_ms ms" CONFIG_MAX_TIMEOUT_MS "$(cell $op "$lim" 'call deadline' 2)"
expect $op "limit on the ancestry of one artifact" "$ancestry artifacts" "config.c max_ancestry" "$(cell $op "$lim" 'ancestry of one artifact' 2)"
expect $op "limit on artifact ids per call" "1–$max_ids" "config.c max_ids" "$(cell $op "$lim" 'artifact ids per' 2)"
expect $op "limit on RecordOutput content" "≤ $((max_content / 1048576)) MiB" "config.c max_content" "$(cell $op "$lim" '`RecordOutput` title / content' 2)"
expect $op "limit on narrowed capabilities" "$narrowed" REGISTRY_MAX_NARROWED "$(cell $op "$lim" 'distinct narrowed step capabilities' 2)"
envelope=$(section docs/api.md '## The envelope' | tr '\n' ' ' | tr -s ' ')
expect docs/api.md "the envelope's default deadline" "(\`--timeout-ms\`, $timeout_ms)" CONFIG_DEFAULT_TIMEOUT_MS \
  "$(grep -oE '0 means the server default \([^)]*\)' <<<"$envelope")"
expect docs/api.md "the envelope's longest deadline" "cut to $max_timeout_ms." CONFIG_MAX_TIMEOUT_MS \
  "$(grep -oE 'larger values are cut to [0-9]+\.' <<<"$envelope")"

# --- 5. links -----------------------------------------------------------------------------
while IFS= read -r line; do
  [ -n "$line" ] && fail "$line"
done < <(perl -e '
  use strict; use warnings;
  my @files = @ARGV;
  my %slugs;
  sub slug { my $h = lc shift; $h =~ s/`//g; $h =~ s/[^\w\- ]//g; $h =~ s/ /-/g; return $h }
  sub headings {
    my ($f) = @_;
    return $slugs{$f} if $slugs{$f};
    open my $fh, "<:encoding(UTF-8)", $f or return {};
    my ($in, %seen, %s) = (0);
    while (<$fh>) {
      if (/^```/) { $in = !$in; next }
      next if $in || !/^#+ (.*?)\s*$/;
      my $x = slug($1);
      my $n = $seen{$x}++;
      $s{$n ? "$x-$n" : $x} = 1;
    }
    return $slugs{$f} = \%s;
  }
  for my $f (@files) {
    open my $fh, "<:encoding(UTF-8)", $f or next;
    my ($in, $ln) = (0, 0);
    (my $dir = $f) =~ s{[^/]*$}{};
    while (my $l = <$fh>) {
      $ln++;
      if ($l =~ /^```/) { $in = !$in; next }
      next if $in;
      $l =~ s/`[^`]*`//g;
      while ($l =~ /\]\(([^)\s]+)\)/g) {
        my $link = $1;
        next if $link =~ /^[a-z]+:/;
        my ($path, $anchor) = $link =~ /^([^#]*)(?:#(.*))?$/;
        my $target = $path eq "" ? $f : "$dir$path";
        1 while $target =~ s{(^|/)(?!\.\./)[^/]+/\.\./}{$1};
        if (!-e $target) { print "$f:$ln: the link $link names no file\n"; next }
        next unless defined $anchor && $target =~ /\.md$/;
        print "$f:$ln: the link $link names no heading of $target\n" unless headings($target)->{$anchor};
      }
    }
  }' README.md docs/*.md)

# --- 6. the evaluator version -------------------------------------------------------------
# The version docs/evidence.md says this build decides by, against EVALUATOR_VERSION.
version=$(define EVALUATOR_VERSION server/policy/evaluator.h)
evaluator=$(section docs/evidence.md '## The evaluator version' | tr '\n' ' ')
expect docs/evidence.md "the evaluator version" "evaluator version $version" EVALUATOR_VERSION \
  "$(grep -oE 'This build decides by evaluator version [0-9]+' <<<"$evaluator")"

# --- 7. charter-bench's options and workloads ---------------------------------------------
bench=$build/charter-bench
if [ -x "$bench" ] && [ -r docs/measuring.md ]; then
  bench_help=$("$bench" --help)
  bench_help_opts=$(grep -oE '^  --[a-z-]+(, --[a-z-]+)*' <<<"$bench_help" | grep -oE -- '--[a-z-]+' | sort -u)
  bench_doc_opts=$(section docs/measuring.md '## Options' | grep -E '^\| `-' | cut -d'|' -f2 |
    grep -oE -- '--[a-z-]+' | sort -u)
  bench_help_wls=$(awk '/^Workloads/ { on = 1; next } /^$/ { on = 0 } on' <<<"$bench_help" |
    grep -oE '^  [a-z-]+' | tr -d ' ' | sort -u)
  bench_doc_wls=$(section docs/measuring.md '## Workloads' | grep -E '^\| `[a-z]' | cut -d'|' -f2 |
    grep -oE '`[a-z-]+`' | tr -d '`' | sort -u)
  [ -n "$bench_help_opts" ] && [ -n "$bench_help_wls" ] ||
    fail "charter-bench --help lists no option or no workload"
  for o in $bench_help_opts; do
    grep -qx -- "$o" <<<"$bench_doc_opts" ||
      fail "docs/measuring.md Options: $o is printed by charter-bench --help but has no row"
  done
  for o in $bench_doc_opts; do
    grep -qx -- "$o" <<<"$bench_help_opts" ||
      fail "docs/measuring.md Options: $o has a row but charter-bench --help does not print it"
  done
  for w in $bench_help_wls; do
    grep -qx -- "$w" <<<"$bench_doc_wls" ||
      fail "docs/measuring.md Workloads: $w is printed by charter-bench --help but has no row"
  done
  for w in $bench_doc_wls; do
    grep -qx -- "$w" <<<"$bench_help_wls" ||
      fail "docs/measuring.md Workloads: $w has a row but charter-bench --help does not print it"
  done
fi

# --- 8. transcripts: evaluator fingerprints and the query library version ----------------
# A fingerprint is the SHA-256 of the text evaluator.c formats (format 2) for the version and
# the workflow version. The workflow versions a document may print it under: the SHA-256 of
# each file of deploy/workflows/ and every 64-digit hex a line of that document names a
# version with. A line followed by "recorded before evaluator versions were declared" shows
# a format-1 fingerprint, which only the build that made it could recompute: skipped.
format=$(grep -oE '"charter-evaluator-[0-9]+\\nversion=%d\\nworkflow=%s\\n"' \
  server/policy/evaluator.c | tr -d '"')
if [ -z "$format" ]; then
  fail "server/policy/evaluator.c: the fingerprint's format string was not found"
else
  while IFS= read -r line; do
    fail "$line"
  done < <(FORMAT="$format" VERSION="$version" perl -MDigest::SHA=sha256_hex -e '
    my @reference;
    for my $w (glob "deploy/workflows/*.json") {
      open my $fh, "<:raw", $w or die "$w: $!";
      local $/;
      push @reference, sha256_hex(<$fh>);
    }
    (my $format = $ENV{FORMAT}) =~ s/\\n/\n/g;
    for my $f (@ARGV) {
      open my $fh, "<", $f or die "$f: $!";
      my @lines = <$fh>;
      my %workflows = map { $_ => 1 } @reference;
      for (@lines) { $workflows{$1} = 1 while /\bversion\b.*?\b([0-9a-f]{64})\b/g }
      my %fingerprints = map { sha256_hex(sprintf $format, $ENV{VERSION}, $_) => 1 } keys %workflows;
      for my $i (0 .. $#lines) {
        next unless $lines[$i] =~ /^evaluator ([0-9a-f]{64})\s*$/;
        next if ($lines[$i + 1] // "") =~ /recorded before evaluator versions were declared/;
        printf "%s:%d: evaluator %s is not the fingerprint of evaluator version %s under any " .
          "workflow version the document or deploy/workflows/ names (what replay prints now)\n",
          $f, $i + 1, $1, $ENV{VERSION} unless $fingerprints{$1};
      }
    }' README.md docs/*.md)
fi
library=$(define STORE_LIBRARY_VERSION server/db/store.h | tr -d '"')
expect docs/http.md "Health/Check's libraryVersion" "$library" STORE_LIBRARY_VERSION \
  "$(grep -oE '"libraryVersion":"[0-9]+"' docs/http.md | head -n 1)"

if [ "$fails" -ne 0 ]; then
  echo "docs_drift: $fails statement(s) of the docs no longer match the code"
  exit 1
fi
echo "docs_drift: options, API reference, codes, limits, links, the evaluator version," \
  "charter-bench's options and the transcripts' fingerprints match the code"
exit 0
