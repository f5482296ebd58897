-- queries/executor.lua - the run queue and the executors' leases. A run the built-in runner
-- drives waits in the graph's queue until one executor thread of one charterd claims it; the
-- claim is a lease on the database's clock, renewed while the run executes, so a run whose
-- holder died is found by any charterd (its lease lapsed) and marked interrupted. Cancellation
-- requests and the run's budget counters travel with the renewal.

local executor = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local raise, check_id, check_text = validation.raise, validation.check_id, validation.check_text
local check_count, json_arg = validation.check_count, validation.json_arg
local prefix = validation.prefix
local hash = graph.hash
local charter_transition_run = runs.charter_transition_run

local BUDGETS = {'max_wall_clock_ms', 'max_model_calls', 'max_steps', 'max_deliveries'}
local COUNTERS = {'wall_clock_ms', 'model_calls', 'steps', 'deliveries'}

local function now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

--[[ charter_enqueue_run
call: enqueue_run(run_id, budget)
keys: P. args: run_id, JSON budget {max_wall_clock_ms,max_model_calls,max_steps,
  max_deliveries} (each optional, an integer >= 1).
reply: {"queued":true} when the run is queued (its status must be "queued": charterd moves
  it there first), the budget is stored on the run and the run is pushed on P:runq; else
  {"queued":false,"status":"<current>"} and nothing is written.
errors: not_found (run), invalid. ]]
local function charter_enqueue_run(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local budget = json_arg(args[2], 'budget')
    local key = P .. ':run:' .. run_id
    local cur = redis.call('HGET', key, 'status')
    if not cur then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    if cur ~= 'queued' then
        return cjson.encode({queued = false, status = cur})
    end
    for _, b in ipairs(BUDGETS) do
        if budget[b] ~= nil then
            redis.call('HSET', key, b, string.format('%d', check_count(budget[b], b, 1, 1e15)))
        end
    end
    redis.call('RPUSH', P .. ':runq', run_id)
    return cjson.encode({queued = true})
end

--[[ charter_claim_run
call: claim_run(owner, lease_ms)
keys: P. args: owner (the executor's id), lease_ms (integer 100..600000).
reply: {"run_id":"<id>","lease_until":<ms>,"status":"queued"|"recovering"} for the first run
  popped from P:runq that is queued (to execute) or recovering without a holder (a recovery
  charter_request_recovery queued), now leased to owner until the database's time plus
  lease_ms (P:leases scores it); {"run_id":""} when none waits. Ids popped whose run is in
  another status, or already held, are dropped.
errors: invalid. ]]
local function charter_claim_run(keys, args)
    local P = prefix(keys)
    local owner = check_text(args[1], 'owner')
    local lease = check_count(args[2], 'lease_ms', 100, 600000)
    while true do
        local id = redis.call('LPOP', P .. ':runq')
        if not id then
            return cjson.encode({run_id = ''})
        end
        local key = P .. ':run:' .. id
        local st, holder = unpack(redis.call('HMGET', key, 'status', 'lease_owner'))
        if st == 'queued' or (st == 'recovering' and not holder) then
            local untilms = now_ms() + lease
            redis.call('HSET', key, 'lease_owner', owner, 'lease_until',
                       string.format('%d', untilms))
            redis.call('ZADD', P .. ':leases', untilms, id)
            return cjson.encode({run_id = id, lease_until = untilms, status = st})
        end
    end
end

--[[ charter_request_recovery
call: request_recovery(run_id, event)
keys: P. args: run_id, sealed event status_changed whose detail starts with
  "<current status> -> recovering".
reply: {"ok":true,"seq":n,"from":"<old>"} when the run was blocked, interrupted or error: in
  this one call it becomes recovering (a recovery claims a run once), loses any holder, and is
  pushed on P:runq, where an executor thread claims it with a lease (charter_claim_run) and
  runs the recovery step; else {"ok":false,"status":"<current>"} and nothing is written; or
  the conflict reply.
errors: not_found (run), invalid. ]]
local function charter_request_recovery(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local reply = charter_transition_run(keys, {run_id, 'blocked,interrupted,error',
                                                'recovering', args[2]})
    if cjson.decode(reply).ok == true then
        redis.call('HDEL', P .. ':run:' .. run_id, 'lease_owner', 'lease_until')
        redis.call('ZREM', P .. ':leases', run_id)
        redis.call('RPUSH', P .. ':runq', run_id)
    end
    return reply
end

--[[ charter_renew_lease
call: renew_lease(run_id, owner, lease_ms, counters)
keys: P. args: run_id, owner, lease_ms (integer 100..600000), JSON counters {wall_clock_ms,
  model_calls,steps,deliveries} (each optional, integer >= 0, stored on the run).
reply: {"held":true,"status":"<s>","cancel":"<reason or empty>","budget":{...}} when owner
  still holds the lease: it now runs until the database's time plus lease_ms; else
  {"held":false,"status":"<s>"} and nothing is written (the lease lapsed and was reaped, or
  another owner holds it). errors: not_found (run), invalid. ]]
local function charter_renew_lease(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local owner = check_text(args[2], 'owner')
    local lease = check_count(args[3], 'lease_ms', 100, 600000)
    local counters = json_arg(args[4], 'counters')
    local key = P .. ':run:' .. run_id
    local h = hash(key)
    if not h then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    if h.lease_owner ~= owner then
        return cjson.encode({held = false, status = h.status or ''})
    end
    for _, c in ipairs(COUNTERS) do
        if counters[c] ~= nil then
            redis.call('HSET', key, c, string.format('%d', check_count(counters[c], c, 0, 1e15)))
        end
    end
    local untilms = now_ms() + lease
    redis.call('HSET', key, 'lease_until', string.format('%d', untilms))
    redis.call('ZADD', P .. ':leases', untilms, run_id)
    local budget = {}
    for _, b in ipairs(BUDGETS) do
        budget[b] = tonumber(h[b] or '0') or 0
    end
    return cjson.encode({held = true, status = h.status or '', cancel = h.cancel_reason or '',
                         budget = budget})
end

--[[ charter_release_lease
call: release_lease(run_id, owner)
keys: P. args: run_id, owner.
reply: {"released":bool}: true when owner held the lease, which is now gone.
errors: invalid. ]]
local function charter_release_lease(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local owner = check_text(args[2], 'owner')
    local key = P .. ':run:' .. run_id
    if redis.call('HGET', key, 'lease_owner') ~= owner then
        return cjson.encode({released = false})
    end
    redis.call('HDEL', key, 'lease_owner', 'lease_until')
    redis.call('ZREM', P .. ':leases', run_id)
    return cjson.encode({released = true})
end

--[[ charter_reap_leases
call: reap_leases()
keys: P. args: none.
reply: {"runs":[ids]}: the runs whose lease lapsed (lease_until <= the database's time), each
  now without a holder, oldest lapse first, at most 100; charterd marks each interrupted (one
  transition each). errors: none. ]]
local function charter_reap_leases(keys, args)
    local P = prefix(keys)
    local out = {}
    local ids = redis.call('ZRANGEBYSCORE', P .. ':leases', '-inf', now_ms(), 'LIMIT', 0, 100)
    for _, id in ipairs(ids) do
        redis.call('HDEL', P .. ':run:' .. id, 'lease_owner', 'lease_until')
        redis.call('ZREM', P .. ':leases', id)
        out[#out + 1] = id
    end
    return cjson.encode({runs = out})
end

--[[ charter_request_cancel
call: request_cancel(run_id, reason)
keys: P. args: run_id, reason (text, may be empty).
reply: {"status":"<current>","leased":bool}: the cancel reason is stored on the run when its
  status is created, queued, running, recovering or pending_approval (a leased run's executor
  observes it at its next renewal), or blocked, error or interrupted (resting, but
  recoverable: charterd then ends it cancelled, so no recovery delivers); nothing is written
  for completed, cancelled or budget_exhausted runs.
errors: not_found (run), invalid. ]]
local function charter_request_cancel(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local reason = check_text(args[2], 'reason', '')
    local key = P .. ':run:' .. run_id
    local h = hash(key)
    if not h then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    local s = h.status or ''
    if s == 'created' or s == 'queued' or s == 'running' or s == 'recovering' or
        s == 'pending_approval' or s == 'blocked' or s == 'error' or s == 'interrupted' then
        if reason == '' then
            reason = 'cancelled'
        end
        redis.call('HSET', key, 'cancel_reason', reason)
    end
    return cjson.encode({status = s, leased = (h.lease_owner or '') ~= ''})
end

--[[ charter_cancel_unclaimed
call: cancel_unclaimed(run_id, event)
keys: P. args: run_id, sealed event status_changed whose detail starts with
  "<current status> -> cancelled".
reply: {"ok":true,"seq":n,"from":"<old>"} when nothing executes the run: it is created, queued,
  blocked, error or interrupted, or recovering without a holder (a recovery
  charter_request_recovery queued that no executor has claimed yet); in this one call it
  becomes cancelled and leaves P:runq, so no executor claims it afterwards. Else
  {"ok":false,"status":"<current>"} and nothing is written (a held run's executor observes
  charter_request_cancel's reason at its next renewal); or the conflict reply.
errors: not_found (run), invalid. ]]
local function charter_cancel_unclaimed(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local st, holder = unpack(redis.call('HMGET', P .. ':run:' .. run_id, 'status',
                                         'lease_owner'))
    if st == 'recovering' and holder then
        return cjson.encode({ok = false, status = st})
    end
    local reply = charter_transition_run(keys, {run_id,
        'created,queued,blocked,error,interrupted,recovering', 'cancelled', args[2]})
    if cjson.decode(reply).ok == true then
        redis.call('LREM', P .. ':runq', 0, run_id)
    end
    return reply
end

--[[ charter_list_leases
call: list_leases()
keys: P. args: none.
reply: {"leases":[{"run_id":"<id>","owner":"<owner>","lease_until":<ms>}]}: every run held
  by an executor, soonest lapse first, at most 1000 (a starting charterd releases those of
  its own host whose process is gone). errors: none. ]]
local function charter_list_leases(keys, args)
    local P = prefix(keys)
    local out = {}
    local ids = redis.call('ZRANGE', P .. ':leases', 0, 999, 'WITHSCORES')
    for i = 1, #ids, 2 do
        local owner = redis.call('HGET', P .. ':run:' .. ids[i], 'lease_owner')
        if owner then
            out[#out + 1] = {run_id = ids[i], owner = owner, lease_until = tonumber(ids[i + 1])}
        end
    end
    return cjson.encode({leases = out})
end

-- Exported: what later files and the registry use.
executor.charter_enqueue_run = charter_enqueue_run
executor.charter_claim_run = charter_claim_run
executor.charter_request_recovery = charter_request_recovery
executor.charter_renew_lease = charter_renew_lease
executor.charter_release_lease = charter_release_lease
executor.charter_reap_leases = charter_reap_leases
executor.charter_request_cancel = charter_request_cancel
executor.charter_cancel_unclaimed = charter_cancel_unclaimed
executor.charter_list_leases = charter_list_leases
end
