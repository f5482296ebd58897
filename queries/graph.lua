-- queries/graph.lua - reading the graph's nodes and edges, the objects replies are made of, and
-- the functions over the graph as a whole: version, clock, seeding the reference nodes, stats,
-- the integrity mode, resources and recipients.

local graph = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local LIBRARY_VERSION, MAX_LIMIT = library.LIBRARY_VERSION, library.MAX_LIMIT
local DEFAULT_LIMIT = library.DEFAULT_LIMIT
local raise, check_id, check_text = validation.raise, validation.check_id, validation.check_text
local check_id_list, check_object_list = validation.check_id_list, validation.check_object_list
local check_count, check_bool = validation.check_count, validation.check_bool
local CONF_NAMES, INTEGRITY_NAMES = validation.CONF_NAMES, validation.INTEGRITY_NAMES
local check_label, check_time = validation.check_label, validation.check_time
local json_arg, prefix, hex64 = validation.json_arg, validation.prefix, validation.hex64

-- The database's time: as stored ("<seconds>.<6 digits>"), as a number of seconds, and in
-- whole milliseconds (a number), so one TIME serves every check of a call.
local function now()
    local t = redis.call('TIME')
    local sec, usec = tonumber(t[1]), tonumber(t[2])
    return string.format('%d.%06d', sec, usec), sec + usec / 1e6,
           sec * 1000 + math.floor(usec / 1000)
end

local function hash(key)
    local flat = redis.call('HGETALL', key)
    if #flat == 0 then
        return nil
    end
    local h = {}
    for i = 1, #flat, 2 do
        h[flat[i]] = flat[i + 1]
    end
    return h
end

-- Set members, sorted so replies (and the snapshots built from them) are deterministic.
local function members(key)
    local m = redis.call('SMEMBERS', key)
    if #m > 1 then
        table.sort(m)
    end
    return m
end

local function exists(key)
    return redis.call('EXISTS', key) == 1
end

