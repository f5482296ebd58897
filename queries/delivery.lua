-- queries/delivery.lua - the delivery protocol's database side: an invocation's existing
-- delivery, the facts the delivery gate decides from, and the one conditional write that
-- re-checks every fact on the database's clock before committing (RULE-COMMIT-* in README.md).

local delivery = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local MAX_CHAIN = library.MAX_CHAIN
local raise, present, check_id = validation.raise, validation.present, validation.check_id
local check_invocation, check_text = validation.check_invocation, validation.check_text
local check_id_list = validation.check_id_list
local json_arg, prefix, hex64 = validation.json_arg, validation.prefix, validation.hex64
local now, hash, exists, decode_list = graph.now, graph.hash, graph.exists, graph.decode_list
local encode_list, contains, members = graph.encode_list, graph.contains, graph.members
local delivery_object = graph.delivery_object
local check_sealed, head_conflict = events.check_sealed, events.head_conflict
local write_event = events.write_event
local context_table = runs.context_table
local summary_object = lineage.summary_object
local chain_table = grants.chain_table

-- The compact records of archived invocations (charter_remove_run writes them). An invocation
-- belongs to one of 65536 buckets by the first four hex digits of its SHA-1, so each hash stays
-- small enough for Redis's compact encoding (a listpack) however many invocations were
-- archived. Without an invocation window a record is kept forever, in
-- P:archived_invocations:<b>. With a window of W seconds it is kept in the generation of the
-- time it was archived at, g = floor(t / (W/2)) on the database's clock, in
-- P:archived_invocations:<g>:<b>: a hash that expires at (g + 3) * W/2, so each record lives
-- at least W (at most 1.5 W) and then leaves Redis without any pass deleting it.
-- P:archived_generations (a sorted set, score: when the generation expires, in milliseconds)
-- names the generations that exist, so a lookup reads only live ones and needs no window: under
-- one window the current generation and the two before it, and, after the window changed, the
-- earlier window's for as long as they live (at most MAX_GENERATIONS, newest first).
-- P:archived_counts counts the records of each live generation ("forever": those kept without
-- a window), written by library 24 on.
--
-- The archived run's own entry ({archive, archived_at, ended_at}: where it went) lives as long
-- as its invocations' records: in the hash of the same generation, P:archived_runs:<g>, which
-- expires at the same time (library 25 on), or without a window in P:archived_runs, kept
-- forever as every entry written before library 25. One hash per generation rather than one
-- key per run: a key with its own expiry costs about 90 bytes more a run (its entry in the
-- keyspace and in the expires table, its object header: 337 against 246 bytes a run measured
-- on Redis 7.0), needs one PEXPIREAT a run instead of one a generation, and the generation is
-- already listed in P:archived_generations; bucketing it as the invocations are would not
-- keep the entries in Redis's compact encoding (an entry is longer than its 64-byte bound) and
-- would cost a key per bucket. Once its generation expired, charterd finds where a run went
-- in the archive folder's index.
local MAX_GENERATIONS = 8

local function archived_tag(inv)
    return redis.sha1hex(inv):sub(1, 4)
end

-- The database's time in whole milliseconds, as a number and as its decimal text.
local function now_ms()
    local t = redis.call('TIME')
    local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    return ms, string.format('%d', ms)
end

-- The compact record: the send's 32-byte digest (given in hex), then the run's id.
local function archived_record(digest_hex, run_id)
    return (digest_hex:gsub('..', function(h)
        return string.char(tonumber(h, 16))
    end)) .. run_id
end

-- The generations that have not expired at ms (the database's time in milliseconds, read
-- here when not given), newest first, at most MAX_GENERATIONS.
local function live_generations(P, ms)
    ms = ms and string.format('%d', ms) or select(2, now_ms())
    return redis.call('ZRANGE', P .. ':archived_generations', '+inf', '(' .. ms, 'BYSCORE',
                      'REV', 'LIMIT', 0, MAX_GENERATIONS)
end

-- The compact record of inv, or nil: in each live generation, newest first, then in the
-- bucket of records kept forever. At most MAX_GENERATIONS + 1 HGETs and one ZRANGE. ms,
-- optional: the database's time in milliseconds, when the caller read it already.
local function archived_lookup(P, inv, ms)
    local tag = archived_tag(inv)
    for _, g in ipairs(live_generations(P, ms)) do
        local r = redis.call('HGET', P .. ':archived_invocations:' .. g .. ':' .. tag, inv)
        if r then
            return r
        end
    end
    return redis.call('HGET', P .. ':archived_invocations:' .. tag, inv)
end

-- The entry run id left when it was archived, decoded ({archive, archived_at, ended_at}), or
-- nil: in each live generation, newest first, then among the entries kept forever (and those
-- written before library 25). At most MAX_GENERATIONS + 1 HGETs and one ZRANGE.
local function archived_run(P, id)
    local text = nil
    for _, g in ipairs(live_generations(P)) do
        text = redis.call('HGET', P .. ':archived_runs:' .. g, id)
        if text then
            break
        end
    end
    text = text or redis.call('HGET', P .. ':archived_runs', id)
    local ok, a = pcall(cjson.decode, text or '')
    if ok and type(a) == 'table' and type(a.archive) == 'string' then
        return a
    end
    return nil
