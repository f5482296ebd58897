# A private redis-server for the tests: a unix socket in a 0700 folder, no TCP port, no
# persistence, RediSearch when installed, --maxclients 2000. tests/redis_fixture.sh (the CTest
# fixture that gives every suite its test Redis) starts it through these functions; source the
# file to start one of your own:
#   . deploy/private-redis.sh; private_redis_start
# private_redis_start makes a fresh temporary folder (private_redis_dir), exports
# CHARTER_TEST_REDIS=unix://<folder>/redis.sock and stops the server, removing the folder, when
# the sourcing script exits. private_redis_launch DIR and private_redis_halt DIR start and stop
# the same server in a folder of the caller's.

# Stops the redis-server whose pid file is in DIR, if it is still the redis-server of that
# folder, and waits up to 5 s for it to remove its pid file.
private_redis_halt() {
  local dir=$1 pid
  [ -f "$dir/redis.pid" ] || return 0
  pid=$(cat "$dir/redis.pid" 2>/dev/null) || return 0
  # A pid file left by a server that died may name another process by now.
  case $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) in
    redis-server*"$dir/redis.sock"*)
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do [ -f "$dir/redis.pid" ] || break; sleep 0.1; done
      ;;
  esac
}

# Starts redis-server in DIR (an existing folder, mode 0700) and waits until it answers.
# Returns 1, printing its log, when it does not.
private_redis_launch() {
  local dir=$1
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
}

private_redis_stop() {
  local dir=${private_redis_dir:-}
  [ -n "$dir" ] || return 0
  private_redis_halt "$dir"
  rm -rf "$dir"
  private_redis_dir=
}

private_redis_start() {
  private_redis_dir=$(mktemp -d -t charter-test.XXXXXX)
  chmod 700 "$private_redis_dir"
  trap private_redis_stop EXIT
  private_redis_launch "$private_redis_dir" || return 1
  export CHARTER_TEST_REDIS="unix://$private_redis_dir/redis.sock"
}
