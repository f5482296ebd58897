-- queries/approvals.lua - human approval of a delivery: a send the gate allowed, held until the
-- named human approves it (RULE-APPROVAL-* in README.md). The request, the decision and the
-- commit it licenses each happen in one atomic call; the deadline is on the database's clock,
-- and silence is never consent: an approval nobody decided before its deadline is expired.
--
-- Key schema: P:approval:<id> (hash: id, run_id, invocation_id, fingerprint, approver, tool,
-- recipient, payload_id, step, context_id, requested_at, deadline, within_ms, state,
-- decided_by, decided_at, reason, commit (JSON text), event (JSON text), arguments (JSON text,
-- a held tool invocation's)), P:approvals (zset of
-- ids by request time), P:run:<id>:approvals (set), P:approval_inv:<invocation> (the id).

local approvals = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local raise, check_id = validation.raise, validation.check_id
local check_invocation, check_text = validation.check_invocation, validation.check_text
local check_count, json_arg = validation.check_count, validation.json_arg
local prefix = validation.prefix
local now, hash, exists = graph.now, graph.hash, graph.exists
local delivery_object, check_limit = graph.delivery_object, graph.check_limit
local check_sealed, head_conflict = events.check_sealed, events.head_conflict
local write_event = events.write_event
local charter_commit_delivery = delivery.charter_commit_delivery

-- Microseconds since the epoch of a database time "<seconds>.<6 digits>".
local function micros_of(ts)
    local sec, usec = string.match(ts or '', '^(%d+)%.(%d%d%d%d%d%d)$')
    if not sec then
        return nil
    end
    return tonumber(sec) * 1000000 + tonumber(usec)
end

local function ts_of_micros(us)
    return string.format('%d.%06d', math.floor(us / 1000000), us % 1000000)
end

-- The approval as the API shows it. With now_us, a pending approval past its deadline shows
-- state "expired" (nothing is written: a read never decides).
local function approval_object(h, now_us)
    local state = h.state
    if state == 'pending' and now_us and now_us >= (micros_of(h.deadline) or 0) then
        state = 'expired'
    end
    return {id = h.id, run_id = h.run_id, invocation_id = h.invocation_id,
            fingerprint = h.fingerprint, approver = h.approver, tool = h.tool,
            recipient = h.recipient, payload_id = h.payload_id, step = h.step,
            context_id = h.context_id, requested_at = h.requested_at, deadline = h.deadline,
            state = state, decided_by = h.decided_by or '', decided_at = h.decided_at or '',
            reason = h.reason or '', event_seq = tonumber(h.event_seq or '0') or 0,
            arguments = h.arguments and cjson.decode(h.arguments) or nil}
end

--[[ charter_request_approval
call: request_approval(request, event)
keys: P. args: JSON {approval_id,run_id,invocation_id,fingerprint,approver,within_ms,tool,
  recipient,payload_id,step,context_id,commit:{the argument of charter_commit_delivery},
  event:{kind,outcome,codes,witness,detail,snapshot,evaluator}: the delivery_decided event the
  commit will write, unsealed, arguments}, sealed event approval_requested. A held tool
  invocation: commit with its "invoke" member, event invoke_decided, payload_id "" (ignored),
  recipient "" for a tool without destination, and arguments [{name,value,role,lineage,...}]
  as the gate read them (shown with the approval); a delivery has none.
reply: {"status":"pending","approval":{...},"created":true} when created, with the event, in
  this call (deadline = TIME + within_ms); {"status":"<state>","approval":{...}} when the
  invocation already has this approval (same fingerprint: nothing written);
  {"status":"conflict","approval":{...}} when it has one of another send; {"status":"exists",
  "delivery":{...}} when the invocation was committed; or the conflict reply.
errors: not_found (run), invalid. ]]
local function charter_request_approval(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'approval')
    local id = check_id(doc.approval_id, 'approval_id')
    local run_id = check_id(doc.run_id, 'run_id')
    local inv = check_invocation(doc.invocation_id)
    local fingerprint = check_text(doc.fingerprint, 'fingerprint')
    local approver = check_id(doc.approver, 'approver')
    local within = check_count(doc.within_ms, 'within_ms', 1, 604800000)
    local tool = check_id(doc.tool, 'tool')
    if type(doc.commit) ~= 'table' or type(doc.event) ~= 'table' then
        raise('invalid', 'commit and event must be objects')
    end
    -- A held tool invocation: its commit names the artifacts its values came from (no payload),
    -- a tool without a destination has no recipient, and the approver reads its arguments.
    local invoke = type(doc.commit.invoke) == 'table'
    local recipient = (invoke and doc.recipient == '') and '' or check_id(doc.recipient, 'recipient')
    local payload_id = invoke and '' or check_id(doc.payload_id, 'payload_id')
    local arguments = nil
    if invoke then
        if type(doc.arguments) ~= 'table' then
            raise('invalid', 'arguments must be the invocation\'s arguments')
        end
        arguments = cjson.encode(doc.arguments)
    end
    local step = check_id(doc.step, 'step')
    local context_id = check_id(doc.context_id, 'context_id')
    if doc.commit.invocation_id ~= inv or doc.commit.run_id ~= run_id or
        doc.event.kind ~= (invoke and 'invoke_decided' or 'delivery_decided') or
        doc.event.outcome ~= 'allow' then
        raise('invalid', 'commit and event must be the allowed effect of this invocation')
    end
    local ev = check_sealed(args[2], 'event', 'approval_requested')
    if not exists(P .. ':run:' .. run_id) then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    local d = hash(P .. ':delivery:' .. inv)
    if d then
        return cjson.encode({status = 'exists', delivery = delivery_object(d, P)})
    end
    local ts, tnum = now()
    local now_us = micros_of(ts)
    local known = redis.call('GET', P .. ':approval_inv:' .. inv)
    if known then
        local h = hash(P .. ':approval:' .. known)
        local a = approval_object(h, now_us)
        -- RULE-APPROVAL-ONE-PER-INVOCATION: a retry finds its approval; another send is a conflict.
        if h.fingerprint ~= fingerprint or h.run_id ~= run_id then
            return cjson.encode({status = 'conflict', approval = a})
        end
        return cjson.encode({status = a.state, approval = a})
    end
    if exists(P .. ':approval:' .. id) then
        raise('invalid', 'approval ' .. id .. ' exists for another invocation')
    end
    local conflict = head_conflict(P, run_id, ev)
    if conflict then
        return conflict
    end
    -- RULE-APPROVAL-DEADLINE-DATABASE-CLOCK
    local deadline = ts_of_micros(now_us + within * 1000)
    local key = P .. ':approval:' .. id
    redis.call('HSET', key, 'id', id, 'run_id', run_id, 'invocation_id', inv, 'fingerprint',
               fingerprint, 'approver', approver, 'tool', tool, 'recipient', recipient,
               'payload_id', payload_id, 'step', step, 'context_id', context_id, 'requested_at',
               ts, 'deadline', deadline, 'within_ms', string.format('%d', within), 'state',
               'pending', 'commit', cjson.encode(doc.commit), 'event', cjson.encode(doc.event),
               'request_seq', string.format('%d', ev.seq))
    if arguments then
        redis.call('HSET', key, 'arguments', arguments)
    end
    redis.call('SET', P .. ':approval_inv:' .. inv, id)
    redis.call('ZADD', P .. ':approvals', tnum, id)
    redis.call('SADD', P .. ':run:' .. run_id .. ':approvals', id)
    write_event(P, run_id, ev)
    return cjson.encode({status = 'pending', created = true, approval = approval_object(hash(key))})
end

--[[ charter_get_approval
call: get_approval(approval_id)
keys: P. args: approval_id.
reply: {"approval":{...},"commit":{...},"event":{...},"now":"<t>"}: the approval (state as of
  now), and the commit argument and unsealed event it holds for its decision.
errors: not_found, invalid. ]]
local function charter_get_approval(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'approval_id')
    local h = hash(P .. ':approval:' .. id)
    if not h then
        raise('not_found', 'approval ' .. id .. ' not found')
    end
    local ts = now()
    return cjson.encode({approval = approval_object(h, micros_of(ts)),
                         commit = cjson.decode(h.commit), event = cjson.decode(h.event), now = ts})
end

--[[ charter_list_approvals
call: list_approvals(run_id, state, limit)
keys: P. args: run_id ("" for every run), state ("" for any: pending, approved, denied,
  expired, refused), limit (0 = 1000).
reply: {"approvals":[...],"now":"<t>"}: newest first; a pending approval past its deadline
  is listed as expired (nothing written).
errors: invalid. ]]
local function charter_list_approvals(keys, args)
    local P = prefix(keys)
    local run_id = args[1] or ''
    if run_id ~= '' then
        check_id(run_id, 'run_id')
    end
    local state = args[2] or ''
    if state ~= '' and state ~= 'pending' and state ~= 'approved' and state ~= 'denied' and
        state ~= 'expired' and state ~= 'refused' then
        raise('invalid', 'state must be pending, approved, denied, expired or refused')
    end
    local limit = check_limit(args[3], 'limit')
    local ts = now()
    local now_us = micros_of(ts)
    local out = {}
    local function take(id)
        local h = hash(P .. ':approval:' .. id)
        if h then
            local a = approval_object(h, now_us)
            if state == '' or a.state == state then
                out[#out + 1] = a
            end
        end
    end
    if run_id ~= '' then
        for _, id in ipairs(redis.call('SMEMBERS', P .. ':run:' .. run_id .. ':approvals')) do
            take(id)
        end
        table.sort(out, function(x, y)
            return (micros_of(x.requested_at) or 0) > (micros_of(y.requested_at) or 0)
        end)
        while #out > limit do
            table.remove(out)
        end
    else
        -- Newest first from the index, a page at a time, until limit match.
        local start = 0
        while #out < limit do
            local page = redis.call('ZREVRANGE', P .. ':approvals', start, start + 255)
            if #page == 0 then
                break
            end
            for _, id in ipairs(page) do
                if #out < limit then
                    take(id)
                end
            end
            start = start + 256
        end
    end
    if #out == 0 then
        return cjson.encode({approvals = {}, now = ts})
    end
    return cjson.encode({approvals = out, now = ts})
end

--[[ charter_decide_approval
call: decide_approval(decision, committed_event, denied_event, expired_event, refused_event)
keys: P. args: JSON {approval_id,decision:"approve"|"deny",actor,reason}, then four events
  sealed on one head: delivery_decided (outcome allow, the approval's event: the commit's),
  approval_decided for a denial, for an expiry and for a refused commit.
reply: {"status":...,"approval":{...},"event_index":i} with i the event written:
  "not_approver" (actor is not the approver; nothing written), "final" (decided before:
  the approval as it stands, nothing written), "expired" (TIME >= deadline: the approval is
  marked expired, event 2), "denied" (event 1), "approved" with "delivery" (committed through
  charter_commit_delivery in this call, event 0), "refused" with "refusal":{reason,detail} (the
  run has ended: completed, blocked or error, reason run_stopped; the commit's re-check failed,
  or the invocation was taken: marked refused, event 3); or the
  conflict reply (nothing written).
errors: not_found (approval), invalid. ]]
local function charter_decide_approval(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'decision')
    local id = check_id(doc.approval_id, 'approval_id')
    local decision = doc.decision
    if decision ~= 'approve' and decision ~= 'deny' then
        raise('invalid', 'decision must be approve or deny')
    end
    local actor = check_id(doc.actor, 'actor')
    local reason = check_text(doc.reason, 'reason', '')
    local ev_commit = args[2]
    local ev_denied = check_sealed(args[3], 'denied event', 'approval_decided')
    local ev_expired = check_sealed(args[4], 'expired event', 'approval_decided')
    local ev_refused = check_sealed(args[5], 'refused event', 'approval_decided')
    local key = P .. ':approval:' .. id
    local h = hash(key)
    if not h then
        raise('not_found', 'approval ' .. id .. ' not found')
    end
    local ts = now()
    local now_us = micros_of(ts)
    -- RULE-APPROVAL-BY-APPROVER: only the named human decides.
    if actor ~= h.approver then
        return cjson.encode({status = 'not_approver', approval = approval_object(h, now_us)})
    end
    -- RULE-APPROVAL-FINAL: a decided approval never changes.
    if h.state ~= 'pending' then
        return cjson.encode({status = 'final', approval = approval_object(h, now_us)})
    end
    local conflict = head_conflict(P, h.run_id, ev_denied)
    if conflict then
        return conflict
    end
    local function mark(state, ev, index, extra)
        redis.call('HSET', key, 'state', state, 'decided_by', actor, 'decided_at', ts, 'reason',
                   reason, 'event_seq', string.format('%d', ev.seq))
        write_event(P, h.run_id, ev)
        local out = {status = state, approval = approval_object(hash(key), now_us),
                     event_index = index}
        for k, v in pairs(extra or {}) do
            out[k] = v
        end
        return cjson.encode(out)
    end
    -- RULE-APPROVAL-SILENCE-IS-NOT-CONSENT: on the database clock, past the deadline nothing
    -- commits, whatever the decision.
    if now_us >= (micros_of(h.deadline) or 0) then
        reason = 'deadline ' .. h.deadline .. ' passed'
        return mark('expired', ev_expired, 2)
    end
    if decision == 'deny' then
        return mark('denied', ev_denied, 1)
    end
    -- A run that has ended (completed, blocked, error) takes no held send: the attempt that
    -- held it is over (its executor stopped, the run recovered since), so it never lands after.
    local run_status = redis.call('HGET', P .. ':run:' .. h.run_id, 'status')
    if run_status == 'completed' or run_status == 'blocked' or run_status == 'error' then
        local detail = h.run_id .. ' ' .. run_status
        reason = 'run_stopped ' .. detail
        return mark('refused', ev_refused, 3, {refusal = {reason = 'run_stopped', detail = detail}})
    end
    -- RULE-APPROVAL-COMMIT: the same one conditional write as any delivery.
    local res = cjson.decode(charter_commit_delivery(keys, {h.commit, ev_commit}))
    if res.conflict then
        return cjson.encode(res)
    end
    if res.status == 'committed' then
        redis.call('HSET', key, 'state', 'approved', 'decided_by', actor, 'decided_at', ts,
                   'reason', reason, 'event_seq', string.format('%d', res.seq))
        return cjson.encode({status = 'approved', approval = approval_object(hash(key), now_us),
                             delivery = res.delivery, event_index = 0})
    end
    local why = res.reason or 'invocation_used'
    if res.status == 'exists' then
        why = 'invocation_used'
    end
    local detail = res.detail
    if type(detail) ~= 'string' then
        detail = ''
    end
    reason = why .. (detail ~= '' and (' ' .. detail) or '')
    return mark('refused', ev_refused, 3, {refusal = {reason = why, detail = detail}})
end

-- The id of an approval of run_id still pending at ts (a database time): a held send its
-- human may yet approve (the smallest id when there are several); nil when none is.
local function pending_approval(P, run_id, ts)
    local now_us = micros_of(ts)
    local held = nil
    for _, id in ipairs(redis.call('SMEMBERS', P .. ':run:' .. run_id .. ':approvals')) do
        local h = hash(P .. ':approval:' .. id)
        if h and approval_object(h, now_us).state == 'pending' and (not held or id < held) then
            held = id
        end
    end
    return held
end

-- Exported: what later files and the registry use.
approvals.pending_approval = pending_approval
approvals.charter_request_approval = charter_request_approval
approvals.charter_get_approval = charter_get_approval
approvals.charter_list_approvals = charter_list_approvals
approvals.charter_decide_approval = charter_decide_approval
end
