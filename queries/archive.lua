-- queries/archive.lua - a run leaving Redis for its archive: the run's keys read page by page
-- (what charterd writes to the archive file), the retention lease one charterd holds at a time,
-- the ended runs past the retention period, and the one call that removes an archived run and
-- keeps a compact record of each invocation it committed (exactly once survives the removal).

local archive = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local raise, check_id, check_text = validation.raise, validation.check_id, validation.check_text
local check_count, json_arg, prefix = validation.check_count, validation.json_arg, validation.prefix
local check_invocation, hex64 = validation.check_invocation, validation.hex64
local now, hash, members = graph.now, graph.hash, graph.members
local archived_record, archived_keep = delivery.archived_record, delivery.archived_keep
local archived_count, archived_run = delivery.archived_count, delivery.archived_run

-- The statuses a run does not leave: only such a run is archived and removed.
local ENDED = {completed = true, cancelled = true, blocked = true, error = true,
               budget_exhausted = true}

-- The time the run ended: the ts of its last event ("" when it has none).
local function ended_at(P, id, seq)
    if not seq or seq == '0' then
        return ''
    end
    return redis.call('HGET', P .. ':event:' .. id .. ':' .. seq, 'ts') or ''
end

-- Members of a set, sorted, from index cursor, at most count.
local function set_page(key, cursor, count)
    return redis.call('SORT_RO', key, 'ALPHA', 'LIMIT', cursor, count)
end

local function zset_page(key, cursor, count)
    return redis.call('ZRANGE', key, cursor, cursor + count - 1)
end

