#!/usr/bin/env bash
# Starts and stops a Redis Cluster on loopback ports for trying charterd on a cluster and for
# the cluster suite: 3 masters and 3 replicas, each redis-server with its own folder under one
# directory, joined by `redis-cli --cluster create --cluster-replicas 1`. A short node timeout
# (1000 ms) makes a replica take over quickly when its master dies.
#
# Usage: deploy/cluster.sh start DIR [BASEPORT]   (ports BASEPORT..BASEPORT+5, default 7100;
#                                                   prints the cluster:// URL when ok)
#        deploy/cluster.sh stop DIR
set -euo pipefail

cmd=${1:-}
dir=${2:-}
base=${3:-7100}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start DIR [BASEPORT] | stop DIR" >&2
  exit 2
fi

cluster_stop() {
  for p in "$dir"/node-*/redis.pid; do
    [ -f "$p" ] || continue
    kill "$(cat "$p")" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    ls "$dir"/node-*/redis.pid >/dev/null 2>&1 || break
    sleep 0.1
  done
}

cluster_start() {
  mkdir -p "$dir"
  chmod 700 "$dir"
  local module=
  [ -f /usr/lib/redis/modules/redisearch.so ] && module="--loadmodule /usr/lib/redis/modules/redisearch.so"
  local addrs=()
  for i in 0 1 2 3 4 5; do
    local port=$((base + i)) d="$dir/node-$i"
    mkdir -p "$d"
    # shellcheck disable=SC2086
    redis-server --port "$port" --bind 127.0.0.1 --dir "$d" --cluster-enabled yes \
      --cluster-config-file nodes.conf --cluster-node-timeout 1000 \
      --cluster-replica-validity-factor 0 --repl-diskless-sync-delay 0 --save '' --appendonly no \
      --daemonize yes \
      --pidfile "$d/redis.pid" --logfile "$d/redis.log" --maxclients 2000 $module ||
      { echo "cluster: redis-server on port $port did not start; see $d/redis.log" >&2; return 1; }
    addrs+=("127.0.0.1:$port")
  done
  for i in 0 1 2 3 4 5; do
    for _ in $(seq 100); do
      redis-cli -p $((base + i)) ping >/dev/null 2>&1 && break
      sleep 0.1
    done
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
    { echo "cluster: redis-cli --cluster create failed; see $dir/create.log" >&2; cat "$dir/create.log" >&2; return 1; }
  # Every node must see the whole cluster ok, and every master have its replica in sync,
  # before a client relies on the slot map (or on WAIT).
  for _ in $(seq 300); do
    local ok=0 synced=0
    for i in 0 1 2 3 4 5; do
      redis-cli -p $((base + i)) cluster info 2>/dev/null | grep -q '^cluster_state:ok' && ok=$((ok + 1))
      redis-cli -p $((base + i)) info replication 2>/dev/null | tr -d '\r' |
        grep -q '^slave0:.*state=online' && synced=$((synced + 1))
    done
    if [ "$ok" = 6 ] && [ "$synced" = 3 ]; then
      local IFS=,
      echo "cluster://${addrs[*]}"
      return 0
    fi
    sleep 0.1
  done
  echo "cluster: cluster_state did not become ok; see $dir/node-*/redis.log" >&2
  return 1
}

case "$cmd" in
start) cluster_start ;;
stop) cluster_stop ;;
*)
  echo "usage: $0 start DIR [BASEPORT] | stop DIR" >&2
  exit 2
  ;;
esac