end

-- Sets key's expiry to expires (ms) unless it already expires at that time or later.
local function expire_at_least(key, expires, at)
    if redis.call('PEXPIRETIME', key) < at then
        redis.call('PEXPIREAT', key, expires)
    end
end

-- Keeps the entry of run id archived now (entry, its JSON text) and the compact records
-- {{inv, record}, ...} of its invocations: forever (window_s 0) or in the current generation
-- of a window of window_s seconds, whose hashes then expire at (g + 3) * window_s / 2 (never
-- earlier than an expiry they already have). Generations that expired leave
-- P:archived_generations and P:archived_counts. Returns when this call's generation expires
-- (ms text, "" for what is kept forever).
local function archived_keep(P, id, entry, records, window_s)
    local ms, mstext = now_ms()
    local gens, counts = P .. ':archived_generations', P .. ':archived_counts'
    local expires = ''
    if window_s == 0 then
        for _, r in ipairs(records) do
            redis.call('HSET', P .. ':archived_invocations:' .. archived_tag(r[1]), r[1], r[2])
        end
        redis.call('HINCRBY', counts, 'forever', #records)
        redis.call('HSET', P .. ':archived_runs', id, entry)
    else
        local half = window_s * 500
        local g = math.floor(ms / half)
        local gen = string.format('%d', g)
        expires = string.format('%d', (g + 3) * half)
        local runs = P .. ':archived_runs:' .. gen
        redis.call('HSET', runs, id, entry)
        expire_at_least(runs, expires, (g + 3) * half)
        local touched, seen = {}, {}
        for _, r in ipairs(records) do
            local key = P .. ':archived_invocations:' .. gen .. ':' .. archived_tag(r[1])
            redis.call('HSET', key, r[1], r[2])
            if not seen[key] then
                seen[key] = true
                touched[#touched + 1] = key
            end
        end
        for _, key in ipairs(touched) do
            expire_at_least(key, expires, (g + 3) * half)
        end
        redis.call('ZADD', gens, 'GT', expires, gen)
        redis.call('HINCRBY', counts, gen, #records)
    end
    for _, gen in ipairs(redis.call('ZRANGE', gens, '-inf', mstext, 'BYSCORE')) do
        redis.call('HDEL', counts, gen)
    end
    redis.call('ZREMRANGEBYSCORE', gens, '-inf', mstext)
    return expires
end

-- How many compact records the graph keeps (those written by library 24 on): in live
-- generations, and forever; and how many generations live.
local function archived_count(P)
    local _, mstext = now_ms()
    local counts = P .. ':archived_counts'
    local forever = tonumber(redis.call('HGET', counts, 'forever') or '0') or 0
    local gens = redis.call('ZRANGE', P .. ':archived_generations', '(' .. mstext, '+inf',
                            'BYSCORE')
    local windowed = 0
    for _, gen in ipairs(gens) do
        windowed = windowed + (tonumber(redis.call('HGET', counts, gen) or '0') or 0)
    end
    return windowed, forever, #gens
end

-- The compact record an archived run left of an invocation it committed
-- (charter_remove_run), as a delivery object marked "archived" and naming the run's archive
-- (its run's entry, archived_run), or nil: the invocation stays taken after its run left
-- Redis, for as long as its record is kept.
local function archived_delivery(P, inv, ms)
    local r = archived_lookup(P, inv, ms)
    if not r then
        return nil
    end
    if #r <= 32 then
        raise('invalid', 'the archived record of invocation ' .. inv .. ' is malformed')
    end
    local digest = (r:sub(1, 32):gsub('.', function(c)
        return string.format('%02x', c:byte())
    end))
    local out = {invocation_id = inv, run_id = r:sub(33), request = digest, archived = true}
    local a = archived_run(P, out.run_id)
    if a then
        out.archive = a.archive
    end
    return out
end

--[[ charter_find_delivery
call: find_delivery(invocation_id)
keys: P. args: invocation_id.
reply: the delivery {invocation_id,run_id,fingerprint,recipient,tool,payload_id,payload_hash,
  content,grant_chain,committed_at,event_seq}; for an invocation whose run was archived and
  whose compact record is still kept, its record {invocation_id,run_id,request,"archived":true,
  archive} (request: the archive's digest of the send, which a retry is compared with; archive:
  the run's archive file as its run's entry names it, absent when it does not); or nil. The
  record is looked up in each live generation of the invocation window, newest first (the
  current one and the two before it: at most 8 HGETs and one ZRANGE), then among the records
  kept forever (one HGET).
  errors: invalid. ]]
local function charter_find_delivery(keys, args)
    local P = prefix(keys)
    local inv = check_invocation(args[1])
    local h = hash(P .. ':delivery:' .. inv)
    if not h then
        local a = archived_delivery(P, inv)
        return a and cjson.encode(a) or nil
    end
    return cjson.encode(delivery_object(h, P))
end

--[[ charter_delivery_facts
call: delivery_facts(invocation_id, payload_id, grant_id, recipient_id, context_id)
keys: P. args: invocation_id, payload_id, grant_id, recipient_id, context_id (optional).
reply: every fact the delivery protocol reads, taken at one instant:
  {"delivery": the existing delivery of the invocation (absent when unused),
   "payload": {"id","hash","content"} of the payload artifact,
   "summary": as charter_lineage_summary, when the payload has a lineage summary (absent
     when the invocation exists or the payload has none: no delivery is decided without one),
   "chain": as charter_grant_chain of "grant" (absent when the invocation exists or no grant
     is known), "grant": the grant whose chain was read,
   "recipient": {"id","clearance"} (absent when unknown), "now": "<t>",
   with context_id also "context": as charter_context_owner, and "head": as charter_run_head
     of the context's run (what the commit's event is sealed on; next_context "")}.
  grant_id "" with context_id: the grant the context recorded (charter_scope_context).
  With context_id and an unknown payload: {"context":{...},"payload_missing":true}.
  An invocation whose run was archived: {"archived":{its record, as charter_find_delivery},
  "now":"<t>"} alone, read before the context (which left with its run).
errors: not_found (context; payload without context_id), invalid. ]]
local function charter_delivery_facts(keys, args)
    local P = prefix(keys)
    local inv = check_invocation(args[1])
    local archived = archived_delivery(P, inv)
    if archived then
        return cjson.encode({archived = archived, now = now()})
    end
    local payload = check_id(args[2], 'payload_id')
    local grant = args[3]
    local recipient = check_id(args[4], 'recipient_id')
    local ctx = nil
    if present(args[5]) and args[5] ~= '' then
        ctx = context_table(P, check_id(args[5], 'context_id'))
        if grant == '' then
            grant = ctx.grant
        end
    end
    if grant ~= '' or not ctx then
        grant = check_id(grant, 'grant_id')
    end
    local akey = P .. ':artifact:' .. payload
    local pf = redis.call('HMGET', akey, 'hash', 'content')
    if not pf[1] and not exists(akey) then
        if ctx then
            return cjson.encode({context = ctx, payload_missing = true})
        end
        raise('not_found', 'artifact ' .. payload .. ' not found')
    end
    local ts = now()
    local out = {payload = {id = payload, hash = pf[1] or nil, content = pf[2] or ''}, now = ts,
                 context = ctx, grant = grant}
    if ctx and ctx.run_id ~= '' then
        -- The head the commit's event is sealed on, read as head_table does, at the same
        -- instant as every other fact (a delivery opens no context: no next_context).
        local runkey = P .. ':run:' .. ctx.run_id
        local f = redis.call('HMGET', runkey, 'seq', 'head', 'status')
        out.head = {exists = f[3] ~= false or exists(runkey), seq = f[1] and tonumber(f[1]) or 0,
                    hash = f[2] or '', status = f[3] or '', now = ts, next_context = ''}
    end
    local d = hash(P .. ':delivery:' .. inv)
    if d then
        out.delivery = delivery_object(d, P)
        return cjson.encode(out)
    end
    out.summary = summary_object(P, payload)
    if grant ~= '' then
        out.chain = chain_table(P, grant)
    end
    local r = hash(P .. ':recipient:' .. recipient)
    if r then
        out.recipient = {id = recipient, clearance = tonumber(r.clearance)}
    end
    return cjson.encode(out)
end

--[[ charter_invoke_facts
call: invoke_facts(json request)
keys: P. args: JSON {invocation_id, context_id, artifact_ids:[0..1000 ids], quoted:[ids]}.
reply: every fact Gate/Invoke reads, at one instant: {"context": as charter_context_owner,
  "head": as in charter_delivery_facts, "now":"<t>", "task": the run's task text,
  "delivery": the invocation's existing effect (absent when unused; then nothing else but the
  context, head and now), "grant": the grant the context recorded, "chain": as
  charter_grant_chain of it, "summaries":[...] per artifact id as charter_input_facts gives
  them, "contents":{id: content} of every quoted id that is an artifact of the context's run
  (absent for an unknown one and for one of another run: its content is never read out to
  another run's caller)}.
errors: not_found (context), invalid. ]]
local function charter_invoke_facts(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'request')
    local inv = check_invocation(doc.invocation_id)
    local ctx = context_table(P, check_id(doc.context_id, 'context_id'))
    local ids = check_id_list(doc.artifact_ids, 'artifact_ids', true)
    local quoted = check_id_list(doc.quoted, 'quoted', true)
    if #ids > 1000 or #quoted > 1000 then
        raise('invalid', 'artifact_ids and quoted hold at most 1000 ids')
    end
    local ts = now()
    local out = {context = ctx, now = ts, grant = ctx.grant}
    if ctx.run_id ~= '' then
        local runkey = P .. ':run:' .. ctx.run_id
        local f = redis.call('HMGET', runkey, 'seq', 'head', 'status', 'task')
        out.head = {exists = f[3] ~= false or exists(runkey), seq = f[1] and tonumber(f[1]) or 0,
                    hash = f[2] or '', status = f[3] or '', now = ts, next_context = ''}
        out.task = f[4] or ''
    end
    local d = hash(P .. ':delivery:' .. inv)
    if d then
        out.delivery = delivery_object(d, P)
        return cjson.encode(out)
    end
    if (ctx.grant or '') ~= '' then
        out.chain = chain_table(P, ctx.grant)
    end
    out.summaries = {}
    for i, id in ipairs(ids) do
        local read, o = pcall(summary_object, P, id)
        if read then
            out.summaries[i] = o or {id = id}
        elseif type(o) == 'table' and o.charter_err == 'not_found' then
            out.summaries[i] = {id = id, missing = true}
        else
            error(o)
        end
    end
    out.contents = {}
    for _, id in ipairs(quoted) do
        local f = redis.call('HMGET', P .. ':artifact:' .. id, 'run_id', 'content')
        if f[2] and f[1] == ctx.run_id and ctx.run_id ~= '' then
            out.contents[id] = f[2]
        end
    end
    return cjson.encode(out)
end

-- The first reason the chain cannot carry the delivery at time tnum, or nil. cached: the
-- decision was made from the chain's structure as charterd keeps it (a grant's lists and its
-- delegated_from edges do not change through the API; an edit of them behind it is found by
-- charter audit, which compares the run's grants with its workflow), so only each grant's
-- existence, root flag, revocation and validity are read.
local function chain_refusal(P, chain, tool, recipient, sources, tnum, cached)
    local on_chain = {}
    for i, g in ipairs(chain) do
        -- RULE-COMMIT-GRANT-UNCHANGED: the chain is still the one evaluated.
        if on_chain[g] then
            return 'chain_cycle', g
        end
        on_chain[g] = true
        local base = P .. ':grant:' .. g
        local h
        if cached then
            local f = redis.call('HMGET', base, 'root', 'revoked_at', 'valid_from', 'valid_to')
            h = (f[1] or f[3]) and {root = f[1], revoked_at = f[2] or nil, valid_from = f[3],
                                   valid_to = f[4]} or hash(base)
        else
            h = hash(base)
        end
        if not h then
            return 'grant_not_found', g
        end
        local parents = not cached and redis.call('SMEMBERS', base .. ':delegated_from')
        if i < #chain then
            if parents and (#parents ~= 1 or parents[1] ~= chain[i + 1]) then
                return 'chain_mismatch', g
            end
        elseif (parents and #parents ~= 0) or h.root ~= '1' then
            return 'chain_not_rooted', g
        end
        -- RULE-COMMIT-GRANT-UNREVOKED
        if h.revoked_at and h.revoked_at ~= '' then
            return 'grant_revoked', g
        end
        -- RULE-COMMIT-GRANT-UNEXPIRED
        local from, to = tonumber(h.valid_from), tonumber(h.valid_to)
        if not from or from > tnum then
            return 'grant_not_yet_valid', g
        end
        if not to or tnum >= to then
            return 'grant_expired', g
        end
        if not cached then
            -- RULE-COMMIT-GRANT-TOOL
            if not contains(decode_list(h.tools), tool) then
                return 'grant_tool', g
            end
            -- RULE-COMMIT-RECIPIENT (an invocation of a tool without a destination has none)
            if recipient ~= '' and not contains(decode_list(h.recipients), recipient) then
                return 'grant_recipient', g
            end
            -- RULE-COMMIT-RESOURCES
            local res = decode_list(h.resources)
            for _, s in ipairs(sources) do
                if not contains(res, s) then
                    return 'grant_resource', g .. ' ' .. s
                end
            end
        end
    end
    return nil
end

--[[ charter_commit_delivery
call: commit_delivery(delivery, facts_sha, facts, event) -> list
keys: P. args: JSON {run_id,invocation_id,fingerprint,payload_id,payload_hash,content_sha1,
  recipient,tool,grant_chain:[leaf..root],sources:[...],lineage,summary_hash,parents,cached}
  (summary_hash and parents, optional together: the payload's lineage summary hash and the
  parents it names, the decision having been made from them; fingerprint: the
  delivery fingerprint, the request's content identity; lineage, optional: {"<sha1>":"<record>"},
  the lineage records the event's snapshot names that charter_delivery_facts found unstored,
  each hashing to its name, written with the delivery as charter_put_lineage does; cached,
  optional, with summary_hash: the facts charterd decided from without reading them in this
  call, {context, owners:[...], decided_at:"<t>", kind, conf, integrity, title,
  resources:[...], producers:[...], seal}: the send's context and its OWNED_BY actors, the time
  the decision was made at, and the payload's own fields, FROM_RESOURCE and PRODUCED_BY edges
  and summary seal ("" for none) as decided), facts_sha
  and facts ("" and "", or 64 lowercase hex digits and a non-empty text: the facts record the
  event's snapshot names, written with the delivery as charter_put_blob writes P:blob:<sha>
  unless one is stored; readers check it hashes to its name; both may be left out), sealed
  event delivery_decided with outcome "allow" (the delivery shows its evaluator, read from
  the event). content, optional in the JSON: the delivery's content; without it, the payload's
  stored content, whose SHA-1 the checks compare with content_sha1. invoke, optional: the
  commit of an invocation (Gate/Invoke) instead of a send: {artifacts:[{id,hash,summary_hash,
  parents}]}, the artifacts its argument values came from as decided; then payload_id and
  content_sha1 are not read, content (the arguments as committed) is required, recipient may
  be "" (a tool without a destination: no recipient check), the event is invoke_decided, and
  each artifact is checked as a payload is below (payload_not_found, payload_other_run,
  payload_hash_mismatch, summary_changed, edges_changed) in place of the payload; its
  resources, optional: every source resource of every artifact, each checked unquarantined in
  place of sources (resource_quarantined).
reply: {"status":"committed","delivery":{...},"seq":n} (with cached: the flat list
  ["committed", "<seq>", "<committed_at>"]), or {"status":"exists","delivery":{...}}
  when the invocation is taken (nothing written), or {"status":"refused","reason":"<check>",
  "detail":"<object>"} (nothing written). With the time t read from TIME inside the call, the
  checks, in order, and their reasons: run exists (run_not_found), is not cancelled,
  budget_exhausted or interrupted (run_stopped), has no cancel request
  (run_cancelled), has fewer deliveries than its
  max_deliveries budget (budget_deliveries), is not completed (run_completed); with cached,
  decided_at <= t < decided_at + 5 (decided_at), the context's OWNED_BY
  actors are owners (context_changed); payload exists
  (payload_not_found), is of the run (payload_other_run), its hash equals payload_hash
  (payload_hash_mismatch), sha1 of its stored content equals content_sha1 (content_changed),
  with summary_hash: its summary_hash is unchanged (summary_changed) and its derived_from set
  equals parents (edges_changed); with cached: its kind, conf, integrity and title, the SHA-1
  of its stored summary (summary_hash), its summary seal and its from_resource and produced_by
  sets are the ones given (payload_changed);
  recipient exists (recipient_not_found; not read with cached, whose clearance was decided
  from); for each grant of grant_chain in order: listed once
  (chain_cycle), exists (grant_not_found), has exactly the next one as its only delegated_from
  parent, or for the last none and root = 1 (chain_mismatch, chain_not_rooted; with cached,
  only the last's root = 1: its edges were decided from as kept), unrevoked
  (grant_revoked), valid_from <= t (grant_not_yet_valid), t < valid_to (grant_expired), lists
  the tool (grant_tool), the recipient (grant_recipient) and every source (grant_resource; the
  lists are not read with cached: they were decided from as kept); no source is quarantined
  (resource_quarantined: charter_quarantine_resource).
  An invocation whose run was archived is taken too while its compact record is kept:
  {"status":"exists","delivery":{its record, as charter_find_delivery}}. Once the record has
  expired (the invocation window) the run has long left Redis with its contexts and payloads,
  so the check that the run exists refuses the commit (run_not_found).
  When every check passes but the run's head moved, the conflict reply (nothing written).
  On commit, in the same call: the facts record, the Delivery hash (committed_at = t,
  event_seq = the event's seq; no copy of the event's evaluator; its payload_id and recipient
  are its DELIVERED and TO edges; with invoke, lineage: the sorted JSON list of
  "<id>:<summary_hash>" of its artifacts), the run's deliveries edge and the event.
errors: invalid (arguments), nothing written. ]]

-- The "cached" member of the commit's argument, checked (nil when absent): the facts charterd
-- decided from without reading them in the call, each compared with the graph in it.
local function cached_arg(v)
    if not present(v) then
        return nil
    end
    if type(v) ~= 'table' then
        raise('invalid', 'cached must be an object')
    end
    local c = {
        context = check_id(v.context, 'cached.context'),
        owners = check_id_list(v.owners, 'cached.owners', true),
        decided_at = v.decided_at, kind = check_id(v.kind, 'cached.kind'),
        conf = v.conf, integrity = v.integrity, title = check_text(v.title, 'cached.title', ''),
        resources = check_id_list(v.resources, 'cached.resources', true),
        producers = check_id_list(v.producers, 'cached.producers', true),
        seal = check_text(v.seal, 'cached.seal', ''),
    }
    if type(c.decided_at) ~= 'string' or not c.decided_at:match('^%d+%.%d%d%d%d%d%d$') then
        raise('invalid', 'cached.decided_at must be "<seconds>.<6 digits>"')
    end
    if type(c.conf) ~= 'number' or type(c.integrity) ~= 'number' then
        raise('invalid', 'cached.conf and cached.integrity must be numbers')
    end
    for _, list in ipairs({c.owners, c.resources, c.producers}) do
        table.sort(list)
    end
    return c
end

-- The commit's argument (args[1]) checked, as a table of what the checks and writes use.
-- The "invoke" member of the commit's argument, checked (nil when absent): the artifacts the
-- invocation's argument values came from, each {id, hash, summary_hash, parents} as decided.
local function invoke_arg(v)
    if not present(v) then
        return nil
    end
    if type(v) ~= 'table' or type(v.artifacts) ~= 'table' then
        raise('invalid', 'invoke must be an object with artifacts')
    end
    local out = {}
    for i, a in ipairs(v.artifacts) do
        if type(a) ~= 'table' or type(a.summary_hash) ~= 'string' or #a.summary_hash ~= 40 then
            raise('invalid', 'invoke.artifacts: {id, hash, summary_hash, parents} each')
        end
        local parents = check_id_list(a.parents, 'invoke.artifacts.parents', true)
        table.sort(parents)
        out[i] = {id = check_id(a.id, 'invoke.artifacts.id'), hash = check_text(a.hash, 'hash'),
                  summary_hash = a.summary_hash, parents = parents}
    end
    out.resources = check_id_list(v.resources, 'invoke.resources', true)
    return out
end

local function commit_arg(s)
    local doc = json_arg(s, 'delivery')
    local invoke = invoke_arg(doc.invoke)
    local d = {
        run_id = check_id(doc.run_id, 'run_id'), inv = check_invocation(doc.invocation_id),
        fingerprint = check_text(doc.fingerprint, 'fingerprint'),
        payload_id = invoke and '' or check_id(doc.payload_id, 'payload_id'),
        payload_hash = check_text(doc.payload_hash, 'payload_hash'),
        content_sha1 = doc.content_sha1,
        recipient = (invoke and doc.recipient == '') and '' or check_id(doc.recipient, 'recipient'),
        tool = check_id(doc.tool, 'tool'),
        chain = check_id_list(doc.grant_chain, 'grant_chain', false),
        sources = check_id_list(doc.sources, 'sources', true),
        invoke = invoke,
    }
    if invoke then
        -- An invocation delivers its arguments: the content is given, there is no payload.
        d.content = check_text(doc.content, 'content')
        if #d.chain == 0 or #d.chain > MAX_CHAIN then
            raise('invalid', 'grant_chain must hold 1..' .. MAX_CHAIN .. ' grants')
        end
        d.records = {}
        return d
    end
    if type(d.content_sha1) ~= 'string' or #d.content_sha1 ~= 40 or
        not d.content_sha1:find('^[0-9a-f]+$') then
        raise('invalid', 'content_sha1 must be 40 lowercase hex digits')
    end
    if #d.chain == 0 or #d.chain > MAX_CHAIN then
        raise('invalid', 'grant_chain must hold 1..' .. MAX_CHAIN .. ' grants')
    end
    if present(doc.summary_hash) then
        d.summary_hash = doc.summary_hash
        if type(d.summary_hash) ~= 'string' or #d.summary_hash ~= 40 or
            not d.summary_hash:find('^[0-9a-f]+$') then
            raise('invalid', 'summary_hash must be 40 lowercase hex digits')
        end
        d.parents = check_id_list(doc.parents, 'parents', true)
        table.sort(d.parents)
    end
    d.cached = cached_arg(doc.cached)
    if d.cached and not d.summary_hash then
        raise('invalid', 'cached needs summary_hash')
    end
    d.content = present(doc.content) and check_text(doc.content, 'content') or nil
    -- The lineage records the event's snapshot names, not stored when the facts were read.
    d.records = {}
    if present(doc.lineage) then
        if type(doc.lineage) ~= 'table' then
            raise('invalid', 'lineage must be an object of sha1 to record')
        end
        for sha, text in pairs(doc.lineage) do
            if type(sha) ~= 'string' or #sha ~= 40 or not sha:find('^[0-9a-f]+$') or
                type(text) ~= 'string' or redis.sha1hex(text) ~= sha then
                raise('invalid', 'lineage: every record must hash to its 40-hex sha1 name')
            end
            d.records[#d.records + 1] = {sha, text}
        end
    end
    return d
end

-- True when the sorted lists a and b hold the same ids.
local function same_ids(a, b)
    if #a ~= #b then
        return false
    end
    for i = 1, #a do
        if a[i] ~= b[i] then
            return false
        end
    end
    return true
end

-- The first reason the run cannot take the delivery now (tnum: the database time), or nil.
-- rf: the run's status, cancel_reason, max_deliveries as read.
local function run_refusal(P, d, rf, tnum)
    local status = rf[1]
    -- A stopped run never delivers: cancellation, budgets and a lapsed lease are final here.
    if status == 'cancelled' or status == 'budget_exhausted' or status == 'interrupted' then
        return 'run_stopped', d.run_id .. ' ' .. status
    end
    if (rf[2] or '') ~= '' then
        return 'run_cancelled', d.run_id
    end
    local maxd = tonumber(rf[3] or '0') or 0
    if maxd > 0 and redis.call('SCARD', P .. ':run:' .. d.run_id .. ':deliveries') >= maxd then
        return 'budget_deliveries', d.run_id .. ' max_deliveries ' .. string.format('%d', maxd)
    end
    -- A completed run's record is closed: the facts read refuses its contexts too, but a run
    -- completed since (CompleteRun of an external run) is refused here, in the commit.
    if status == 'completed' then
        return 'run_completed', d.run_id
    end
    local c = d.cached
    if not c then
        return nil
    end
    -- RULE-COMMIT-DATABASE-CLOCK: the decision was made at a time of this clock, not later.
    local at = tonumber(c.decided_at)
    if at > tnum or tnum >= at + 5 then
        return 'decided_at', c.decided_at
    end
    if not same_ids(members(P .. ':context:' .. c.context .. ':owned_by'), c.owners) then
        return 'context_changed', c.context
    end
    return nil
end

-- The first reason the payload is not the one evaluated, or nil. pf: its run_id, hash,
-- content, summary_hash, kind, conf, integrity, title, summary, summary_seal as read.
local function payload_refusal(P, d, pf)
    local id, payload_hash, content_sha1 = d.payload_id, d.payload_hash, d.content_sha1
    local payload = {run_id = pf[1] or nil, hash = pf[2] or nil, content = pf[3] or nil}
    if payload.run_id ~= d.run_id then
        return 'payload_other_run', id
    end
    -- RULE-COMMIT-PAYLOAD-BYTES: the payload is the one evaluated, byte for byte.
    if payload.hash ~= payload_hash then
        return 'payload_hash_mismatch', id
    end
    if redis.sha1hex(payload.content or '') ~= content_sha1 then
        return 'content_changed', id
    end
    if not d.summary_hash then
        return nil
    end
    -- RULE-COMMIT-PAYLOAD-BYTES: the payload's lineage summary is the one evaluated and its
    -- own DERIVED_FROM edges are still the parents the summary names.
    local akey = P .. ':artifact:' .. id
    if pf[4] ~= d.summary_hash then
        return 'summary_changed', id
    end
    if not same_ids(members(akey .. ':derived_from'), d.parents) then
        return 'edges_changed', id
    end
    local c = d.cached
    -- The payload's own node as it was decided from: fields, summary text and seal, edges.
    if c and (pf[5] ~= c.kind or tonumber(pf[6]) ~= c.conf or tonumber(pf[7]) ~= c.integrity or
        (pf[8] or '') ~= c.title or redis.sha1hex(pf[9] or '') ~= d.summary_hash or
        (pf[10] or '') ~= c.seal or not same_ids(members(akey .. ':from_resource'), c.resources) or
        not same_ids(members(akey .. ':produced_by'), c.producers)) then
        return 'payload_changed', id
    end
    return nil
end

-- The first reason an artifact an invocation's values came from is not the one evaluated, or
-- nil: of the run, its recorded hash, its lineage summary and its own DERIVED_FROM edges as
-- decided (RULE-COMMIT-PAYLOAD-BYTES, for each of them).
local function invoke_refusal(P, d)
    for _, a in ipairs(d.invoke) do
        local akey = P .. ':artifact:' .. a.id
        local f = redis.call('HMGET', akey, 'run_id', 'hash', 'summary_hash')
        if not f[1] and not exists(akey) then
            return 'payload_not_found', a.id
        end
        if f[1] ~= d.run_id then
            return 'payload_other_run', a.id
        end
        if f[2] ~= a.hash then
            return 'payload_hash_mismatch', a.id
        end
        if f[3] ~= a.summary_hash then
            return 'summary_changed', a.id
        end
        if not same_ids(members(akey .. ':derived_from'), a.parents) then
            return 'edges_changed', a.id
        end
    end
    return nil
end

local function charter_commit_delivery(keys, args)
    local P = prefix(keys)
    local d = commit_arg(args[1])
    local nargs = #args
    local facts_sha, facts = '', ''
    if nargs == 4 then
        facts_sha, facts = args[2], args[3]
    end
    if facts_sha ~= '' or facts ~= '' then
        if not hex64(facts_sha) or type(facts) ~= 'string' or facts == '' then
            raise('invalid', 'facts_sha and facts must be 64 lowercase hex digits and a text, ' ..
                      'or both empty')
        end
    end
    local ev = check_sealed(args[nargs], 'event', d.invoke and 'invoke_decided' or
                            'delivery_decided')
    if ev.outcome ~= 'allow' then
        raise('invalid', 'event.outcome must be allow: only an allowed delivery commits')
    end
    local run_id, inv, payload_id = d.run_id, d.inv, d.payload_id

    local dkey = P .. ':delivery:' .. inv
    -- One command answers the usual case: no delivery of the invocation, no event stored at the
    -- new event's place, and no archived record that could name the invocation (no generation
    -- listed, no bucket kept forever for its tag). Only when one of them exists are they read
    -- one by one below.
    local seen = redis.call('EXISTS', dkey,
                            P .. ':event:' .. run_id .. ':' .. string.format('%d', ev.seq),
                            P .. ':archived_generations',
                            P .. ':archived_invocations:' .. archived_tag(inv)) > 0
    -- RULE-COMMIT-INVOCATION-UNUSED: an invocation commits at most once.
    local existing = seen and hash(dkey)
    if existing then
        return cjson.encode({status = 'exists', delivery = delivery_object(existing, P)})
    end
    -- RULE-COMMIT-DATABASE-CLOCK: every time below is the database's, read inside this call
    -- (once: the archived records' generations are looked up at the same time).
    local ts, tnum, tms = now()
    local archived = seen and archived_delivery(P, inv, tms)
    if archived then
        return cjson.encode({status = 'exists', delivery = archived})
    end
    local function refuse(reason, detail)
        return cjson.encode({status = 'refused', reason = reason, detail = detail})
    end
    local runkey = P .. ':run:' .. run_id
    local rf = redis.call('HMGET', runkey, 'status', 'cancel_reason', 'max_deliveries', 'seq',
                          'head')
    if not rf[1] and not exists(runkey) then
        return refuse('run_not_found', run_id)
    end
    local reason, detail = run_refusal(P, d, rf, tnum)
    if reason then
        return refuse(reason, detail)
    end
    local pf = {}
    if d.invoke then
        reason, detail = invoke_refusal(P, d)
    else
        local akey = P .. ':artifact:' .. payload_id
        pf = redis.call('HMGET', akey, 'run_id', 'hash', 'content', 'summary_hash', 'kind',
                        'conf', 'integrity', 'title', 'summary', 'summary_seal')
        if not pf[1] and not exists(akey) then
            return refuse('payload_not_found', payload_id)
        end
        reason, detail = payload_refusal(P, d, pf)
    end
    if reason then
        return refuse(reason, detail)
    end
    -- RULE-COMMIT-RECIPIENT: the recipient exists (each grant lists it: chain_refusal); with
    -- cached, its clearance was decided from as kept (it does not change through the API).
    if not d.cached and d.recipient ~= '' and not exists(P .. ':recipient:' .. d.recipient) then
        return refuse('recipient_not_found', d.recipient)
    end
    reason, detail = chain_refusal(P, d.chain, d.tool, d.recipient, d.sources, tnum, d.cached)
    if reason then
        return refuse(reason, detail)
    end
    -- RULE-COMMIT-QUARANTINE: no source the decision read was quarantined since (an
    -- invocation names every source of every value's lineage, the control values' too).
    for _, r in ipairs(d.invoke and d.invoke.resources or d.sources) do
        if redis.call('HEXISTS', P .. ':resource:' .. r, 'quarantined_at') == 1 then
            return refuse('resource_quarantined', r)
        end
    end
    local conflict = head_conflict(P, run_id, ev, {rf[4], rf[5]}, not seen)
    if conflict then
        return conflict
    end

    for _, r in ipairs(d.records) do
        redis.call('SET', P .. ':lineage:' .. r[1], r[2], 'NX')
    end
    if facts_sha ~= '' then
        redis.call('SET', P .. ':blob:' .. facts_sha, facts, 'NX')
    end
    local content = d.content or pf[3] or ''
    local seq = string.format('%d', ev.seq)
    redis.call('HSET', dkey, 'invocation_id', inv, 'run_id', run_id, 'fingerprint',
               d.fingerprint, 'recipient', d.recipient, 'tool', d.tool, 'payload_id', payload_id,
               'payload_hash', d.payload_hash, 'content', content, 'grant_chain',
               encode_list(d.chain), 'committed_at', ts, 'event_seq', seq)
    -- An invocation's effect keeps the lineage summaries it was checked against: its receipt
    -- names them.
    local checked = nil
    if d.invoke then
        checked = {}
        for i, a in ipairs(d.invoke) do
            checked[i] = a.id .. ':' .. a.summary_hash
        end
        table.sort(checked)
        redis.call('HSET', dkey, 'lineage', encode_list(checked))
    end
    redis.call('SADD', P .. ':run:' .. run_id .. ':deliveries', inv)
    write_event(P, run_id, ev)
    if d.cached then
        -- charterd knows every other field of the delivery: the ones it sent.
        return {'committed', seq, ts}
    end
    -- The delivery as delivery_object reads it back, from what was just written.
    return cjson.encode({status = 'committed', seq = ev.seq, delivery = {
        invocation_id = inv, run_id = run_id, fingerprint = d.fingerprint,
        recipient = d.recipient, tool = d.tool, payload_id = payload_id,
        payload_hash = d.payload_hash, content = content, grant_chain = d.chain,
        committed_at = ts, event_seq = ev.seq, evaluator = ev.evaluator, lineage = checked}})
end

-- Exported: what later files and the registry use.
delivery.archived_record = archived_record
delivery.archived_keep = archived_keep
delivery.archived_count = archived_count
delivery.archived_run = archived_run
delivery.charter_find_delivery = charter_find_delivery
delivery.charter_delivery_facts = charter_delivery_facts
delivery.charter_invoke_facts = charter_invoke_facts
delivery.charter_commit_delivery = charter_commit_delivery
end
