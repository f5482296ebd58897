-- queries/runs.lua - runs, their status transitions, contexts and the receipts attached to a
-- run or one of its deliveries.

local runs = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local RUN_STATUSES = library.RUN_STATUSES
local raise, present, check_id = validation.raise, validation.present, validation.check_id
local check_invocation, check_text = validation.check_invocation, validation.check_text
local check_count, json_arg = validation.check_count, validation.json_arg
local prefix = validation.prefix
local now, hash, members, exists = graph.now, graph.hash, graph.members, graph.exists
local decode_list, run_object = graph.decode_list, graph.run_object
local event_object, delivery_object = graph.event_object, graph.delivery_object
local artifact_object, check_limit = graph.artifact_object, graph.check_limit
local check_sealed, head_table = events.check_sealed, events.head_table
local head_conflict, write_event = events.head_conflict, events.write_event

--[[ charter_create_run
call: create_run(run, event)
keys: P. args: JSON {id,task,mode,workflow}, sealed event run_created (seq 1, prev "").
reply: {"run":{id,task,mode,status,workflow,seq,created_at,head},"seq":1}: the run (status
  "created") and its first event, in P:runs scored by created_at; or the conflict reply.
errors: exists (the id is taken), invalid. ]]
local function charter_create_run(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'run')
    local id = check_id(doc.id, 'id')
    local task = check_text(doc.task, 'task', '')
    local mode = check_text(doc.mode, 'mode', '')
    local workflow = check_text(doc.workflow, 'workflow', '')
    local ev = check_sealed(args[2], 'event', 'run_created')
    local key = P .. ':run:' .. id
    if exists(key) then
        raise('exists', 'run ' .. id .. ' exists')
    end
    local conflict = head_conflict(P, id, ev)
    if conflict then
        return conflict
    end
    local ts, tnum = now()
    redis.call('HSET', key, 'id', id, 'task', task, 'mode', mode, 'status', 'created', 'seq', 0,
               'workflow', workflow, 'created_at', ts)
    redis.call('ZADD', P .. ':runs', tnum, id)
    local seq = write_event(P, id, ev)
    return cjson.encode({run = run_object(hash(key)), seq = seq})
end

