-- queries/checkpoints.lua - a run's checkpoints and their one-time resumption. The executor
-- that holds a run's lease stores the run's latest checkpoint (a token charterd sealed with
-- its integrity key: the database never sees the key and cannot forge one) before each step.
-- Resuming consumes a checkpoint exactly once across every charterd: the checkpoint's id joins
-- P:checkpoints:consumed in the same call that moves the run from interrupted to queued.

local checkpoints = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local raise, check_id, check_text = validation.raise, validation.check_id, validation.check_text
local check_count, json_arg = validation.check_count, validation.json_arg
local prefix = validation.prefix
local hash = graph.hash
local check_sealed, head_conflict = events.check_sealed, events.head_conflict
local write_event = events.write_event

local CHECKPOINT_TOKEN_MAX = 1048576 -- a token is base64 of a small JSON cursor and a MAC

--[[ charter_save_checkpoint
call: save_checkpoint(run_id, owner, checkpoint_id, token)
keys: P. args: run_id, owner (the executor's lease owner id), checkpoint_id, token (1 to
  1048576 bytes).
reply: {"saved":true} when owner holds the run's lease: the token and its id become the run's
  latest checkpoint (fields checkpoint, checkpoint_id; a pending resume_from is cleared); else
  {"saved":false} and nothing is written.
errors: not_found (run), invalid. ]]
local function charter_save_checkpoint(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local owner = check_text(args[2], 'owner')
    local ckpt = check_id(args[3], 'checkpoint_id')
    local token = check_text(args[4], 'token')
    if #token > CHECKPOINT_TOKEN_MAX then
        raise('invalid', 'token longer than ' .. CHECKPOINT_TOKEN_MAX .. ' bytes')
    end
    local key = P .. ':run:' .. run_id
    local h = hash(key)
    if not h then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    if h.lease_owner ~= owner then
        return cjson.encode({saved = false})
    end
    redis.call('HSET', key, 'checkpoint', token, 'checkpoint_id', ckpt)
    redis.call('HDEL', key, 'resume_from')
    return cjson.encode({saved = true})
end

--[[ charter_get_checkpoint
call: get_checkpoint(run_id)
keys: P. args: run_id.
reply: {"run_id":"<id>","status":"<s>","workflow":"<version>","checkpoint_id":"<id or empty>","token":"<token
  or empty>","resume_from":"<checkpoint id a resume queued the run from, or empty>",
  "consumed":bool (the latest checkpoint was consumed),"model_calls":n (the model requests the
  run's executors counted before sending them, which may be more than its checkpoint's)}.
errors: not_found (run), invalid. ]]
local function charter_get_checkpoint(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local h = hash(P .. ':run:' .. run_id)
    if not h then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    local id = h.checkpoint_id or ''
    local consumed = id ~= '' and redis.call('SISMEMBER', P .. ':checkpoints:consumed', id) == 1
    return cjson.encode({run_id = run_id, status = h.status or '', workflow = h.workflow or '',
                         checkpoint_id = id, token = h.checkpoint or '',
                         resume_from = h.resume_from or '', consumed = consumed,
                         model_calls = tonumber(h.model_calls or '0') or 0})
end

--[[ charter_resume_run
call: resume_run(run_id, checkpoint_id, workflow, counters, event)
keys: P. args: run_id, checkpoint_id, workflow (the version the checkpoint was taken under),
  JSON counters {wall_clock_ms,model_calls,steps,deliveries} (the checkpoint's), sealed event
  status_changed whose detail starts with "interrupted -> queued".
reply: {"ok":true,"seq":n} when the checkpoint was not consumed before, the run is interrupted,
  follows that workflow version, has this checkpoint as its latest and its budget is not
  exhausted by the counters (model calls: the checkpoint's, or the run's when more were sent
  after it, e.g. the request in flight when its executor stopped): the checkpoint id joins
  P:checkpoints:consumed, the run becomes queued with resume_from = checkpoint_id (a cancel
  request on it kept) and is pushed on P:runq, and the event is written, all in this one call.
  Else {"ok":false,"reason":
  "consumed"|"status"|"workflow"|"stale"|"budget","status":"<s>","latest":"<id>",
  "workflow":"<run's version>","budget":"<name>"} and nothing is written; or the conflict reply.
errors: not_found (run), invalid. ]]
local function charter_resume_run(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local ckpt = check_id(args[2], 'checkpoint_id')
    local workflow = check_text(args[3], 'workflow', '')
    local counters = json_arg(args[4], 'counters')
    local ev = check_sealed(args[5], 'event', 'status_changed')
    local key = P .. ':run:' .. run_id
    local h = hash(key)
    if not h then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    local st = h.status or ''
    local function no(reason, extra)
        local r = {ok = false, reason = reason, status = st, latest = h.checkpoint_id or '',
                   workflow = h.workflow or ''}
        for k, v in pairs(extra or {}) do
            r[k] = v
        end
        return cjson.encode(r)
    end
    if redis.call('SISMEMBER', P .. ':checkpoints:consumed', ckpt) == 1 then
        return no('consumed')
    end
    if (h.workflow or '') ~= workflow then
        return no('workflow')
    end
    if st ~= 'interrupted' then
        return no('status')
    end
    if (h.checkpoint_id or '') ~= ckpt then
        return no('stale')
    end
    local pairs_ = {{'max_wall_clock_ms', 'wall_clock_ms'}, {'max_model_calls', 'model_calls'},
                    {'max_steps', 'steps'}, {'max_deliveries', 'deliveries'}}
    for _, p in ipairs(pairs_) do
        local max = tonumber(h[p[1]] or '0') or 0
        local used = check_count(counters[p[2]] or 0, p[2], 0, 1e15)
        if p[2] == 'model_calls' then
            -- A request sent after the checkpoint was paid for: resuming sends it again.
            used = math.max(used, tonumber(h.model_calls or '0') or 0)
        end
        if max > 0 and used >= max then
            return no('budget', {budget = p[1]})
        end
    end
    local conflict = head_conflict(P, run_id, ev)
    if conflict then
        return conflict
    end
    local expect = 'interrupted -> queued'
    if ev.detail:sub(1, #expect) ~= expect then
        raise('invalid', 'event.detail must start with "' .. expect .. '"')
    end
    redis.call('SADD', P .. ':checkpoints:consumed', ckpt)
    redis.call('HSET', key, 'status', 'queued', 'resume_from', ckpt)
    -- A cancel request stays: one made before the executor died (the run interrupted with it)
    -- ends the resumed run cancelled at its executor's first check, never forgotten.
    redis.call('RPUSH', P .. ':runq', run_id)
    local seq = write_event(P, run_id, ev)
    return cjson.encode({ok = true, seq = seq})
end

-- Exported: what later files and the registry use.
checkpoints.charter_save_checkpoint = charter_save_checkpoint
checkpoints.charter_get_checkpoint = charter_get_checkpoint
checkpoints.charter_resume_run = charter_resume_run
end
