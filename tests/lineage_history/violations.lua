-- tests/lineage_history/violations.lua - a query source that breaks "lineage is history" in
-- each way tests/lineage_history.pl must name; the CTest lineage_history_bites expects it to fail
-- on this file (one violation per function, none in the creator).
local violations = {}
do
local function charter_create_artifact(keys, args)
    local key = keys[1] .. ':artifact:' .. args[1]
    redis.call('HSET', key, 'conf', 0, 'integrity', 1, 'hash', args[2])
    redis.call('SADD', key .. ':derived_from', args[3])
    keep(key)
end

local function keep(key)
    redis.call('HSET', key, 'summary', '{}')
end

local function charter_relabel(keys, args)
    local key = keys[1] .. ':artifact:' .. args[1]
    redis.call('HSET', key, 'title', 't', 'conf', 2)
end

local function charter_unlink(keys, args)
    local P = keys[1]
    redis.call('SREM', P .. ':artifact:' .. args[1] .. ':derived_from', args[2])
end

local function charter_reroot(keys, args)
    local base = keys[1] .. ':artifact:' .. args[1]
    redis.call('DEL', base .. ':from_resource')
end

local function charter_forget(keys, args)
    redis.call('HDEL', keys[1] .. ':artifact:' .. args[1], 'summary_hash')
end
violations.charter_create_artifact = charter_create_artifact
end