-- One page of one part of the run (run: its hash): its items, each the stored hash and edge
-- sets of one key.
local PARTS = {
    -- The run's events are numbered 1..seq without gaps: item cursor + i is the event at seq
    -- cursor + i, up to the run's seq.
    events = function(P, id, cursor, count, run)
        local out = {}
        for s = cursor + 1, math.min(cursor + count, tonumber(run.seq) or 0) do
            local seq = string.format('%d', s)
            out[#out + 1] = hash(P .. ':event:' .. id .. ':' .. seq) or {seq = seq}
        end
        return out
    end,
    contexts = function(P, id, cursor, count)
        local out = {}
        for _, c in ipairs(set_page(P .. ':run:' .. id .. ':contexts', cursor, count)) do
            local key = P .. ':context:' .. c
            out[#out + 1] = {id = c, hash = hash(key) or {}, owned_by = members(key .. ':owned_by'),
                             produced = members(key .. ':produced')}
        end
        return out
    end,
    artifacts = function(P, id, cursor, count)
        local out = {}
        for _, a in ipairs(zset_page(P .. ':run:' .. id .. ':artifacts', cursor, count)) do
            local key = P .. ':artifact:' .. a
            out[#out + 1] = {id = a, hash = hash(key) or {},
                             derived_from = members(key .. ':derived_from'),
                             from_resource = members(key .. ':from_resource'),
                             produced_by = members(key .. ':produced_by'),
                             retrieved_by = members(key .. ':retrieved_by')}
        end
        return out
    end,
    deliveries = function(P, id, cursor, count)
        local out = {}
        for _, inv in ipairs(set_page(P .. ':run:' .. id .. ':deliveries', cursor, count)) do
            out[#out + 1] = hash(P .. ':delivery:' .. inv) or {invocation_id = inv}
        end
        return out
    end,
    approvals = function(P, id, cursor, count)
        local out = {}
        for _, a in ipairs(set_page(P .. ':run:' .. id .. ':approvals', cursor, count)) do
            out[#out + 1] = hash(P .. ':approval:' .. a) or {id = a}
        end
        return out
    end,
}

--[[ charter_run_export
call: run_export(run_id, part, cursor, count, sha...)
keys: P. args: run_id, part, cursor (index of the first item, >= 0), count (1..1000), and for
  part "records" the names of the records wanted (40 hex digits: a lineage record; 64: a blob).
reply: part "run": {"run":{the run's hash as stored},"ended":bool,"ended_at":"<ts of its last
  event>","counts":{"events","contexts","artifacts","deliveries","approvals"}}; parts
  "events", "contexts", "artifacts", "deliveries", "approvals": {"items":[...],"next":n,
  "done":bool}, items in seq, id or creation order (item cursor + i of "events" is the event
  at seq cursor + i, up to the run's seq; counts.events is the run's seq): an event's or
  delivery's or approval's hash as stored ({"seq"} alone for an event not stored), a context
  {id,hash,owned_by,produced}, an artifact {id,hash,derived_from,from_resource,produced_by,
  retrieved_by}; part "records": {"items":[{"sha","kind" ("lineage"|"blob"),"text"}]} for
  each name stored (a name not stored is left out). Nothing is decoded or changed: an archive
  keeps the bytes as stored.
errors: not_found (run), invalid. ]]
local function charter_run_export(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'run_id')
    local part = check_text(args[2], 'part')
    local cursor = check_count(args[3], 'cursor', 0, 1e15)
    local count = check_count(args[4], 'count', 1, 1000)
    local runkey = P .. ':run:' .. id
    local run = hash(runkey)
    if not run then
        raise('not_found', 'run ' .. id .. ' not found')
    end
    if part == 'run' then
        return cjson.encode({run = run, ended = ENDED[run.status] == true,
                             ended_at = ended_at(P, id, run.seq), counts = {
            events = tonumber(run.seq) or 0,
            contexts = redis.call('SCARD', runkey .. ':contexts'),
            artifacts = redis.call('ZCARD', runkey .. ':artifacts'),
            deliveries = redis.call('SCARD', runkey .. ':deliveries'),
            approvals = redis.call('SCARD', runkey .. ':approvals')}})
    end
    if part == 'records' then
        local out = {}
        for i = 5, #args do
            local sha = args[i]
            local kind = (#sha == 40 and 'lineage') or (#sha == 64 and 'blob') or nil
            if not kind or not sha:find('^[0-9a-f]+$') then
                raise('invalid', 'a record name is 40 or 64 lowercase hex digits')
            end
            local text = redis.call('GET', P .. ':' .. kind .. ':' .. sha)
            if text then
                out[#out + 1] = {sha = sha, kind = kind, text = text}
            end
        end
        return cjson.encode({items = out})
    end
    local page = PARTS[part]
    if not page then
        raise('invalid', 'part must be run, events, contexts, artifacts, deliveries, ' ..
                  'approvals or records')
    end
    local items = page(P, id, cursor, count, run)
    return cjson.encode({items = items, next = cursor + #items, done = #items < count})
end

-- The invocations of the run with their compact records, checked against digests (the
-- archive's digest of each send, {"<inv>":"<64 hex>"}): every delivery of the run has one and
-- there is none for another.
local function invocation_records(P, id, digests)
    local out, n = {}, 0
    for _, inv in ipairs(members(P .. ':run:' .. id .. ':deliveries')) do
        local digest = digests[inv]
        if not hex64(digest) then
            raise('invalid', 'digests names no 64-hex digest for invocation ' .. inv)
        end
        out[#out + 1] = {inv, archived_record(digest, id)}
        n = n + 1
    end
    for inv, _ in pairs(digests) do
        n = n - 1
        check_invocation(inv)
    end
    if n ~= 0 then
        raise('invalid', 'digests must name exactly the run\'s invocations')
    end
    return out
end

-- The content-addressed records only this run names: the blobs its events' snapshots name
-- (a facts record or a large snapshot, each holding the run's own context) and the lineage
-- records of its own artifacts.
local function owned_records(P, id, seq)
    local keys = {}
    for s = 1, seq do
        local snap = redis.call('HGET', P .. ':event:' .. id .. ':' .. s, 'snapshot') or ''
        for sha in snap:gmatch('"facts":"(%x+)"') do
            keys[#keys + 1] = P .. ':blob:' .. sha
        end
        for sha in snap:gmatch('"blob":"(%x+)"') do
            keys[#keys + 1] = P .. ':blob:' .. sha
        end
    end
    for _, a in ipairs(redis.call('ZRANGE', P .. ':run:' .. id .. ':artifacts', 0, -1)) do
        local l = redis.call('HGET', P .. ':artifact:' .. a, 'lineage')
        if l then
            keys[#keys + 1] = P .. ':lineage:' .. l
        end
    end
    return keys
end

-- Deletes keys in batches; returns how many existed.
local function delete(keys)
    local n = 0
    for i = 1, #keys, 500 do
        n = n + redis.call('DEL', unpack(keys, i, math.min(i + 499, #keys)))
    end
    return n
end

-- Every key of the run: its node and edge sets, its events, contexts, artifacts, deliveries
-- and approvals with theirs, and the records it owns. ':events' is the events index library
-- 26 and older wrote: a run written then still has it.
local function run_keys(P, id, seq)
    local runkey = P .. ':run:' .. id
    local keys = owned_records(P, id, seq)
    for _, suffix in ipairs({'', ':contexts', ':events', ':deliveries', ':artifacts',
                             ':approvals'}) do
        keys[#keys + 1] = runkey .. suffix
    end
    for s = 1, seq do
        keys[#keys + 1] = P .. ':event:' .. id .. ':' .. s
    end
    for _, c in ipairs(redis.call('SMEMBERS', runkey .. ':contexts')) do
        local key = P .. ':context:' .. c
        keys[#keys + 1], keys[#keys + 2], keys[#keys + 3] = key, key .. ':owned_by',
            key .. ':produced'
    end
    for _, a in ipairs(redis.call('ZRANGE', runkey .. ':artifacts', 0, -1)) do
        local key = P .. ':artifact:' .. a
        for _, suffix in ipairs({'', ':derived_from', ':from_resource', ':produced_by',
                                 ':retrieved_by'}) do
            keys[#keys + 1] = key .. suffix
        end
    end
    for _, inv in ipairs(redis.call('SMEMBERS', runkey .. ':deliveries')) do
        local key = P .. ':delivery:' .. inv
        keys[#keys + 1], keys[#keys + 2], keys[#keys + 3] = key, key .. ':delivered', key .. ':to'
    end
    for _, a in ipairs(redis.call('SMEMBERS', runkey .. ':approvals')) do
        local key = P .. ':approval:' .. a
        local inv = redis.call('HGET', key, 'invocation_id')
        keys[#keys + 1] = key
        if inv then
            keys[#keys + 1] = P .. ':approval_inv:' .. inv
        end
        redis.call('ZREM', P .. ':approvals', a)
    end
    return keys
end

--[[ charter_remove_run
call: remove_run(run_id, head, archive, digests, window_s?)
keys: P. args: run_id, head (the hash of the run's last event as archived, "" for a run
  without events), archive (the archive's name, kept with the run's record), JSON digests
  {"<invocation_id>":"<64 hex>"}: the archive's digest of each send the run committed
  (exactly its invocations), window_s (optional: the invocation window, whole seconds
  0..315360000; 0 or absent: the compact records are kept forever).
reply: {"removed":n,"invocations":m,"expires_at":"<ms>"|""}: in this one call every
  key of the run is deleted (the run, its edge sets, events, contexts, artifacts with their
  edge sets, deliveries, approvals, the blobs its events' snapshots name and its artifacts'
  lineage records; n keys existed), the run leaves P:runs, P:leases and P:runq, its entry
  {archive, archived_at, ended_at} (charter_archived_run) is kept under its id, and each of
  its m invocation ids keeps its compact record (what charter_find_delivery and the delivery
  functions answer for an archived invocation): the 32 bytes of its digest, then the run's
  id. Without a window the entry goes to P:archived_runs and the records to
  P:archived_invocations:<b> (<b>: the first 4 hex digits of the invocation's SHA-1), kept
  forever; with one, to the current generation g = floor(t / (window_s / 2)) of the
  database time t, P:archived_runs:<g> and P:archived_invocations:<g>:<b>, which expire at
  (g + 3) * window_s / 2 (expires_at, in milliseconds since the epoch): the entry and every
  record live at least the window, and nothing of the run is left in the database after
  1.5 window_s. Generations that expired leave P:archived_generations and P:archived_counts.
errors: not_found (run), refused (the run has not ended, or its head is not head: it changed
  since it was archived), invalid; nothing written. ]]
local function charter_remove_run(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'run_id')
    local head = check_text(args[2], 'head', '')
    local name = check_text(args[3], 'archive')
    local digests = json_arg(args[4], 'digests')
    local window = 0
    if args[5] ~= nil and args[5] ~= '' then
        window = check_count(args[5], 'window_s', 0, 315360000)
    end
    local runkey = P .. ':run:' .. id
    local run = hash(runkey)
    if not run then
        raise('not_found', 'run ' .. id .. ' not found')
    end
    if not ENDED[run.status] then
        raise('refused', 'run ' .. id .. ' is ' .. tostring(run.status) .. ', not ended')
    end
    if (run.head or '') ~= head then
        raise('refused', 'run ' .. id .. ' changed since it was archived')
    end
    local records = invocation_records(P, id, digests)
    local seq = tonumber(run.seq) or 0
    local ts = now()
    local done = cjson.encode({archive = name, archived_at = ts,
                               ended_at = ended_at(P, id, run.seq)})
    local removed = delete(run_keys(P, id, seq))
    local expires = archived_keep(P, id, done, records, window)
    redis.call('ZREM', P .. ':runs', id)
    redis.call('ZREM', P .. ':leases', id)
    redis.call('LREM', P .. ':runq', 0, id)
    return cjson.encode({removed = removed, invocations = #records, expires_at = expires})
end

--[[ charter_archived_invocations
call: archived_invocations()
keys: P. args: none.
reply: {"kept":n,"windowed":w,"forever":f,"generations":g}: the compact records of archived
  invocations the graph keeps (n = w + f), written by library 24 on: w in the g live
  generations of the invocation window, f kept forever (P:archived_counts,
  P:archived_generations; records written before library 24 are not counted).
errors: none. ]]
local function charter_archived_invocations(keys, args)
    local P = prefix(keys)
    local windowed, forever, gens = archived_count(P)
    return cjson.encode({kept = windowed + forever, windowed = windowed, forever = forever,
                         generations = gens})
end

--[[ charter_archived_run
call: archived_run(run_id)
keys: P. args: run_id.
reply: {"archive":"<graph>/<YYYY-MM-DD>/<run>.charter-archive","archived_at":"<t>",
  "ended_at":"<ts>"}: the entry charter_remove_run kept for a run it removed, while it is
  kept (its generation of the invocation window has not expired, or it was kept forever, as
  every entry written before library 25); or nil. The archive is a name under the archive
  folder, for telling a caller where the run went, never a path to open: charterd finds a
  run's file through the archive folder's index. At most 9 HGETs and one ZRANGE.
errors: invalid. ]]
local function charter_archived_run(keys, args)
    local P = prefix(keys)
    local a = archived_run(P, check_id(args[1], 'run_id'))
    return a and cjson.encode(a) or nil
end

--[[ charter_retention_lease
call: retention_lease(owner, lease_ms)
keys: P. args: owner (the charterd's id), lease_ms (integer 100..600000).
reply: {"held":true} when owner now holds P:retention_lease until the database's time plus
  lease_ms (it was free, lapsed or already owner's); else {"held":false,"owner":"<holder>"}.
  One charterd at a time archives a graph's runs.
errors: invalid. ]]
local function charter_retention_lease(keys, args)
    local P = prefix(keys)
    local owner = check_text(args[1], 'owner')
    local ms = check_count(args[2], 'lease_ms', 100, 600000)
    local key = P .. ':retention_lease'
    local holder = redis.call('GET', key)
    if holder and holder ~= owner then
        return cjson.encode({held = false, owner = holder})
    end
    redis.call('SET', key, owner, 'PX', ms)
    return cjson.encode({held = true})
end

--[[ charter_retention_due
call: retention_due(cutoff, cursor, count)
keys: P. args: cutoff (seconds since the epoch: a run that ended before it is due), cursor
  (index into P:runs, oldest first), count (1..1000 runs looked at).
reply: {"due":["<run id>",...],"oldest":"<ts>"|"","next":n,"done":bool}: of count runs of
  P:runs from cursor, the ended ones whose last event is older than cutoff (due), and the
  earliest end among the ended ones looked at that are not due ("" when none).
errors: invalid. ]]
local function charter_retention_due(keys, args)
    local P = prefix(keys)
    local cutoff = tonumber(args[1])
    if not cutoff then
        raise('invalid', 'cutoff must be a number of seconds')
    end
    local cursor = check_count(args[2], 'cursor', 0, 1e15)
    local count = check_count(args[3], 'count', 1, 1000)
    local ids = zset_page(P .. ':runs', cursor, count)
    local due, oldest = {}, nil
    for _, id in ipairs(ids) do
        local f = redis.call('HMGET', P .. ':run:' .. id, 'status', 'seq')
        if ENDED[f[1]] then
            local at = ended_at(P, id, f[2])
            local t = tonumber(at) or 0
            if t < cutoff then
                due[#due + 1] = id
            elseif not oldest or t < tonumber(oldest) then
                oldest = at
            end
        end
    end
    return cjson.encode({due = due, oldest = oldest or '', next = cursor + #ids,
                         done = #ids < count})
end

-- Exported: what later files and the registry use.
archive.charter_run_export = charter_run_export
archive.charter_remove_run = charter_remove_run
archive.charter_archived_invocations = charter_archived_invocations
archive.charter_archived_run = charter_archived_run
archive.charter_retention_lease = charter_retention_lease
archive.charter_retention_due = charter_retention_due
end
