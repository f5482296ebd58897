-- queries/events.lua - the run's event log: the sealed event every writer takes, the head a new
-- event is sealed on, the write itself, and reading the log back (one event, or a page for the
-- audit walk). charterd computes every hash; nothing here hashes or checks one.

local events = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local raise, present, check_id = validation.raise, validation.present, validation.check_id
local check_text, check_count = validation.check_text, validation.check_count
local json_arg, prefix, hex64 = validation.json_arg, validation.prefix, validation.hex64
local now, hash, members, exists = graph.now, graph.hash, graph.members, graph.exists
local event_object = graph.event_object

-- The snapshot: the JSON text charterd encoded with jansson (which emits UTF-8 only, with NUL
-- escaped), often kilobytes. Only what that leaves to check is checked here, at memchr speed:
-- a string without NUL. A byte-wise UTF-8 walk of it cost 40-70 us per delivery.
local function check_snapshot(v, what)
    if not present(v) then
        return ''
    end
    if type(v) ~= 'string' or v:find('\0', 1, true) then
        raise('invalid', what .. ' must be a string without NUL')
    end
    return v
end

-- A sealed event (the last argument of every function that writes one), validated:
-- {kind,outcome,codes,witness,detail,snapshot,evaluator,seq,ts,prev,hash}. Every text is kept
-- byte for byte, because charterd hashed exactly these bytes: detail and snapshot must be
-- texts (charterd encodes JSON itself), codes a comma list of code names. evaluator is "" or
-- 64 hex digits; seq >= 1; ts "<seconds>.<6 digits>"; prev "" exactly for seq 1, else 64 hex
-- digits; hash 64 hex digits. kind, when given, is the kind the function writes.
local function check_sealed(s, what, kind)
    local ev = json_arg(s, what)
    local out = {
        kind = check_id(ev.kind, what .. '.kind'),
        outcome = check_text(ev.outcome, what .. '.outcome', ''),
        codes = check_text(ev.codes, what .. '.codes', ''),
        witness = check_text(ev.witness, what .. '.witness', ''),
        detail = check_text(ev.detail, what .. '.detail', ''),
        snapshot = check_snapshot(ev.snapshot, what .. '.snapshot'),
        evaluator = check_text(ev.evaluator, what .. '.evaluator', ''),
        seq = check_count(ev.seq, what .. '.seq', 1, 1e15),
        ts = ev.ts, prev = check_text(ev.prev, what .. '.prev', ''), hash = ev.hash,
    }
    if kind and out.kind ~= kind then
        raise('invalid', what .. '.kind must be ' .. kind)
    end
    if not out.codes:find('^[%w_,]*$') then
        raise('invalid', what .. '.codes must be a comma list of code names')
    end
    if out.evaluator ~= '' and not hex64(out.evaluator) then
        raise('invalid', what .. '.evaluator must be empty or 64 lowercase hex digits')
    end
    if type(out.ts) ~= 'string' or not out.ts:match('^%d+%.%d%d%d%d%d%d$') then
        raise('invalid', what .. '.ts must be "<seconds>.<6 digits>"')
    end
    if (out.seq == 1) ~= (out.prev == '') or (out.prev ~= '' and not hex64(out.prev)) then
        raise('invalid', what .. '.prev must be empty for seq 1, else 64 lowercase hex digits')
    end
    if not hex64(out.hash) then
        raise('invalid', what .. '.hash must be 64 lowercase hex digits')
    end
    return out
end

-- The run's head as charterd seals the next event from it: {exists,seq,hash,status,now,
-- next_context} (seq 0 and hash "" before the first event; next_context is the id the next
-- charter_open_context of the graph creates).
local function head_table(P, run_id)
    local f = redis.call('HMGET', P .. ':run:' .. run_id, 'seq', 'head', 'status')
    local ctx = redis.call('HGET', P .. ':counter', 'context')
    return {
        exists = exists(P .. ':run:' .. run_id), seq = f[1] and tonumber(f[1]) or 0,
        hash = f[2] or '', status = f[3] or '', now = now(),
        next_context = 'c' .. string.format('%d', (ctx and tonumber(ctx) or 0) + 1),
    }
end

-- nil when ev is the run's next event (its head is (ev.seq - 1, ev.prev)), else the conflict
-- reply. Called after every other check and before the first write. An event key already
-- present at ev.seq means the log was altered; nothing is written over it. f, optional: the
-- run's {seq, head} fields as this call read them already; vacant, optional: true when this
-- call found no key at ev.seq's event already (its key is not read again).
local function head_conflict(P, run_id, ev, f, vacant)
    f = f or redis.call('HMGET', P .. ':run:' .. run_id, 'seq', 'head')
    local seq = f[1] and tonumber(f[1]) or 0
    if seq ~= ev.seq - 1 or (f[2] or '') ~= ev.prev then
        return cjson.encode({conflict = true, head = head_table(P, run_id)})
    end
    if not vacant and exists(P .. ':event:' .. run_id .. ':' .. string.format('%d', ev.seq)) then
        raise('exists', 'event ' .. string.format('%d', ev.seq) .. ' of run ' .. run_id ..
                  ' exists beyond the run\'s head: the event log was altered (see charter audit)')
    end
    return nil