--[[ charter_transition_run
call: transition_run(run_id, from, to, event)
keys: P. args: run_id, from (comma list of statuses), to (a status), sealed event
  status_changed whose detail starts with "<current status> -> <to>".
reply: {"ok":true,"seq":n,"from":"<old>"} when the status was one of from: the status becomes
  to and the event is written; else {"ok":false,"status":"<current>"} and nothing is written;
  or the conflict reply. A recovery claims a run once.
errors: not_found (run), invalid (also a detail that names another transition). ]]
local function charter_transition_run(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local from = check_text(args[2], 'from')
    local to = check_text(args[3], 'to')
    local ev = check_sealed(args[4], 'event', 'status_changed')
    if not RUN_STATUSES[to] then
        raise('invalid', 'to must be a run status')
    end
    local allowed = {}
    for s in from:gmatch('[^,]+') do
        if not RUN_STATUSES[s] then
            raise('invalid', 'from must be a comma list of run statuses')
        end
        allowed[s] = true
    end
    local key = P .. ':run:' .. run_id
    local cur = redis.call('HGET', key, 'status')
    if not cur then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    if not allowed[cur] then
        return cjson.encode({ok = false, status = cur})
    end
    local conflict = head_conflict(P, run_id, ev)
    if conflict then
        return conflict
    end
    local expect = cur .. ' -> ' .. to
    if ev.detail:sub(1, #expect) ~= expect then
        raise('invalid', 'event.detail must start with "' .. expect .. '"')
    end
    redis.call('HSET', key, 'status', to)
    local seq = write_event(P, run_id, ev)
    return cjson.encode({ok = true, seq = seq, from = cur})
end

--[[ charter_unfinished_runs
call: unfinished_runs()
keys: P. args: none.
reply: {"runs":[ids]}: every run whose status is running, recovering or pending_approval and
  whose executor lease (charter_claim_run) is not live on the database's clock, but for a
  recovery still on P:runq (charter_request_recovery queued it for an executor), oldest first
  (charterd marks each interrupted at startup, one transition per run; a run another live
  charterd executes keeps its status). errors: none. ]]
local function charter_unfinished_runs(keys, args)
    local P = prefix(keys)
    local out = {}
    local _, tnow = now()
    for _, id in ipairs(redis.call('ZRANGE', P .. ':runs', 0, -1)) do
        local cur, lease = unpack(redis.call('HMGET', P .. ':run:' .. id, 'status', 'lease_until'))
        local live = lease and (tonumber(lease) or 0) > tnow * 1000
        -- A recovery on P:runq, not claimed yet, waits for an executor: it is not unfinished.
        if cur == 'recovering' and not lease and redis.call('LPOS', P .. ':runq', id) then
            live = true
        end
        if (cur == 'running' or cur == 'recovering' or cur == 'pending_approval') and not live then
            out[#out + 1] = id
        end
    end
    return cjson.encode({runs = out})
end

--[[ charter_run_head
call: run_head(run_id)
keys: P. args: run_id.
reply: {"exists":bool,"seq":n,"hash":"<hex>","status":"<s>","now":"<t>","next_context":"c<n>"}:
  what charterd seals the run's next event from (seq 0 and hash "" for a run without events or
  one that does not exist). errors: invalid. ]]
local function charter_run_head(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    return cjson.encode(head_table(P, run_id))
end

-- The artifact fields get_run returns without content: read with HMGET, so a large content
-- is never copied into Lua.
local ARTIFACT_META = {'run_id', 'kind', 'title', 'conf', 'integrity', 'input_ids', 'hash',
                       'capture_complete', 'context_id', 'step', 'created_at'}

local function artifact_meta(key)
    local v = redis.call('HMGET', key, unpack(ARTIFACT_META))
    if v[1] == false then
        return nil
    end
    local h = {}
    for i, f in ipairs(ARTIFACT_META) do
        if v[i] then
            h[f] = v[i]
        end
    end
    return h
end

--[[ charter_get_run
call: get_run(run_id, after_seq, limit, content?, only?, artifacts_after?)
keys: P. args: run_id, after_seq (integer >= 0), limit (0: 1000; at most 100000), content
  ("0": artifacts without content; anything else or absent: with it), only (an artifact id:
  that artifact alone, when it belongs to the run; "" or absent: every artifact),
  artifacts_after (integer >= 0: the answer is paged; absent or "": the whole run).
reply: {"run":{...},"events":[...],"deliveries":[...],"artifacts":[...]}: the events stored
  at seqs after_seq+1 .. min(after_seq+limit, the run's seq), ascending; every delivery of
  the run (by event_seq); the artifacts of the run in creation order, with edges and (unless
  content is "0") content (callers redact). Paged (artifacts_after given): the deliveries
  are those the page's events decided (an allowed delivery_decided or invoke_decided event
  and the delivery it committed), and the artifacts those whose place in
  P:run:<id>:artifacts is after artifacts_after, at most limit, with "artifacts_next": the
  place of the last one when more follow, else 0.
  A run that was archived (charter_remove_run) is not_found; charter_archived_run, or the
  archive folder's index once its entry expired, says where it went.
errors: not_found (run), invalid. ]]
-- Every delivery of the run, by event_seq.
local function all_deliveries(P, base)
    local deliveries = {}
    for _, inv in ipairs(members(base .. ':deliveries')) do
        local d = hash(P .. ':delivery:' .. inv)
        if d then
            deliveries[#deliveries + 1] = delivery_object(d, P)
        end
    end
    table.sort(deliveries, function(a, b)
        return (a.event_seq or 0) < (b.event_seq or 0)
    end)
    return deliveries
end

-- The kinds of event that commit a delivery (a send, or a tool call's effect).
local COMMITS = {delivery_decided = true, invoke_decided = true}

-- The deliveries the events of a page decided: each allowed delivery_decided or invoke_decided
-- event names its invocation in its detail, and its delivery records the event's seq.
local function page_deliveries(P, run_id, events)
    local deliveries = {}
    for _, e in ipairs(events) do
        if COMMITS[e.kind] and e.outcome == 'allow' then
            local ok, detail = pcall(cjson.decode, e.detail or '')
            local inv = ok and type(detail) == 'table' and detail.invocation_id
            local d = type(inv) == 'string' and hash(P .. ':delivery:' .. inv)
            if d and d.run_id == run_id and tonumber(d.event_seq) == e.seq then
                deliveries[#deliveries + 1] = delivery_object(d, P)
            end
        end
    end
    return deliveries
end

-- One page of the run's artifact ids after place after (their scores in base:artifacts), at
-- most limit, and the place the next page starts after (0: none follows).
local function page_artifacts(base, after, limit)
    local flat = redis.call('ZRANGEBYSCORE', base .. ':artifacts', '(' .. string.format('%d', after),
                            '+inf', 'WITHSCORES', 'LIMIT', 0, limit + 1)
    local ids, last = {}, 0
    for i = 1, math.min(#flat, 2 * limit), 2 do
        ids[#ids + 1] = flat[i]
        last = tonumber(flat[i + 1])
    end
    return ids, #flat > 2 * limit and last or 0
end

local function charter_get_run(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local after = check_count(args[2], 'after_seq', 0, 1e15)
    local limit = check_limit(args[3], 'limit')
    local with_content = args[4] ~= '0'
    local only = args[5] or ''
    if only ~= '' then
        check_id(only, 'artifact_id')
    end
    local base = P .. ':run:' .. run_id
    local h = hash(base)
    if not h then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    -- The run's events are numbered 1..seq without gaps: the page is the seqs after after_seq
    -- up to the head, and a place whose event is not stored is left out.
    local events = {}
    for s = after + 1, math.min(after + limit, tonumber(h.seq) or 0) do
        local e = hash(P .. ':event:' .. run_id .. ':' .. string.format('%d', s))
        if e then
            events[#events + 1] = event_object(e)
        end
    end
    local paged = present(args[6]) and args[6] ~= ''
    local deliveries = paged and page_deliveries(P, run_id, events) or
                           all_deliveries(P, base)
    local artifacts, next_artifact = {}, 0
    local ids
    if only ~= '' then
        ids = {}
        if redis.call('ZSCORE', base .. ':artifacts', only) then
            ids[1] = only
        end
    elseif paged then
        ids, next_artifact = page_artifacts(base, check_count(args[6], 'artifacts_after', 0,
                                                              1e15), limit)
    else
        ids = redis.call('ZRANGE', base .. ':artifacts', 0, -1)
    end
    for _, id in ipairs(ids) do
        local key = P .. ':artifact:' .. id
        local a
        if with_content then
            a = hash(key)
        else
            a = artifact_meta(key)
        end
        if a then
            local o = artifact_object(P, id, a, true)
            if not with_content then
                o.content = nil
            end
            artifacts[#artifacts + 1] = o
        end
    end
    return cjson.encode({run = run_object(h), events = events, deliveries = deliveries,
                         artifacts = artifacts, artifacts_next = next_artifact})
end

--[[ charter_list_runs
call: list_runs(limit)
keys: P. args: limit (0: 1000; at most 100000).
reply: {"runs":[{...}]}, newest first. errors: invalid. ]]
local function charter_list_runs(keys, args)
    local P = prefix(keys)
    local limit = check_limit(args[1], 'limit')
    local out = {}
    for _, id in ipairs(redis.call('ZREVRANGE', P .. ':runs', 0, limit - 1)) do
        local h = hash(P .. ':run:' .. id)
        if h then
            out[#out + 1] = run_object(h)
        end
    end
    return cjson.encode({runs = out})
end

--[[ charter_open_context
call: open_context(context, event)
keys: P. args: JSON {run_id,step,actor,id}, sealed event step_opened. id is the context id
  the call is to create, next_context of charter_run_head (the event's detail names it).
reply: {"context":{id,run_id,step,owners:[actor]},"seq":n}: the new context of the run, its
  OWNED_BY edge, the run's HAS_CONTEXT edge and the event; or the conflict reply (also when
  another context was created since, so id is no longer the next one).
errors: not_found (run or actor), refused (the run is completed: its record is closed),
  invalid. ]]
local function charter_open_context(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'context')
    local run_id = check_id(doc.run_id, 'run_id')
    local step = check_id(doc.step, 'step')
    local actor = check_id(doc.actor, 'actor')
    local want = check_id(doc.id, 'id')
    local ev = check_sealed(args[2], 'event', 'step_opened')
    local status = redis.call('HGET', P .. ':run:' .. run_id, 'status')
    if not status then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    if status == 'completed' then
        raise('refused', 'run ' .. run_id .. ' is completed')
    end
    if not exists(P .. ':actor:' .. actor) then
        raise('not_found', 'actor ' .. actor .. ' not found')
    end
    local conflict = head_conflict(P, run_id, ev)
    if conflict then
        return conflict
    end
    local n = tonumber(redis.call('HGET', P .. ':counter', 'context') or '0') or 0
    local id = 'c' .. string.format('%d', n + 1)
    if id ~= want then
        return cjson.encode({conflict = true, head = head_table(P, run_id)})
    end
    redis.call('HSET', P .. ':counter', 'context', n + 1)
    local key = P .. ':context:' .. id
    redis.call('HSET', key, 'id', id, 'run_id', run_id, 'step', step)
    redis.call('SADD', key .. ':owned_by', actor)
    redis.call('SADD', P .. ':run:' .. run_id .. ':contexts', id)
    local seq = write_event(P, run_id, ev)
    return cjson.encode({context = {id = id, run_id = run_id, step = step, owners = {actor}},
                         seq = seq})
end

-- The context id as charter_context_owner replies it; raises not_found.
local function context_table(P, id)
    local key = P .. ':context:' .. id
    local h = hash(key)
    if not h then
        raise('not_found', 'context ' .. id .. ' not found')
    end
    local scope = nil
    if h.scope_tools then
        scope = {tools = decode_list(h.scope_tools), recipients = decode_list(h.scope_recipients),
                 resources = decode_list(h.scope_resources)}
    end
    local status = false
    if h.run_id then
        status = redis.call('HGET', P .. ':run:' .. h.run_id, 'status')
    end
    return {id = id, run_id = h.run_id or '', step = h.step or '',
            owners = members(key .. ':owned_by'), workflow = h.workflow or '',
            parent = h.parent or '', scope = scope, run_status = status or '',
            grant = h.grant or ''}
end

--[[ charter_context_owner
call: context_owner(context_id)
keys: P. args: context_id.
reply: {"id","run_id","step","owners":[...],"workflow","parent","scope","run_status","grant"}:
  workflow is the version the context's run follows ("" until charter_scope_context), parent
  the context it was narrowed from ("" when none), scope {tools,recipients,resources} its
  narrowed lists (absent when not narrowed), grant the grant its step acts under as charterd
  recorded it with charter_scope_context ("" when none was recorded).
errors: not_found, invalid. ]]
local function charter_context_owner(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'context_id')
    return cjson.encode(context_table(P, id))
end

--[[ charter_get_receipt
call: get_receipt(run_id, invocation_id)
keys: P. args: run_id, invocation_id or "" for the run itself.
reply: for a delivery, {"delivery":{...delivery object, with receipt (the stored receipt's JSON
  text) when one is attached}}; for the run, {"run":{...run object, with receipt when
  attached},"last_ts":"<ts of the run's last event>","deliveries":[invocation ids, sorted]}.
errors: not_found (run, or a delivery that does not exist or is of another run), invalid. ]]
local function charter_get_receipt(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local inv = args[2]
    if inv == nil or inv == '' then
        local h = hash(P .. ':run:' .. run_id)
        if not h then
            raise('not_found', 'run ' .. run_id .. ' not found')
        end
        local run = run_object(h)
        run.receipt = h.receipt or nil
        local last = redis.call('HGET', P .. ':event:' .. run_id .. ':' .. (h.seq or '0'), 'ts')
        return cjson.encode({run = run, last_ts = last or '',
                             deliveries = members(P .. ':run:' .. run_id .. ':deliveries')})
    end
    check_invocation(inv)
    local d = hash(P .. ':delivery:' .. inv)
    if not d or d.run_id ~= run_id then
        raise('not_found', 'delivery ' .. inv .. ' of run ' .. run_id .. ' not found')
    end
    return cjson.encode({delivery = delivery_object(d, P)})
end

--[[ charter_attach_receipt
call: attach_receipt(json receipt)
keys: P. args: JSON {run_id, invocation_id (absent or "" for the run), last_seq (run receipts),
  receipt (the receipt's JSON text), chain (signed receipts only: {prev, hash, seq})}.
reply: {"attached":bool,"receipt":"<the receipt now stored, or absent>"}. A delivery's receipt
  is set only if it has none (the first one stays). A run's receipt is set only while the run's
  seq is still last_seq (it covers the run's last event), replacing one of an earlier end.
  With chain, the receipt takes its place in the run's receipt chain in the same write: it is
  attached only while the run's chain head (receipt_head, receipt_seq: the last delivery
  receipt's hash and place) is still prev and seq - 1, and a delivery receipt becomes the new
  head (hash, seq); a run receipt names the head without moving it. When the head moved the
  reply is {"attached":false,"conflict":true,"chain_head":"<hex or empty>","chain_seq":n} and
  nothing is written.
errors: not_found (run or delivery of the run), invalid. ]]
local function receipt_chain_arg(v)
    if not present(v) then
        return nil
    end
    if type(v) ~= 'table' then
        raise('invalid', 'chain must be an object {prev, hash, seq}')
    end
    local prev = check_text(v.prev, 'chain.prev', '')
    local hash = check_text(v.hash, 'chain.hash')
    if (prev ~= '' and not prev:match('^' .. string.rep('%x', 64) .. '$')) or
        not hash:match('^' .. string.rep('%x', 64) .. '$') then
        raise('invalid', 'chain.prev and chain.hash must be hex SHA-256 (prev may be empty)')
    end
    return {prev = prev, hash = hash, seq = check_count(v.seq, 'chain.seq', 1, 1e15)}
end

-- nil when the chain's head is still where the receipt was signed, else the conflict reply.
local function receipt_chain_moved(runkey, chain)
    local h = redis.call('HMGET', runkey, 'receipt_head', 'receipt_seq')
    local head, n = h[1] or '', tonumber(h[2] or '0')
    if chain.prev ~= head or chain.seq ~= n + 1 then
        return cjson.encode({attached = false, conflict = true, chain_head = head,
                             chain_seq = n})
    end
    return nil
end

local function charter_attach_receipt(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'receipt')
    local run_id = check_id(doc.run_id, 'run_id')
    local text = check_text(doc.receipt, 'receipt')
    local chain = receipt_chain_arg(doc.chain)
    local ok, parsed = pcall(cjson.decode, text)
    if not ok or type(parsed) ~= 'table' then
        raise('invalid', 'receipt must be a JSON object text')
    end
    local runkey = P .. ':run:' .. run_id
    local inv = doc.invocation_id
    if present(inv) and inv ~= '' then
        check_invocation(inv)
        local key = P .. ':delivery:' .. inv
        if redis.call('HGET', key, 'run_id') ~= run_id then
            raise('not_found', 'delivery ' .. inv .. ' of run ' .. run_id .. ' not found')
        end
        local had = redis.call('HGET', key, 'receipt')
        if had then
            return cjson.encode({attached = false, receipt = had})
        end
        if chain then
            local moved = receipt_chain_moved(runkey, chain)
            if moved then
                return moved
            end
            redis.call('HSET', runkey, 'receipt_head', chain.hash, 'receipt_seq', chain.seq)
        end
        redis.call('HSET', key, 'receipt', text)
        return cjson.encode({attached = true, receipt = text})
    end
    local last = check_count(doc.last_seq, 'last_seq', 1, 1e15)
    local seq = redis.call('HGET', runkey, 'seq')
    if not seq then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    if tonumber(seq) ~= last then
        return cjson.encode({attached = false, receipt = redis.call('HGET', runkey, 'receipt') or nil})
    end
    if chain then
        local moved = receipt_chain_moved(runkey, chain)
        if moved then
            return moved
        end
    end
    redis.call('HSET', runkey, 'receipt', text)
    return cjson.encode({attached = true, receipt = text})
end

-- Exported: what later files and the registry use.
runs.charter_create_run = charter_create_run
runs.charter_transition_run = charter_transition_run
runs.charter_unfinished_runs = charter_unfinished_runs
runs.charter_run_head = charter_run_head
runs.charter_get_run = charter_get_run
runs.charter_list_runs = charter_list_runs
runs.charter_open_context = charter_open_context
runs.context_table = context_table
runs.charter_context_owner = charter_context_owner
runs.charter_get_receipt = charter_get_receipt
runs.charter_attach_receipt = charter_attach_receipt
end