-- A stored JSON list of strings; anything malformed reads as the empty list (a grant then
-- lists nothing, which fails closed).
local function decode_list(s)
    if type(s) ~= 'string' then
        return {}
    end
    local ok, v = pcall(cjson.decode, s)
    if not ok or type(v) ~= 'table' then
        return {}
    end
    local out = {}
    for i = 1, #v do
        if type(v[i]) == 'string' then
            out[#out + 1] = v[i]
        end
    end
    return out
end

local function encode_list(t)
    if #t == 0 then
        return '[]'
    end
    return cjson.encode(t)
end

local function contains(list, x)
    for i = 1, #list do
        if list[i] == x then
            return true
        end
    end
    return false
end

local function run_object(h)
    return {
        id = h.id, task = h.task or '', mode = h.mode or '', status = h.status or '',
        workflow = h.workflow or '', seq = tonumber(h.seq) or 0, created_at = h.created_at or '',
        head = h.head or '',
        max_wall_clock_ms = tonumber(h.max_wall_clock_ms or '0') or 0,
        max_model_calls = tonumber(h.max_model_calls or '0') or 0,
        max_steps = tonumber(h.max_steps or '0') or 0,
        max_deliveries = tonumber(h.max_deliveries or '0') or 0,
        wall_clock_ms = tonumber(h.wall_clock_ms or '0') or 0,
        model_calls = tonumber(h.model_calls or '0') or 0,
        steps = tonumber(h.steps or '0') or 0,
        deliveries = tonumber(h.deliveries or '0') or 0,
        cancel_reason = h.cancel_reason or '',
    }
end

-- seq is the stored field (an audit compares it with the event's place in the run).
local function event_object(h)
    return {
        run_id = h.run_id, seq = tonumber(h.seq), kind = h.kind or '', outcome = h.outcome or '',
        codes = h.codes or '', witness = h.witness or '', detail = h.detail or '',
        snapshot = h.snapshot or '', ts = h.ts or '', evaluator = h.evaluator or '',
        prev = h.prev or '', hash = h.hash or '',
    }
end

-- A delivery as the API shows it. Its evaluator is its delivery_decided event's (the event at
-- event_seq, read from there unless the delivery kept a copy, as library version 11 and older
-- did).
local function delivery_object(h, P)
    local evaluator = h.evaluator
    if not evaluator and h.run_id and h.event_seq then
        evaluator = redis.call('HGET', P .. ':event:' .. h.run_id .. ':' .. h.event_seq,
                               'evaluator')
    end
    return {
        invocation_id = h.invocation_id, run_id = h.run_id, fingerprint = h.fingerprint,
        recipient = h.recipient, tool = h.tool, payload_id = h.payload_id,
        payload_hash = h.payload_hash, content = h.content or '',
        grant_chain = decode_list(h.grant_chain), committed_at = h.committed_at,
        event_seq = tonumber(h.event_seq), evaluator = evaluator or '',
        receipt = h.receipt or nil,
        -- an invocation's effect: "<artifact>:<summary_hash>" of each artifact its values
        -- came from (absent from a send)
        lineage = h.lineage and decode_list(h.lineage) or nil,
    }
end

-- An artifact as the API shows it: stored fields (labels as numbers, absent when missing) and,
-- with edges, its parents, resource ids and producing contexts.
local function artifact_object(P, id, h, with_edges)
    local a = {
        id = id, run_id = h.run_id, kind = h.kind, title = h.title or '',
        conf = tonumber(h.conf), integrity = tonumber(h.integrity),
        input_ids = decode_list(h.input_ids), hash = h.hash, content = h.content or '',
        capture_complete = h.capture_complete == '1', context_id = h.context_id or '',
        step = h.step or '', created_at = h.created_at or '',
    }
    if with_edges then
        local base = P .. ':artifact:' .. id
        a.parents = members(base .. ':derived_from')
        a.resources = members(base .. ':from_resource')
        a.producers = members(base .. ':produced_by')
    end
    return a
end

local function actor_refs(P, key)
    local out = {}
    for _, a in ipairs(members(key)) do
        out[#out + 1] = {id = a, kind = redis.call('HGET', P .. ':actor:' .. a, 'kind') or nil}
    end
    return out
end

local function grant_object(P, id, h, parents)
    local base = P .. ':grant:' .. id
    local revoked = h.revoked_at
    if revoked == '' then
        revoked = nil
    end
    return {
        id = id, root = h.root == '1', tools = decode_list(h.tools),
        recipients = decode_list(h.recipients), resources = decode_list(h.resources),
        valid_from = h.valid_from, valid_to = h.valid_to, revoked_at = revoked,
        parents = parents or members(base .. ':delegated_from'),
        grantees = actor_refs(P, base .. ':granted_to'),
        issuers = actor_refs(P, base .. ':issued_by'),
    }
end

local function check_limit(v, what)
    local n = check_count(v, what, 0, MAX_LIMIT)
    if n == 0 then
        return DEFAULT_LIMIT
    end
    return n
end

--[[ charter_version
call: version()
keys: P. args: none. reply: {"version":"<library version>"}. errors: none. ]]
local function charter_version(keys, args)
    return cjson.encode({version = LIBRARY_VERSION})
end

--[[ charter_time
call: time()
keys: P. args: none. reply: {"now":"<sec>.<usec>"}, the database clock. errors: none. ]]
local function charter_time(keys, args)
    local t = now()
    return cjson.encode({now = t})
end

--[[ charter_seed
call: seed(seed)
keys: P. args: JSON {resources:[{id,title,conf,integrity,content}], recipients:[{id,clearance}],
  actors:[{id,kind}], grants:[{id,root,grantee,issuer,delegated_from,tools,recipients,resources,
  valid_from,valid_to}]}. Labels are integers or names (public/internal/confidential,
  untrusted/trusted). grantee, issuer and delegated_from are an id or a list of ids (absent:
  none); parents need not exist yet. root defaults to "no delegated_from". valid_from/valid_to
  are seconds or RFC 3339 UTC times, stored as seconds.
reply: {"created":n}, the number of nodes created. A node that exists is left as it is, edges
  included (a revocation survives a restart).
errors: invalid (nothing written). ]]
local function charter_seed(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'seed')
    local resources, recipients, actors, grants = {}, {}, {}, {}
    for i, r in ipairs(check_object_list(doc.resources, 'resources')) do
        local w = 'resources[' .. i .. ']'
        resources[i] = {
            id = check_id(r.id, w .. '.id'), title = check_text(r.title, w .. '.title', ''),
            conf = check_label(r.conf, w .. '.conf', CONF_NAMES, 2),
            integrity = check_label(r.integrity, w .. '.integrity', INTEGRITY_NAMES, 1),
            content = check_text(r.content, w .. '.content', ''),
        }
    end
    for i, r in ipairs(check_object_list(doc.recipients, 'recipients')) do
        local w = 'recipients[' .. i .. ']'
        recipients[i] = {
            id = check_id(r.id, w .. '.id'),
            clearance = check_label(r.clearance, w .. '.clearance', CONF_NAMES, 2),
        }
    end
    for i, a in ipairs(check_object_list(doc.actors, 'actors')) do
        local w = 'actors[' .. i .. ']'
        if a.kind ~= 'human' and a.kind ~= 'agent' then
            raise('invalid', w .. '.kind must be "human" or "agent"')
        end
        actors[i] = {id = check_id(a.id, w .. '.id'), kind = a.kind}
    end
    local function id_or_list(v, what)
        if type(v) == 'string' then
            return {check_id(v, what)}
        end
        return check_id_list(v, what, true)
    end
    for i, g in ipairs(check_object_list(doc.grants, 'grants')) do
        local w = 'grants[' .. i .. ']'
        local parents = id_or_list(g.delegated_from, w .. '.delegated_from')
        grants[i] = {
            id = check_id(g.id, w .. '.id'),
            root = check_bool(g.root, w .. '.root', #parents == 0),
            grantees = id_or_list(g.grantee, w .. '.grantee'),
            issuers = id_or_list(g.issuer, w .. '.issuer'),
            parents = parents,
            tools = check_id_list(g.tools, w .. '.tools', true),
            recipients = check_id_list(g.recipients, w .. '.recipients', true),
            resources = check_id_list(g.resources, w .. '.resources', true),
            valid_from = check_time(g.valid_from, w .. '.valid_from'),
            valid_to = check_time(g.valid_to, w .. '.valid_to'),
        }
    end

    local ts = now()
    local created = 0
    redis.call('HSETNX', P .. ':meta', 'created_at', ts)
    for _, r in ipairs(resources) do
        local key = P .. ':resource:' .. r.id
        if not exists(key) then
            redis.call('HSET', key, 'id', r.id, 'title', r.title, 'conf', r.conf, 'integrity',
                       r.integrity, 'content', r.content)
            created = created + 1
        end
    end
    for _, r in ipairs(recipients) do
        local key = P .. ':recipient:' .. r.id
        if not exists(key) then
            redis.call('HSET', key, 'id', r.id, 'clearance', r.clearance)
            created = created + 1
        end
    end
    for _, a in ipairs(actors) do
        local key = P .. ':actor:' .. a.id
        if not exists(key) then
            redis.call('HSET', key, 'id', a.id, 'kind', a.kind)
            created = created + 1
        end
    end
    for _, g in ipairs(grants) do
        local key = P .. ':grant:' .. g.id
        if not exists(key) then
            redis.call('HSET', key, 'id', g.id, 'root', g.root and '1' or '0', 'tools',
                       encode_list(g.tools), 'recipients', encode_list(g.recipients),
                       'resources', encode_list(g.resources), 'valid_from', g.valid_from,
                       'valid_to', g.valid_to)
            for _, x in ipairs(g.grantees) do
                redis.call('SADD', key .. ':granted_to', x)
            end
            for _, x in ipairs(g.parents) do
                redis.call('SADD', key .. ':delegated_from', x)
            end
            for _, x in ipairs(g.issuers) do
                redis.call('SADD', key .. ':issued_by', x)
            end
            redis.call('SADD', P .. ':grants', g.id)
            created = created + 1
        end
    end
    return cjson.encode({created = created})
end

--[[ charter_graph_stats
call: graph_stats()
keys: P. args: none. reply: {"keys":n,"runs":n,"artifacts":n,"deliveries":n}, counted by a SCAN
  of the prefix (tests and health; linear in the database's size). errors: none. ]]
local function charter_graph_stats(keys, args)
    local P = prefix(keys)
    local n, artifacts, deliveries = 0, 0, 0
    local cursor = '0'
    local art = '^' .. P:gsub('%p', '%%%0') .. ':artifact:[^:]+$'
    local dlv = '^' .. P:gsub('%p', '%%%0') .. ':delivery:'
    repeat
        local r = redis.call('SCAN', cursor, 'MATCH', P .. ':*', 'COUNT', 1000)
        cursor = r[1]
        for _, k in ipairs(r[2]) do
            n = n + 1
            if k:find(art) then
                artifacts = artifacts + 1
            elseif k:find(dlv) and not k:find(':to$') and not k:find(':delivered$') then
                deliveries = deliveries + 1
            end
        end
    until cursor == '0'
    return cjson.encode({keys = n, runs = redis.call('ZCARD', P .. ':runs'),
                         artifacts = artifacts, deliveries = deliveries})
end

--[[ charter_integrity
call: integrity(mode, key_check)
keys: P. args: mode ("keyed" or "keyless"), key_check (64 hex digits for keyed, "" for keyless:
  HMAC-SHA256 of a fixed text under the integrity key, never the key).
reply: {"mode":"<m>","key_check":"<hex or empty>","recorded":bool}: the graph's integrity mode
  and key check as stored in P:meta. The first call on a graph records the given ones
  (recorded true); later calls only read them, and charterd refuses to start when they differ
  from its own. errors: refused (the graph was claimed for a tenant, P:tenant: it is not a
  charterd's default graph; nothing written), invalid. ]]
local function charter_integrity(keys, args)
    local P = prefix(keys)
    local mode = args[1]
    local check = args[2]
    if mode ~= 'keyed' and mode ~= 'keyless' then
        raise('invalid', 'mode must be keyed or keyless')
    end
    if (mode == 'keyed' and not hex64(check)) or (mode == 'keyless' and check ~= '') then
        raise('invalid', 'key_check must be 64 lowercase hex digits when keyed, empty when keyless')
    end
    if exists(P .. ':tenant') then
        raise('refused', 'the graph is a tenant created with CreateTenant (' .. P ..
              ':tenant), so no charterd may serve it as its default graph: its credentials ' ..
              'alone reach it (start charterd with another --graph)')
    end
    local key = P .. ':meta'
    local f = redis.call('HMGET', key, 'integrity', 'key_check')
    if f[1] then
        return cjson.encode({mode = f[1], key_check = f[2] or '', recorded = false})
    end
    redis.call('HSET', key, 'integrity', mode, 'key_check', check)
    return cjson.encode({mode = mode, key_check = check, recorded = true})
end

--[[ charter_integrity_state
call: integrity_state()
keys: P. args: none.
reply: {"mode":"keyed"|"keyless"|"","key_check":"<hex or empty>","adopted_at":"<t>"|absent}:
  the graph's integrity mode as charter_integrity recorded it ("" before any charterd served
  it), and when a keyless graph adopted a key, the database time it did (charter_adopt_key).
  Writes nothing: charterd reads it before it decides which key to claim the graph with.
  errors: invalid. ]]
local function charter_integrity_state(keys, args)
    local P = prefix(keys)
    local f = redis.call('HMGET', P .. ':meta', 'integrity', 'key_check', 'adopted_at')
    return cjson.encode({mode = f[1] or '', key_check = f[2] or '', adopted_at = f[3] or nil})
end

--[[ charter_keyless_runs
call: keyless_runs(offset, limit)
keys: P. args: offset (integer >= 0), limit (1..1000).
reply: {"runs":[{"id","seq","head"}],"total":n}: the runs of the graph in creation order from
  offset on, each with the seq and hash of its last event (0 and "" when it has none), and how
  many runs the graph holds: what charterd seals when a keyless graph adopts a key.
  errors: invalid. ]]
local function charter_keyless_runs(keys, args)
    local P = prefix(keys)
    local offset = check_count(args[1], 'offset', 0, 1e15)
    local limit = check_count(args[2], 'limit', 1, 1000)
    local runs = {}
    for _, id in ipairs(redis.call('ZRANGE', P .. ':runs', offset, offset + limit - 1)) do
        local f = redis.call('HMGET', P .. ':run:' .. id, 'seq', 'head')
        runs[#runs + 1] = {id = id, seq = tonumber(f[1]) or 0, head = f[2] or ''}
    end
    return cjson.encode({runs = runs, total = redis.call('ZCARD', P .. ':runs')})
end

--[[ charter_adopt_key
call: adopt_key(key_check, runs)
keys: P. args: key_check (64 hex digits: HMAC-SHA256 of a fixed text under the key the graph
  adopts), runs: JSON {"runs":[{"id","seq","head","seal"}]}, every run of the graph with the
  seq and hash of its last event as charter_keyless_runs gave them and seal, 64 hex digits:
  charterd's HMAC under the new key over the run's id, seq and head.
reply: {"adopted":true,"at":"<t>","runs":n} when the keyless graph now records the mode keyed,
  key_check and adopted_at (the database time), and each listed run with events records
  keyless_until (its seq), keyless_head and keyless_seal: its events up to that seq stay hashed
  with plain SHA-256, sealed from now on by the seal; {"adopted":false,"mode":"<m>"} when the
  graph is not keyless (nothing written); {"conflict":true} when the runs are not exactly the
  graph's, or one has another last event now (a run was created or an event written since they
  were listed; nothing written). errors: refused (a tenant's graph), invalid. ]]
local function charter_adopt_key(keys, args)
    local P = prefix(keys)
    local check = args[1]
    if not hex64(check) then
        raise('invalid', 'key_check must be 64 lowercase hex digits')
    end
    local list = json_arg(args[2], 'runs').runs
    if type(list) ~= 'table' then
        raise('invalid', 'runs must hold a list of runs')
    end
    if exists(P .. ':tenant') then
        raise('refused', 'the graph is a tenant created with CreateTenant (' .. P .. ':tenant)')
    end
    local mode = redis.call('HGET', P .. ':meta', 'integrity')
    if mode ~= 'keyless' then
        return cjson.encode({adopted = false, mode = mode or ''})
    end
    if #list ~= redis.call('ZCARD', P .. ':runs') then
        return cjson.encode({conflict = true})
    end
    for _, r in ipairs(list) do
        if type(r) ~= 'table' or type(r.id) ~= 'string' or not hex64(r.seal) then
            raise('invalid', 'each run needs id, seq, head and a 64-hex-digit seal')
        end
        local f = redis.call('HMGET', P .. ':run:' .. r.id, 'seq', 'head')
        if redis.call('ZSCORE', P .. ':runs', r.id) == false or (tonumber(f[1]) or 0) ~= r.seq
            or (f[2] or '') ~= r.head then
            return cjson.encode({conflict = true})
        end
    end
    local at = now()
    for _, r in ipairs(list) do
        if r.seq > 0 then
            redis.call('HSET', P .. ':run:' .. r.id, 'keyless_until', string.format('%d', r.seq),
                       'keyless_head', r.head, 'keyless_seal', r.seal)
        end
    end
    redis.call('HSET', P .. ':meta', 'integrity', 'keyed', 'key_check', check, 'adopted_at', at)
    return cjson.encode({adopted = true, at = at, runs = #list})
end

--[[ charter_get_resource
call: get_resource(resource_id)
keys: P. args: resource_id.
reply: {id,title,conf,integrity,content} (labels as numbers). errors: not_found, invalid. ]]
local function charter_get_resource(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'resource_id')
    local h = hash(P .. ':resource:' .. id)
    if not h then
        raise('not_found', 'resource ' .. id .. ' not found')
    end
    return cjson.encode({id = id, title = h.title or '', conf = tonumber(h.conf),
                         integrity = tonumber(h.integrity), content = h.content or ''})
end

--[[ charter_quarantine_resource
call: quarantine_resource(resource_id, reason, by)
keys: P. args: resource_id, reason (1..512 bytes of text), by (who quarantined it: the caller as
  events record it).
reply: {id,quarantined:true,quarantined_at,reason,by}: the resource's quarantine, stamped with
  TIME; a resource already quarantined keeps its earlier time, reason and author (nothing
  written). From then on every lineage summary that names it among its sources carries the
  quarantine among its sources' current state (lineage.summary_object), and every gate refuses
  an artifact derived from it (RULE-INPUT-QUARANTINE). errors: not_found, invalid. ]]
local function charter_quarantine_resource(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'resource_id')
    local reason = check_text(args[2], 'reason')
    local by = check_text(args[3], 'by')
    if #reason == 0 or #reason > 512 then
        raise('invalid', 'reason must be 1 to 512 bytes')
    end
    local key = P .. ':resource:' .. id
    if not exists(key) then
        raise('not_found', 'resource ' .. id .. ' not found')
    end
    local f = redis.call('HMGET', key, 'quarantined_at', 'quarantine_reason', 'quarantined_by')
    if not f[1] then
        f = {(now()), reason, by}
        redis.call('HSET', key, 'quarantined_at', f[1], 'quarantine_reason', f[2],
                   'quarantined_by', f[3])
    end
    return cjson.encode({id = id, quarantined = true, quarantined_at = f[1], reason = f[2] or '',
                         by = f[3] or ''})
end

--[[ charter_release_resource
call: release_resource(resource_id)
keys: P. args: resource_id.
reply: {id,quarantined:false,released:bool}: released is true when a quarantine was lifted,
  false when the resource was not quarantined (nothing written). errors: not_found, invalid. ]]
local function charter_release_resource(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'resource_id')
    local key = P .. ':resource:' .. id
    if not exists(key) then
        raise('not_found', 'resource ' .. id .. ' not found')
    end
    local n = redis.call('HDEL', key, 'quarantined_at', 'quarantine_reason', 'quarantined_by')
    return cjson.encode({id = id, quarantined = false, released = n > 0})
end

--[[ charter_get_recipient
call: get_recipient(recipient_id)
keys: P. args: recipient_id.
reply: {"id","clearance"} (clearance a number). errors: not_found, invalid. ]]
local function charter_get_recipient(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'recipient_id')
    local h = hash(P .. ':recipient:' .. id)
    if not h then
        raise('not_found', 'recipient ' .. id .. ' not found')
    end
    return cjson.encode({id = id, clearance = tonumber(h.clearance)})
end

-- Exported: what later files and the registry use.
graph.now = now
graph.hash = hash
graph.members = members
graph.exists = exists
graph.decode_list = decode_list
graph.encode_list = encode_list
graph.contains = contains
graph.run_object = run_object
graph.event_object = event_object
graph.delivery_object = delivery_object
graph.artifact_object = artifact_object
graph.grant_object = grant_object
graph.check_limit = check_limit
graph.charter_version = charter_version
graph.charter_time = charter_time
graph.charter_seed = charter_seed
graph.charter_graph_stats = charter_graph_stats
graph.charter_integrity = charter_integrity
graph.charter_integrity_state = charter_integrity_state
graph.charter_keyless_runs = charter_keyless_runs
graph.charter_adopt_key = charter_adopt_key
graph.charter_get_resource = charter_get_resource
graph.charter_get_recipient = charter_get_recipient
graph.charter_quarantine_resource = charter_quarantine_resource
graph.charter_release_resource = charter_release_resource
end