end

-- Writes the sealed event ev (checked by head_conflict) and moves the run's head to it. A
-- run's events are numbered 1..seq without gaps, so readers walk seqs up to the head: no
-- index of them is kept (library 26 and older also wrote P:run:<id>:events).
local function write_event(P, run_id, ev)
    local seq = string.format('%d', ev.seq)
    redis.call('HSET', P .. ':event:' .. run_id .. ':' .. seq, 'run_id', run_id, 'seq', seq,
               'kind', ev.kind, 'outcome', ev.outcome, 'codes', ev.codes, 'witness', ev.witness,
               'detail', ev.detail, 'snapshot', ev.snapshot, 'ts', ev.ts, 'evaluator',
               ev.evaluator, 'prev', ev.prev, 'hash', ev.hash)
    redis.call('HSET', P .. ':run:' .. run_id, 'seq', seq, 'head', ev.hash)
    return ev.seq
end

--[[ charter_append_event
call: append_event(run_id, event)
keys: P. args: run_id, sealed event.
reply: {"seq":n,"ts":"<t>"}: the run's next event, with the ts it was sealed with; or the
  conflict reply.
errors: not_found (run), invalid. ]]
local function charter_append_event(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local ev = check_sealed(args[2], 'event', nil)
    if not exists(P .. ':run:' .. run_id) then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    local conflict = head_conflict(P, run_id, ev)
    if conflict then
        return conflict
    end
    local seq = write_event(P, run_id, ev)
    return cjson.encode({seq = seq, ts = ev.ts})
end

--[[ charter_get_event
call: get_event(run_id, seq)
keys: P. args: run_id, seq.
reply: the event {run_id,seq,kind,outcome,codes,witness,detail,snapshot,ts,evaluator,prev,
  hash}. errors: not_found (no such event), invalid. ]]
local function charter_get_event(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local seq = check_count(args[2], 'seq', 1, 1e15)
    local h = hash(P .. ':event:' .. run_id .. ':' .. string.format('%d', seq))
    if not h then
        raise('not_found', 'event ' .. string.format('%d', seq) .. ' of run ' .. run_id ..
                  ' not found')
    end
    return cjson.encode(event_object(h))
end

--[[ charter_audit_events
call: audit_events(run_id, after_seq, limit)
keys: P. args: run_id, after_seq (integer >= 0), limit (1..1000).
reply: {"run":{"seq":n,"head":"<hex>","status":"<s>","receipt":"<json text>"|absent,
  "keyless":{"until":n,"head":"<hex>","seal":"<hex>"}|absent},
  "upper":n, "events":[...], "deliveries":[{"invocation_id","event_seq"}]}: one page of a run's
  event log as stored, for an audit of its hash chain. upper is the last place to look: the
  run's seq, or the greatest of the 8 places after it where an event hash exists. events
  holds, for each place p in after_seq+1 .. min(after_seq+limit, upper), {"at":p,
  "missing":true} when no event hash is stored there, else the event object with "at":p and
  "stored_seq" (its seq field as stored). keyless is present on a run that had events when
  its keyless graph adopted a key (charter_adopt_key): its events up to until are hashed
  with plain SHA-256.
  errors: not_found (run), invalid. ]]
local function charter_audit_events(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local after = check_count(args[2], 'after_seq', 0, 1e15)
    local limit = check_count(args[3], 'limit', 1, 1000)
    local base = P .. ':run:' .. run_id
    local h = hash(base)
    if not h then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    local head = tonumber(h.seq) or 0
    local upper = head
    for k = upper + 1, upper + 8 do
        if exists(P .. ':event:' .. run_id .. ':' .. string.format('%d', k)) then
            upper = k
        end
    end
    local events = {}
    local last = math.min(after + limit, upper)
    for p = after + 1, last do
        local e = hash(P .. ':event:' .. run_id .. ':' .. string.format('%d', p))
        if e then
            local o = event_object(e)
            o.at = p
            o.stored_seq = e.seq or ''
            events[#events + 1] = o
        else
            events[#events + 1] = {at = p, missing = true}
        end
    end
    local deliveries = {}
    for _, inv in ipairs(members(base .. ':deliveries')) do
        local s = redis.call('HGET', P .. ':delivery:' .. inv, 'event_seq')
        deliveries[#deliveries + 1] = {invocation_id = inv, event_seq = s and tonumber(s) or 0}
    end
    local keyless = nil
    if h.keyless_until then
        keyless = {['until'] = tonumber(h.keyless_until) or 0, head = h.keyless_head or '',
                   seal = h.keyless_seal or ''}
    end
    return cjson.encode({run = {seq = head, head = h.head or '', status = h.status or '',
                                receipt = h.receipt or nil, keyless = keyless},
                         upper = upper, events = events, deliveries = deliveries})
end

-- Exported: what later files and the registry use.
events.check_sealed = check_sealed
events.head_table = head_table
events.head_conflict = head_conflict
events.write_event = write_event
events.charter_append_event = charter_append_event
events.charter_get_event = charter_get_event
events.charter_audit_events = charter_audit_events
end
