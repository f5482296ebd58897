# Sourced by deploy/test.sh, deploy/sanitize.sh and deploy/fuzz.sh: starts a private
# redis-server on a unix socket in a fresh 0700 temporary folder, exports CHARTER_TEST_REDIS for
# the suites, and stops it (removing the folder) when the sourcing script exits.
# Usage: . deploy/private-redis.sh; private_redis_start
# Sets: private_redis_dir (the folder), CHARTER_TEST_REDIS (unix://<folder>/redis.sock).

private_redis_stop() {
  local dir=${private_redis_dir:-}
  [ -n "$dir" ] || return 0
  if [ -f "$dir/redis.pid" ]; then
    kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
    for _ in $(seq 50); do [ -f "$dir/redis.pid" ] || break; sleep 0.1; done
  fi
  rm -rf "$dir"
  private_redis_dir=
}

private_redis_start() {
  private_redis_dir=$(mktemp -d -t charter-test.XXXXXX)
  chmod 700 "$private_redis_dir"
  trap private_redis_stop EXIT
  local dir=$private_redis_dir
  redis-server --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 --dir "$dir" \
    --save '' --appendonly no --daemonize yes --pidfile "$dir/redis.pid" \
    --logfile "$dir/redis.log" --maxclients 2000 \
    $([ -f /usr/lib/redis/modules/redisearch.so ] && echo --loadmodule /usr/lib/redis/modules/redisearch.so)
  for _ in $(seq 100); do
    redis-cli -s "$dir/redis.sock" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  if ! redis-cli -s "$dir/redis.sock" ping >/dev/null; then
    echo "charter: redis-server did not start; see $dir/redis.log" >&2
    cat "$dir/redis.log" >&2
    return 1
  fi
  export CHARTER_TEST_REDIS="unix://$dir/redis.sock"
}
