#!/usr/bin/env bash
# Rule IDs: every rule of the gates, the commit and the delegation chain has a stable ID
# (RULE-...) listed in the "Rule IDs" table of the docs (README.md or docs/*.md; today
# docs/concepts.md), where the rule is stated. Each must also
# appear at the line that enforces it (a comment in server/ or queries/) and in the test that
# checks it (a comment in tests/), so `grep -rn RULE-ID` finds all three. This check lists every
# ID missing from one of the three places, and every ID used in the code or the tests that the
# table does not define.
#
# Usage: tests/rules.sh [SOURCE_DIR]   (default: this script's tree)
# Exit status: 0 every ID in its three places; 1 an ID is missing somewhere or unknown; 2 the
# docs have no rule table.
set -uo pipefail
src=$(cd "${1:-$(dirname "$0")/..}" && pwd) || exit 2
cd "$src" || exit 2

# The documents the rule table may live in.
docs=(README.md docs/*.md)

# The table rows: | `RULE-...` | gate | statement |
mapfile -t ids < <(grep -ohE '^\| `RULE-[A-Z0-9-]+` \|' "${docs[@]}" | grep -oE 'RULE-[A-Z0-9-]+')
if [ "${#ids[@]}" -eq 0 ]; then
  echo "rules: README.md and docs/*.md have no rule table (rows of the form | \`RULE-...\` | ...)" >&2
  exit 2
fi

code=(server/*/*.c server/*/*.h queries/*.lua)
tests=(tests/*.c tests/harness/*.c)
bad=0
# has ID FILES...: whether ID occurs whole (not as the prefix of a longer ID) in one of FILES.
has() {
  local id=$1
  shift
  grep -qE -- "${id}([^A-Z0-9-]|\$)" "$@" 2>/dev/null
}
for id in "${ids[@]}"; do
  missing=()
  has "$id" "${code[@]}" || missing+=("enforcement (server/ or queries/)")
  has "$id" "${tests[@]}" || missing+=("test (tests/)")
  if [ "$(cat "${docs[@]}" | grep -cE -- "^\| \`${id}\` \|")" -ne 1 ]; then
    missing+=("exactly one table row in README.md or docs/*.md")
  fi
  if [ "${#missing[@]}" -gt 0 ]; then
    bad=1
    printf 'rules: %s: no %s\n' "$id" "$(IFS=,; echo "${missing[*]}" | sed 's/,/, no /g')"
  fi
done

# IDs named in the code, the tests or the docs that the table does not define.
mapfile -t used < <(grep -ohE 'RULE-[A-Z0-9]+(-[A-Z0-9]+)*' "${docs[@]}" "${code[@]}" "${tests[@]}" \
  2>/dev/null | sort -u)
for id in "${used[@]}"; do
  case " ${ids[*]} " in
  *" $id "*) ;;
  *)
    # A family name such as RULE-COMMIT-* in prose is not an ID.
    if ! printf '%s\n' "${ids[@]}" | grep -q "^${id}-"; then
      bad=1
      echo "rules: $id is used but the docs' rule table does not define it"
    fi
    ;;
  esac
done

if [ "$bad" -ne 0 ]; then
  echo "rules: FAIL (${#ids[@]} rules in the table)"
  exit 1
fi
echo "rules: ${#ids[@]} rules, each in the docs' table, at its enforcement and in its test"
exit 0
