#!/usr/bin/env bash
# Builds the Python client (clients/python) into a wheel offline, installs it with --no-index
# into a fresh venv that sees Debian's python3-protobuf (--system-site-packages), and runs
# test_client.py with that venv's interpreter against a real charterd (CTest "python_client").
# Usage: run.sh CHARTERD BUILD_DIR
# Debian's /usr/bin/python3 is used (CHARTER_PYTHON overrides it): python3-protobuf is
# installed for it, not for another Python on PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
charterd=$(realpath "${1:?usage: run.sh CHARTERD BUILD_DIR}")
build=$(realpath "${2:?usage: run.sh CHARTERD BUILD_DIR}")
py=${CHARTER_PYTHON:-/usr/bin/python3}

command -v protoc >/dev/null || { echo "run.sh: protoc is missing (run deploy/deps.sh test as root)" >&2; exit 1; }
for m in google.protobuf venv ensurepip pip setuptools wheel; do
  "$py" -c "import $m" 2>/dev/null ||
    { echo "run.sh: $py lacks the module $m (run deploy/deps.sh test as root)" >&2; exit 1; }
done

# Offline: pip must not ask an index for anything, not even its own newest version.
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

# pip builds in the source tree: build in a copy that keeps clients/python and proto/ side by
# side, as setup.py expects, so that the worktree stays clean.
work="$build/python-client"
rm -rf "$work"
mkdir -p "$work/src/clients" "$work/src/proto" "$work/dist"
cp -r "$root/clients/python" "$work/src/clients/python"
cp "$root/proto/charter.proto" "$work/src/proto/"
(cd "$work/src/clients/python" &&
  "$py" -m pip wheel --quiet --no-deps --no-build-isolation --no-index -w "$work/dist" .)
wheel=$(echo "$work"/dist/charter_client-*.whl)
echo "wheel: $(basename "$wheel"), $(stat -c %s "$wheel") bytes"

"$py" -m venv --system-site-packages "$work/venv"
# No index: protobuf>=3.20 must be met by Debian's python3-protobuf, nothing is downloaded.
"$work/venv/bin/python" -m pip install --quiet --no-index "$wheel"

cd "$work"
CHARTERD="$charterd" CHARTER_SOURCE_DIR="$root" PYTHONPATH="$root/tests" exec "$work/venv/bin/python" \
  "$here/test_client.py" -v
