#!lua name=charter
--[[
charter.lua - the query library: every read and write charterd makes on the graph.

One Redis Functions library. Each function takes exactly one key, the graph prefix
`charter:{G}` (P below), derives every other key of the graph from it (all share the hash tag
{G}, so one cluster slot), runs atomically, and replies with one JSON text or nil. The key schema
and the reply shapes are in queries/README.md.

Conventions every function follows:
- Arguments are validated before the first write; a missing or ill-typed argument replies
  {"err":"invalid","msg":...} and writes nothing. Errors the caller handles are
  {"err":"not_found"|"exists"|"refused"|"invalid"|"limit","msg":...}.
- Ids are 1..128 characters of [A-Za-z0-9_.-] (invocation ids may hold ':' too, but never end
  in ":to" or ":delivered", the suffixes of a delivery's edge sets), so no id can name another
  key of the schema. Free text must be UTF-8 without NUL, so every reply is valid JSON.
- Times come from TIME inside the call, as strings "<seconds>.<microseconds, 6 digits>".
- Events form one hash chain per run, sealed by charterd (the hash may be keyed with a secret
  that never reaches Redis): a function that writes an event takes it sealed, as its last
  argument {kind,outcome,codes,witness,detail,snapshot,fingerprint,seq,ts,prev,hash}, stores
  every text byte for byte as given, and writes only if the run's head is still (seq - 1, prev);
  otherwise it writes nothing and replies {"conflict":true,"head":{...}} with the current head,
  and charterd seals again. Event write: hash P:event:<run>:<seq>, P:run:<id> seq and head,
  ZADD P:run:<id>:events seq seq.
- Empty lists encode as {} (Redis's cjson has no empty-array marker); readers accept both.
]]

local LIBRARY_VERSION = '6'
local MAX_LIMIT = 100000  -- upper bound of any limit argument
local DEFAULT_LIMIT = 1000 -- a limit of 0 means this
local MAX_CHAIN = 64       -- grants one grant_chain walk returns, and a commit accepts
local RUN_STATUSES = {
    created = true, running = true, blocked = true, recovering = true,
    completed = true, error = true, interrupted = true,
}

-- ---------------------------------------------------------------------------------------------
-- Errors and validation
-- ---------------------------------------------------------------------------------------------

-- Raises a reply-level error; register() turns it into {"err":code,"msg":msg}. Only raised
-- before the first write of a function, so an error reply always means nothing was written.
local function raise(code, msg)
    error({charter_err = code, msg = msg})
end

local function present(v)
    return v ~= nil and v ~= cjson.null
end

local function valid_id(s)
    return type(s) == 'string' and #s >= 1 and #s <= 128 and not s:find('[^%w_%.%-]')
end

local function check_id(s, what)
    if not valid_id(s) then
        raise('invalid', what .. ' must be 1..128 characters of [A-Za-z0-9_.-]')
    end
    return s
end

-- Invocation ids additionally allow ':' but may not end in a delivery edge suffix.
local function check_invocation(s)
    if type(s) ~= 'string' or #s < 1 or #s > 128 or s:find('[^%w_%.:%-]') then
        raise('invalid', 'invocation_id must be 1..128 characters of [A-Za-z0-9._:-]')
    end
    local last = s:match('([^:]*)$')
    if last == 'to' or last == 'delivered' then
        raise('invalid', 'invocation_id may not end in ":to" or ":delivered"')
    end
    return s
end

-- UTF-8 without NUL (so cjson's output is JSON every reader accepts).
local function utf8_ok(s)
    -- A plain find runs at memchr speed; the %z pattern class costs ~30 us per KiB.
    if s:find('\0', 1, true) then
        return false
    end
    if not s:find('[\128-\255]') then
        return true
    end
    local i, n = 1, #s
    while i <= n do
        local c = s:byte(i)
        if c < 0x80 then
            i = s:find('[\128-\255]', i) -- skip the ASCII run at once
            if not i then
                return true
            end
        else
            local len, cp, min
            if c >= 0xC2 and c <= 0xDF then
                len, cp, min = 2, c - 0xC0, 0x80
            elseif c >= 0xE0 and c <= 0xEF then
                len, cp, min = 3, c - 0xE0, 0x800
            elseif c >= 0xF0 and c <= 0xF4 then
                len, cp, min = 4, c - 0xF0, 0x10000
            else
                return false
            end
            if i + len - 1 > n then
                return false
            end
            for k = i + 1, i + len - 1 do
                local b = s:byte(k)
                if b < 0x80 or b > 0xBF then
                    return false
                end
                cp = cp * 64 + (b - 0x80)
            end
            if cp < min or cp > 0x10FFFF or (cp >= 0xD800 and cp <= 0xDFFF) then
                return false
            end
            i = i + len
        end
    end
    return true
end

-- A text field: a UTF-8 string; absent gives dflt when given, else it is an error.
local function check_text(v, what, dflt)
    if not present(v) then
        if dflt ~= nil then
            return dflt
        end
        raise('invalid', what .. ' is required')
    end
    if type(v) ~= 'string' then
        raise('invalid', what .. ' must be a string')
    end
    if not utf8_ok(v) then
        raise('invalid', what .. ' must be UTF-8 without NUL')
    end
    return v
end

-- A list of ids; absent gives {} when optional.
local function check_id_list(v, what, optional)
    if not present(v) then
        if optional then
            return {}
        end
        raise('invalid', what .. ' is required')
    end
    if type(v) ~= 'table' then
        raise('invalid', what .. ' must be a list of ids')
    end
    local n = 0
    for k, _ in pairs(v) do
        if type(k) ~= 'number' then
            raise('invalid', what .. ' must be a list of ids')
        end
        n = n + 1
    end
    local out = {}
    for i = 1, n do
        if v[i] == nil then
            raise('invalid', what .. ' must be a list of ids')
        end
        out[i] = check_id(v[i], what .. '[' .. i .. ']')
    end
    return out
end

-- A list of objects (tables with string keys); absent gives {}.
local function check_object_list(v, what)
    if not present(v) then
        return {}
    end
    if type(v) ~= 'table' then
        raise('invalid', what .. ' must be a list')
    end
    for k, _ in pairs(v) do
        if type(k) ~= 'number' then
            raise('invalid', what .. ' must be a list')
        end
    end
    local out = {}
    for i = 1, #v do
        if type(v[i]) ~= 'table' then
            raise('invalid', what .. '[' .. i .. '] must be an object')
        end
        out[i] = v[i]
    end
    return out
end

-- A non-negative integer given as a number or a decimal string.
local function check_count(v, what, min, max)
    local n = tonumber(v)
    if n == nil or n ~= math.floor(n) or n < min or n > max then
        raise('invalid', what .. ' must be an integer in ' .. min .. '..' .. max)
    end
    return n
end

local function check_bool(v, what, dflt)
    if not present(v) then
        return dflt
    end
    if v == true or v == 1 or v == '1' or v == 'true' then
        return true
    end
    if v == false or v == 0 or v == '0' or v == 'false' then
        return false
    end
    raise('invalid', what .. ' must be a boolean')
end

local CONF_NAMES = {public = 0, internal = 1, confidential = 2}
local INTEGRITY_NAMES = {untrusted = 0, trusted = 1}

-- A label: an integer in 0..max, or its name.
local function check_label(v, what, names, max)
    if type(v) == 'string' and names[v] ~= nil then
        return names[v]
    end
    local n = tonumber(v)
    if n == nil or n ~= math.floor(n) or n < 0 or n > max then
        raise('invalid', what .. ' must be a label 0..' .. max .. ' or its name')
    end
    return n
end

local function days_from_civil(y, m, d)
    if m <= 2 then
        y = y - 1
    end
    local era = math.floor(y / 400)
    local yoe = y - era * 400
    local mp = (m + 9) % 12
    local doy = math.floor((153 * mp + 2) / 5) + d - 1
    local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
    return era * 146097 + doe - 719468
end

-- A time as stored: seconds since the epoch as a string. Accepts a number, a decimal string or
-- an RFC 3339 UTC time "YYYY-MM-DDTHH:MM:SS[.frac]Z".
local function check_time(v, what)
    local secs
    if type(v) == 'number' then
        secs = v
    elseif type(v) == 'string' then
        secs = tonumber(v)
        if secs == nil then
            local y, mo, d, h, mi, s, frac =
                v:match('^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)(%.?%d*)Z$')
            if y and frac ~= '.' then
                y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
                h, mi, s = tonumber(h), tonumber(mi), tonumber(s)
                local mdays = ({31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31})[mo]
                if mo == 2 and y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0) then
                    mdays = 29
                end
                if mdays and d >= 1 and d <= mdays and h <= 23 and mi <= 59 and s <= 60 then
                    secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s +
                               (tonumber('0' .. frac) or 0)
                end
            end
        end
    end
    if secs == nil or secs ~= secs or secs < 0 or secs > 1e12 then
        raise('invalid', what .. ' must be seconds since the epoch or an RFC 3339 UTC time')
    end
    if secs == math.floor(secs) then
        return string.format('%d', secs)
    end
    return string.format('%.6f', secs)
end

local function json_arg(s, what)
    if type(s) ~= 'string' then
        raise('invalid', what .. ' is required')
    end
    local ok, v = pcall(cjson.decode, s)
    if not ok or type(v) ~= 'table' then
        raise('invalid', what .. ' must be a JSON object')
    end
    return v
end

-- The graph prefix: the only key, "charter:{G}".
local function prefix(keys)
    local p = keys[1]
    if #keys ~= 1 or type(p) ~= 'string' or not p:match('^charter:{[%w_%.%-]+}$') or #p > 75 then
        raise('invalid', 'the only key must be the graph prefix charter:{<graph>}')
    end
    return p
end

-- ---------------------------------------------------------------------------------------------
-- Reading helpers
-- ---------------------------------------------------------------------------------------------

-- The database time as the stored string and as a number.
local function now()
    local t = redis.call('TIME')
    local sec, usec = tonumber(t[1]), tonumber(t[2])
    return string.format('%d.%06d', sec, usec), sec + usec / 1e6
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
    table.sort(m)
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
    }
end

-- seq is the stored field (an audit compares it with the event's place in the run).
local function event_object(h)
    return {
        run_id = h.run_id, seq = tonumber(h.seq), kind = h.kind or '', outcome = h.outcome or '',
        codes = h.codes or '', witness = h.witness or '', detail = h.detail or '',
        snapshot = h.snapshot or '', ts = h.ts or '', fingerprint = h.fingerprint or '',
        prev = h.prev or '', hash = h.hash or '',
    }
end

local function delivery_object(h)
    return {
        invocation_id = h.invocation_id, run_id = h.run_id, fingerprint = h.fingerprint,
        recipient = h.recipient, tool = h.tool, payload_id = h.payload_id,
        payload_hash = h.payload_hash, content = h.content or '',
        grant_chain = decode_list(h.grant_chain), committed_at = h.committed_at,
        event_seq = tonumber(h.event_seq), evaluator = h.evaluator or '',
        receipt = h.receipt or nil,
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

local function hex64(s)
    return type(s) == 'string' and #s == 64 and not s:find('[^0-9a-f]')
end

-- A sealed event (the last argument of every function that writes one), validated:
-- {kind,outcome,codes,witness,detail,snapshot,fingerprint,seq,ts,prev,hash}. Every text is kept
-- byte for byte, because charterd hashed exactly these bytes: detail and snapshot must be
-- texts (charterd encodes JSON itself), codes a comma list of code names. fingerprint is "" or
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
        snapshot = check_text(ev.snapshot, what .. '.snapshot', ''),
        fingerprint = check_text(ev.fingerprint, what .. '.fingerprint', ''),
        seq = check_count(ev.seq, what .. '.seq', 1, 1e15),
        ts = ev.ts, prev = check_text(ev.prev, what .. '.prev', ''), hash = ev.hash,
    }
    if kind and out.kind ~= kind then
        raise('invalid', what .. '.kind must be ' .. kind)
    end
    if out.codes:find('[^%w_,]') then
        raise('invalid', what .. '.codes must be a comma list of code names')
    end
    if out.fingerprint ~= '' and not hex64(out.fingerprint) then
        raise('invalid', what .. '.fingerprint must be empty or 64 lowercase hex digits')
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
-- present at ev.seq means the log was altered; nothing is written over it.
local function head_conflict(P, run_id, ev)
    local f = redis.call('HMGET', P .. ':run:' .. run_id, 'seq', 'head')
    local seq = f[1] and tonumber(f[1]) or 0
    if seq ~= ev.seq - 1 or (f[2] or '') ~= ev.prev then
        return cjson.encode({conflict = true, head = head_table(P, run_id)})
    end
    if exists(P .. ':event:' .. run_id .. ':' .. string.format('%d', ev.seq)) then
        raise('exists', 'event ' .. string.format('%d', ev.seq) .. ' of run ' .. run_id ..
                  ' exists beyond the run\'s head: the event log was altered (see charter audit)')
    end
    return nil
end

-- Writes the sealed event ev (checked by head_conflict) and moves the run's head to it.
local function write_event(P, run_id, ev)
    local seq = string.format('%d', ev.seq)
    redis.call('HSET', P .. ':event:' .. run_id .. ':' .. seq, 'run_id', run_id, 'seq', seq,
               'kind', ev.kind, 'outcome', ev.outcome, 'codes', ev.codes, 'witness', ev.witness,
               'detail', ev.detail, 'snapshot', ev.snapshot, 'ts', ev.ts, 'fingerprint',
               ev.fingerprint, 'prev', ev.prev, 'hash', ev.hash)
    redis.call('HSET', P .. ':run:' .. run_id, 'seq', seq, 'head', ev.hash)
    redis.call('ZADD', P .. ':run:' .. run_id .. ':events', seq, seq)
    return ev.seq
end

local function check_limit(v, what)
    local n = check_count(v, what, 0, MAX_LIMIT)
    if n == 0 then
        return DEFAULT_LIMIT
    end
    return n
end

-- ---------------------------------------------------------------------------------------------
-- Functions
-- ---------------------------------------------------------------------------------------------

--[[ charter_version
keys: P. args: none. reply: {"version":"<library version>"}. errors: none. ]]
local function charter_version(keys, args)
    return cjson.encode({version = LIBRARY_VERSION})
end

--[[ charter_time
keys: P. args: none. reply: {"now":"<sec>.<usec>"}, the database clock. errors: none. ]]
local function charter_time(keys, args)
    local t = now()
    return cjson.encode({now = t})
end

--[[ charter_seed
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

--[[ charter_create_run
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
keys: P. args: none.
reply: {"runs":[ids]}: every run whose status is running or recovering, oldest first (charterd
  marks each interrupted at startup, one transition per run). errors: none. ]]
local function charter_unfinished_runs(keys, args)
    local P = prefix(keys)
    local out = {}
    for _, id in ipairs(redis.call('ZRANGE', P .. ':runs', 0, -1)) do
        local cur = redis.call('HGET', P .. ':run:' .. id, 'status')
        if cur == 'running' or cur == 'recovering' then
            out[#out + 1] = id
        end
    end
    return cjson.encode({runs = out})
end

--[[ charter_run_head
keys: P. args: run_id.
reply: {"exists":bool,"seq":n,"hash":"<hex>","status":"<s>","now":"<t>","next_context":"c<n>"}:
  what charterd seals the run's next event from (seq 0 and hash "" for a run without events or
  one that does not exist). errors: invalid. ]]
local function charter_run_head(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    return cjson.encode(head_table(P, run_id))
end

--[[ charter_get_run
keys: P. args: run_id, after_seq (integer >= 0), limit (0: 1000; at most 100000).
reply: {"run":{...},"events":[...],"deliveries":[...],"artifacts":[...]}: the events with
  seq > after_seq, ascending, at most limit; every delivery of the run (by event_seq); every
  artifact of the run in creation order, with content and edges (callers redact).
errors: not_found (run), invalid. ]]
local function charter_get_run(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local after = check_count(args[2], 'after_seq', 0, 1e15)
    local limit = check_limit(args[3], 'limit')
    local base = P .. ':run:' .. run_id
    local h = hash(base)
    if not h then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    local events = {}
    local seqs = redis.call('ZRANGEBYSCORE', base .. ':events', '(' .. string.format('%d', after),
                            '+inf', 'LIMIT', 0, limit)
    for _, s in ipairs(seqs) do
        local e = hash(P .. ':event:' .. run_id .. ':' .. s)
        if e then
            events[#events + 1] = event_object(e)
        end
    end
    local deliveries = {}
    for _, inv in ipairs(members(base .. ':deliveries')) do
        local d = hash(P .. ':delivery:' .. inv)
        if d then
            deliveries[#deliveries + 1] = delivery_object(d)
        end
    end
    table.sort(deliveries, function(a, b)
        return (a.event_seq or 0) < (b.event_seq or 0)
    end)
    local artifacts = {}
    for _, id in ipairs(redis.call('ZRANGE', base .. ':artifacts', 0, -1)) do
        local a = hash(P .. ':artifact:' .. id)
        if a then
            artifacts[#artifacts + 1] = artifact_object(P, id, a, true)
        end
    end
    return cjson.encode({run = run_object(h), events = events, deliveries = deliveries,
                         artifacts = artifacts})
end

--[[ charter_list_runs
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
keys: P. args: JSON {run_id,step,actor,id}, sealed event step_opened. id is the context id
  the call is to create, next_context of charter_run_head (the event's detail names it).
reply: {"context":{id,run_id,step,owners:[actor]},"seq":n}: the new context of the run, its
  OWNED_BY edge, the run's HAS_CONTEXT edge and the event; or the conflict reply (also when
  another context was created since, so id is no longer the next one).
errors: not_found (run or actor), invalid. ]]
local function charter_open_context(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'context')
    local run_id = check_id(doc.run_id, 'run_id')
    local step = check_id(doc.step, 'step')
    local actor = check_id(doc.actor, 'actor')
    local want = check_id(doc.id, 'id')
    local ev = check_sealed(args[2], 'event', 'step_opened')
    if not exists(P .. ':run:' .. run_id) then
        raise('not_found', 'run ' .. run_id .. ' not found')
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

--[[ charter_context_owner
keys: P. args: context_id.
reply: {"id","run_id","step","owners":[...],"workflow","parent","scope"}: workflow is the
  version the context's run follows ("" until charter_scope_context), parent the context it
  was narrowed from ("" when none), scope {tools,recipients,resources} its narrowed lists
  (absent when not narrowed). errors: not_found, invalid. ]]
local function charter_context_owner(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'context_id')
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
    return cjson.encode({id = id, run_id = h.run_id or '', step = h.step or '',
                         owners = members(key .. ':owned_by'), workflow = h.workflow or '',
                         parent = h.parent or '', scope = scope, run_status = status or ''})
end

--[[ charter_get_resource
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

--[[ charter_get_recipient
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

--[[ charter_create_artifact
keys: P. args: JSON {run_id,context_id,kind,title,conf,integrity,hash,content,input_ids,resource,
  capture_complete}, sealed event (any kind, e.g. source_read, output_recorded). kind is
  "source" or "derived"; conf 0..2 and integrity 0..1 are the labels the caller computed; hash
  is the hex SHA-256 of content; resource (a source's registered origin) may be absent for a
  source and must be absent for a derived artifact.
reply: {"artifact":{...with parents, resources, producers},"seq":n}: the artifact a<n>, its
  DERIVED_FROM edges (to input_ids, duplicates once), FROM_RESOURCE, PRODUCED/produced_by, the
  run's artifact index and the event, in one call; or the conflict reply.
errors: not_found (run, context, an input, the resource), invalid (arguments; the context is of
  another run), nothing written. ]]
local function charter_create_artifact(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'artifact')
    local run_id = check_id(doc.run_id, 'run_id')
    local context_id = check_id(doc.context_id, 'context_id')
    local kind = doc.kind
    if kind ~= 'source' and kind ~= 'derived' then
        raise('invalid', 'kind must be "source" or "derived"')
    end
    local title = check_text(doc.title, 'title', '')
    local conf = check_label(doc.conf, 'conf', {}, 2)
    local integrity = check_label(doc.integrity, 'integrity', {}, 1)
    local hex = doc.hash
    if type(hex) ~= 'string' or #hex ~= 64 or hex:find('[^0-9a-f]') then
        raise('invalid', 'hash must be 64 lowercase hex digits')
    end
    local content = check_text(doc.content, 'content', '')
    local inputs = check_id_list(doc.input_ids, 'input_ids', true)
    local resource = nil
    if present(doc.resource) and doc.resource ~= '' then
        resource = check_id(doc.resource, 'resource')
        if kind ~= 'source' then
            raise('invalid', 'only a source artifact has a resource')
        end
    end
    local capture = check_bool(doc.capture_complete, 'capture_complete', false)
    local ev = check_sealed(args[2], 'event', nil)

    if not exists(P .. ':run:' .. run_id) then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    local ctx = hash(P .. ':context:' .. context_id)
    if not ctx then
        raise('not_found', 'context ' .. context_id .. ' not found')
    end
    if ctx.run_id ~= run_id then
        raise('invalid', 'context ' .. context_id .. ' is not of run ' .. run_id)
    end
    for _, p in ipairs(inputs) do
        if not exists(P .. ':artifact:' .. p) then
            raise('not_found', 'input artifact ' .. p .. ' not found')
        end
    end
    if resource and not exists(P .. ':resource:' .. resource) then
        raise('not_found', 'resource ' .. resource .. ' not found')
    end
    local conflict = head_conflict(P, run_id, ev)
    if conflict then
        return conflict
    end

    local ts = now()
    local n = redis.call('HINCRBY', P .. ':counter', 'artifact', 1)
    local id = 'a' .. n
    local key = P .. ':artifact:' .. id
    redis.call('HSET', key, 'id', id, 'run_id', run_id, 'kind', kind, 'title', title, 'conf', conf,
               'integrity', integrity, 'input_ids', encode_list(inputs), 'hash', hex, 'content',
               content, 'capture_complete', capture and '1' or '0', 'context_id', context_id,
               'step', ctx.step or '', 'created_at', ts)
    for _, p in ipairs(inputs) do
        redis.call('SADD', key .. ':derived_from', p)
    end
    if resource then
        redis.call('SADD', key .. ':from_resource', resource)
    end
    redis.call('SADD', key .. ':produced_by', context_id)
    redis.call('SADD', P .. ':context:' .. context_id .. ':produced', id)
    redis.call('ZADD', P .. ':run:' .. run_id .. ':artifacts', n, id)
    local seq = write_event(P, run_id, ev)
    return cjson.encode({artifact = artifact_object(P, id, hash(key), true), seq = seq})
end

--[[ charter_get_artifact
keys: P. args: artifact_id.
reply: the artifact object with parents, resources (ids) and producers. errors: not_found,
  invalid. ]]
local function charter_get_artifact(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'artifact_id')
    local h = hash(P .. ':artifact:' .. id)
    if not h then
        raise('not_found', 'artifact ' .. id .. ' not found')
    end
    return cjson.encode(artifact_object(P, id, h, true))
end

--[[ charter_ancestry
keys: P. args: payload_id, limit (integer 1..100000).
reply: {"root":id,"truncated":bool,"artifacts":[{id,run_id,kind,title,conf,integrity,
  capture_complete,hash,input_ids,parents,resources:[{id,title,conf,integrity}],producers}]}:
  breadth-first over derived_from from the payload (first), each artifact once. A label that is
  not stored is absent; a parent whose hash is missing stays under parents with no entry; a
  resource whose hash is missing is {id} alone. After limit artifacts the walk stops and
  truncated is true if any further artifact was reachable. Content is not included.
errors: not_found (payload), invalid. ]]
-- The ancestry reply of charter_ancestry as a table (shared with charter_delivery_facts).
local function ancestry_table(P, root, limit)
    if not exists(P .. ':artifact:' .. root) then
        raise('not_found', 'artifact ' .. root .. ' not found')
    end
    local seen = {[root] = true}
    local queue, head = {root}, 1
    local out = {}
    local truncated = false
    local rescache = {}
    while head <= #queue do
        local id = queue[head]
        head = head + 1
        local base = P .. ':artifact:' .. id
        -- HMGET, not HGETALL: the walk never copies an artifact's content.
        local f = redis.call('HMGET', base, 'run_id', 'kind', 'title', 'conf', 'integrity',
                             'capture_complete', 'hash', 'input_ids', 'step')
        local found = false
        for i = 1, 9 do
            found = found or f[i] ~= false
        end
        if found then
            if #out >= limit then
                truncated = true
                break
            end
            local parents = members(base .. ':derived_from')
            for _, p in ipairs(parents) do
                if not seen[p] then
                    seen[p] = true
                    queue[#queue + 1] = p
                end
            end
            local resources = {}
            for _, r in ipairs(members(base .. ':from_resource')) do
                local res = rescache[r]
                if not res then
                    local f = redis.call('HMGET', P .. ':resource:' .. r, 'title', 'conf',
                                         'integrity')
                    res = {id = r, title = f[1] or nil, conf = tonumber(f[2]),
                           integrity = tonumber(f[3])}
                    rescache[r] = res
                end
                resources[#resources + 1] = res
            end
            out[#out + 1] = {
                id = id, run_id = f[1] or nil, kind = f[2] or nil, title = f[3] or nil,
                conf = tonumber(f[4]), integrity = tonumber(f[5]),
                capture_complete = f[6] == '1', hash = f[7] or nil,
                input_ids = decode_list(f[8] or nil), parents = parents,
                resources = resources, producers = members(base .. ':produced_by'),
                step = f[9] or nil,
            }
        end
    end
    return {root = root, truncated = truncated, artifacts = out}
end

local function charter_ancestry(keys, args)
    local P = prefix(keys)
    local root = check_id(args[1], 'payload_id')
    local limit = check_count(args[2], 'limit', 1, MAX_LIMIT)
    return cjson.encode(ancestry_table(P, root, limit))
end

--[[ charter_grant_chain
keys: P. args: grant_id.
reply: {"leaf":id,"grants":[{id,root,tools,recipients,resources,valid_from,valid_to,revoked_at,
  parents,grantees:[{id,kind}],issuers:[{id,kind}]}]}: the leaf first, then every grant
  reachable upward through delegated_from, breadth-first, each once (a cycle ends the walk), at
  most 64. revoked_at is absent when not revoked; an actor's kind is absent when the actor is.
  A missing leaf gives an empty list; a missing parent stays under parents with no entry.
errors: invalid. ]]
-- The reply of charter_grant_chain as a table (shared with charter_delivery_facts).
local function chain_table(P, leaf)
    local seen = {[leaf] = true}
    local queue, head = {leaf}, 1
    local out = {}
    while head <= #queue and #out < MAX_CHAIN do
        local id = queue[head]
        head = head + 1
        local base = P .. ':grant:' .. id
        local h = hash(base)
        if h then
            local parents = members(base .. ':delegated_from')
            for _, p in ipairs(parents) do
                if not seen[p] then
                    seen[p] = true
                    queue[#queue + 1] = p
                end
            end
            out[#out + 1] = grant_object(P, id, h, parents)
        end
    end
    return {leaf = leaf, grants = out}
end

local function charter_grant_chain(keys, args)
    local P = prefix(keys)
    local leaf = check_id(args[1], 'grant_id')
    return cjson.encode(chain_table(P, leaf))
end

--[[ charter_append_event
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
keys: P. args: run_id, seq.
reply: the event {run_id,seq,kind,outcome,codes,witness,detail,snapshot,ts,fingerprint,prev,
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
keys: P. args: run_id, after_seq (integer >= 0), limit (1..1000).
reply: {"run":{"seq":n,"head":"<hex>","status":"<s>","receipt":"<json text>"|absent},
  "upper":n, "events":[...], "deliveries":[{"invocation_id","event_seq"}]}: one page of a run's
  event log as stored, for an audit of its hash chain. upper is the last place to look: the
  greatest of the run's seq, the greatest seq in its events index and any of the 8 places
  after that where an event hash exists. events holds, for each place p in
  after_seq+1 .. min(after_seq+limit, upper), {"at":p,"missing":true,"indexed":bool} when no
  event hash is stored there, else the event object with "at":p and "indexed" (p is in the
  run's events index). errors: not_found (run), invalid. ]]
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
    local top = redis.call('ZREVRANGE', base .. ':events', 0, 0, 'WITHSCORES')
    if top[2] and tonumber(top[2]) and tonumber(top[2]) > upper then
        upper = tonumber(top[2])
    end
    for k = upper + 1, upper + 8 do
        if exists(P .. ':event:' .. run_id .. ':' .. string.format('%d', k)) then
            upper = k
        end
    end
    local events = {}
    local last = math.min(after + limit, upper)
    for p = after + 1, last do
        local at = string.format('%d', p)
        local indexed = redis.call('ZSCORE', base .. ':events', at) ~= false
        local e = hash(P .. ':event:' .. run_id .. ':' .. at)
        if e then
            local o = event_object(e)
            o.at = p
            o.indexed = indexed
            o.stored_seq = e.seq or ''
            events[#events + 1] = o
        else
            events[#events + 1] = {at = p, missing = true, indexed = indexed}
        end
    end
    local deliveries = {}
    for _, inv in ipairs(members(base .. ':deliveries')) do
        local s = redis.call('HGET', P .. ':delivery:' .. inv, 'event_seq')
        deliveries[#deliveries + 1] = {invocation_id = inv, event_seq = s and tonumber(s) or 0}
    end
    return cjson.encode({run = {seq = head, head = h.head or '', status = h.status or '',
                                receipt = h.receipt or nil},
                         upper = upper, events = events, deliveries = deliveries})
end

--[[ charter_find_delivery
keys: P. args: invocation_id.
reply: the delivery {invocation_id,run_id,fingerprint,recipient,tool,payload_id,payload_hash,
  content,grant_chain,committed_at,event_seq}, or nil. errors: invalid. ]]
local function charter_find_delivery(keys, args)
    local P = prefix(keys)
    local inv = check_invocation(args[1])
    local h = hash(P .. ':delivery:' .. inv)
    if not h then
        return nil
    end
    return cjson.encode(delivery_object(h))
end

--[[ charter_delivery_facts
keys: P. args: invocation_id, payload_id, grant_id, recipient_id, limit.
reply: every fact the delivery protocol reads, taken at one instant:
  {"delivery": the existing delivery of the invocation (absent when unused),
   "payload": the payload artifact object with its content,
   "ancestry": as charter_ancestry (absent when the invocation exists),
   "chain": as charter_grant_chain (absent when the invocation exists),
   "recipient": {"id","clearance"} (absent when unknown), "now": "<t>"}.
errors: not_found (payload), invalid. ]]
local function charter_delivery_facts(keys, args)
    local P = prefix(keys)
    local inv = check_invocation(args[1])
    local payload = check_id(args[2], 'payload_id')
    local grant = check_id(args[3], 'grant_id')
    local recipient = check_id(args[4], 'recipient_id')
    local limit = check_count(args[5], 'limit', 1, MAX_LIMIT)
    local h = hash(P .. ':artifact:' .. payload)
    if not h then
        raise('not_found', 'artifact ' .. payload .. ' not found')
    end
    local out = {payload = artifact_object(P, payload, h, false), now = now()}
    local d = hash(P .. ':delivery:' .. inv)
    if d then
        out.delivery = delivery_object(d)
        return cjson.encode(out)
    end
    out.ancestry = ancestry_table(P, payload, limit)
    out.chain = chain_table(P, grant)
    local r = hash(P .. ':recipient:' .. recipient)
    if r then
        out.recipient = {id = recipient, clearance = tonumber(r.clearance)}
    end
    return cjson.encode(out)
end

-- The first reason the chain cannot carry the delivery at time tnum, or nil.
local function chain_refusal(P, chain, tool, recipient, sources, tnum)
    local on_chain = {}
    for i, g in ipairs(chain) do
        if on_chain[g] then
            return 'chain_cycle', g
        end
        on_chain[g] = true
        local base = P .. ':grant:' .. g
        local h = hash(base)
        if not h then
            return 'grant_not_found', g
        end
        local parents = redis.call('SMEMBERS', base .. ':delegated_from')
        if i < #chain then
            if #parents ~= 1 or parents[1] ~= chain[i + 1] then
                return 'chain_mismatch', g
            end
        elseif #parents ~= 0 or h.root ~= '1' then
            return 'chain_not_rooted', g
        end
        if h.revoked_at and h.revoked_at ~= '' then
            return 'grant_revoked', g
        end
        local from, to = tonumber(h.valid_from), tonumber(h.valid_to)
        if not from or from > tnum then
            return 'grant_not_yet_valid', g
        end
        if not to or tnum >= to then
            return 'grant_expired', g
        end
        if not contains(decode_list(h.tools), tool) then
            return 'grant_tool', g
        end
        if not contains(decode_list(h.recipients), recipient) then
            return 'grant_recipient', g
        end
        local res = decode_list(h.resources)
        for _, s in ipairs(sources) do
            if not contains(res, s) then
                return 'grant_resource', g .. ' ' .. s
            end
        end
    end
    return nil
end

--[[ charter_commit_delivery
keys: P. args: JSON {run_id,invocation_id,fingerprint,payload_id,payload_hash,content_sha1,
  recipient,tool,grant_chain:[leaf..root],sources:[...],content}, sealed event
  delivery_decided with outcome "allow" (its fingerprint, the evaluator's, is kept on the
  delivery as evaluator).
reply: {"status":"committed","delivery":{...},"seq":n}, or {"status":"exists","delivery":{...}}
  when the invocation is taken (nothing written), or {"status":"refused","reason":"<check>",
  "detail":"<object>"} (nothing written). With the time t read from TIME inside the call, the
  checks, in order, and their reasons: run exists (run_not_found); payload exists
  (payload_not_found), is of the run (payload_other_run), its hash equals payload_hash
  (payload_hash_mismatch), sha1 of its stored content equals content_sha1 (content_changed);
  recipient exists (recipient_not_found); for each grant of grant_chain in order: listed once
  (chain_cycle), exists (grant_not_found), has exactly the next one as its only delegated_from
  parent, or for the last none and root = 1 (chain_mismatch, chain_not_rooted), unrevoked
  (grant_revoked), valid_from <= t (grant_not_yet_valid), t < valid_to (grant_expired), lists
  the tool (grant_tool), the recipient (grant_recipient) and every source (grant_resource).
  When every check passes but the run's head moved, the conflict reply (nothing written).
  On commit, in the same call: the Delivery hash (committed_at = t, event_seq = the event's
  seq), its delivered and to edges, the run's deliveries edge and the event.
errors: invalid (arguments), nothing written. ]]
local function charter_commit_delivery(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'delivery')
    local run_id = check_id(doc.run_id, 'run_id')
    local inv = check_invocation(doc.invocation_id)
    local fingerprint = check_text(doc.fingerprint, 'fingerprint')
    local payload_id = check_id(doc.payload_id, 'payload_id')
    local payload_hash = check_text(doc.payload_hash, 'payload_hash')
    local content_sha1 = doc.content_sha1
    if type(content_sha1) ~= 'string' or #content_sha1 ~= 40 or content_sha1:find('[^0-9a-f]') then
        raise('invalid', 'content_sha1 must be 40 lowercase hex digits')
    end
    local recipient = check_id(doc.recipient, 'recipient')
    local tool = check_id(doc.tool, 'tool')
    local chain = check_id_list(doc.grant_chain, 'grant_chain', false)
    if #chain == 0 or #chain > MAX_CHAIN then
        raise('invalid', 'grant_chain must hold 1..' .. MAX_CHAIN .. ' grants')
    end
    local sources = check_id_list(doc.sources, 'sources', true)
    local content = check_text(doc.content, 'content', '')
    local ev = check_sealed(args[2], 'event', 'delivery_decided')
    if ev.outcome ~= 'allow' then
        raise('invalid', 'event.outcome must be allow: only an allowed delivery commits')
    end

    local dkey = P .. ':delivery:' .. inv
    local existing = hash(dkey)
    if existing then
        return cjson.encode({status = 'exists', delivery = delivery_object(existing)})
    end
    local ts, tnum = now()
    local function refuse(reason, detail)
        return cjson.encode({status = 'refused', reason = reason, detail = detail})
    end
    if not exists(P .. ':run:' .. run_id) then
        return refuse('run_not_found', run_id)
    end
    local payload = hash(P .. ':artifact:' .. payload_id)
    if not payload then
        return refuse('payload_not_found', payload_id)
    end
    if payload.run_id ~= run_id then
        return refuse('payload_other_run', payload_id)
    end
    if payload.hash ~= payload_hash then
        return refuse('payload_hash_mismatch', payload_id)
    end
    if redis.sha1hex(payload.content or '') ~= content_sha1 then
        return refuse('content_changed', payload_id)
    end
    if not exists(P .. ':recipient:' .. recipient) then
        return refuse('recipient_not_found', recipient)
    end
    local reason, detail = chain_refusal(P, chain, tool, recipient, sources, tnum)
    if reason then
        return refuse(reason, detail)
    end
    local conflict = head_conflict(P, run_id, ev)
    if conflict then
        return conflict
    end

    local seq = string.format('%d', ev.seq)
    redis.call('HSET', dkey, 'invocation_id', inv, 'run_id', run_id, 'fingerprint', fingerprint,
               'recipient', recipient, 'tool', tool, 'payload_id', payload_id, 'payload_hash',
               payload_hash, 'content', content, 'grant_chain', encode_list(chain),
               'committed_at', ts, 'event_seq', seq, 'evaluator', ev.fingerprint)
    redis.call('SADD', dkey .. ':delivered', payload_id)
    redis.call('SADD', dkey .. ':to', recipient)
    redis.call('SADD', P .. ':run:' .. run_id .. ':deliveries', inv)
    write_event(P, run_id, ev)
    return cjson.encode({status = 'committed', delivery = delivery_object(hash(dkey)),
                         seq = ev.seq})
end

--[[ charter_revoke_grant
keys: P. args: grant_id.
reply: the grant object (as in grant_chain) with revoked_at = TIME, or the earlier revoked_at
  when it was revoked already. errors: not_found, invalid. ]]
local function charter_revoke_grant(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'grant_id')
    local key = P .. ':grant:' .. id
    local h = hash(key)
    if not h then
        raise('not_found', 'grant ' .. id .. ' not found')
    end
    if not h.revoked_at or h.revoked_at == '' then
        local ts = now()
        redis.call('HSET', key, 'revoked_at', ts)
        h.revoked_at = ts
    end
    return cjson.encode(grant_object(P, id, h, nil))
end

--[[ charter_restore_grants
keys: P. args: grant_id, or "" for every grant of the graph.
reply: {"restored":[ids]}: the grants whose revoked_at was removed (sorted).
errors: not_found (a named grant), invalid. ]]
local function charter_restore_grants(keys, args)
    local P = prefix(keys)
    local which = args[1]
    local ids
    if which == nil or which == '' then
        ids = members(P .. ':grants')
    else
        check_id(which, 'grant_id')
        if not exists(P .. ':grant:' .. which) then
            raise('not_found', 'grant ' .. which .. ' not found')
        end
        ids = {which}
    end
    local out = {}
    for _, id in ipairs(ids) do
        local key = P .. ':grant:' .. id
        if redis.call('HDEL', key, 'revoked_at') == 1 then
            out[#out + 1] = id
        end
    end
    return cjson.encode({restored = out})
end

--[[ charter_integrity
keys: P. args: mode ("keyed" or "keyless"), key_check (64 hex digits for keyed, "" for keyless:
  HMAC-SHA256 of a fixed text under the integrity key, never the key).
reply: {"mode":"<m>","key_check":"<hex or empty>","recorded":bool}: the graph's integrity mode
  and key check as stored in P:meta. The first call on a graph records the given ones
  (recorded true); later calls only read them, and charterd refuses to start when they differ
  from its own. errors: invalid. ]]
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
    local key = P .. ':meta'
    local f = redis.call('HMGET', key, 'integrity', 'key_check')
    if f[1] then
        return cjson.encode({mode = f[1], key_check = f[2] or '', recorded = false})
    end
    redis.call('HSET', key, 'integrity', mode, 'key_check', check)
    return cjson.encode({mode = mode, key_check = check, recorded = true})
end

--[[ charter_get_receipt
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
    return cjson.encode({delivery = delivery_object(d)})
end

--[[ charter_attach_receipt
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

-- ---------------------------------------------------------------------------------------------
-- Registration
-- ---------------------------------------------------------------------------------------------

-- Wraps fn so a raise() becomes the JSON error reply; any other error (a failed redis.call)
-- propagates as a Redis error.
local function register(name, fn, readonly)
    local function callback(keys, args)
        local ok, res = pcall(fn, keys, args)
        if ok then
            return res
        end
        if type(res) == 'table' and res.charter_err then
            return cjson.encode({err = res.charter_err, msg = res.msg})
        end
        error(res)
    end
    local flags = {}
    if readonly then
        flags = {'no-writes'}
    end
    redis.register_function({function_name = name, callback = callback, flags = flags})
end

register('charter_version', charter_version, true)
register('charter_time', charter_time, true)
register('charter_seed', charter_seed, false)
register('charter_graph_stats', charter_graph_stats, true)
register('charter_create_run', charter_create_run, false)
register('charter_transition_run', charter_transition_run, false)
register('charter_unfinished_runs', charter_unfinished_runs, true)
register('charter_run_head', charter_run_head, true)
register('charter_get_run', charter_get_run, true)
register('charter_list_runs', charter_list_runs, true)
register('charter_open_context', charter_open_context, false)
register('charter_context_owner', charter_context_owner, true)
register('charter_get_resource', charter_get_resource, true)
register('charter_get_recipient', charter_get_recipient, true)
register('charter_create_artifact', charter_create_artifact, false)
register('charter_get_artifact', charter_get_artifact, true)
register('charter_ancestry', charter_ancestry, true)
register('charter_grant_chain', charter_grant_chain, true)
register('charter_append_event', charter_append_event, false)
register('charter_get_event', charter_get_event, true)
register('charter_audit_events', charter_audit_events, true)
register('charter_find_delivery', charter_find_delivery, true)
register('charter_delivery_facts', charter_delivery_facts, true)
register('charter_commit_delivery', charter_commit_delivery, false)
register('charter_revoke_grant', charter_revoke_grant, false)
register('charter_restore_grants', charter_restore_grants, false)
register('charter_integrity', charter_integrity, false)
register('charter_get_receipt', charter_get_receipt, true)
register('charter_attach_receipt', charter_attach_receipt, false)

-- ---------------------------------------------------------------------------------------------
-- Workflows: definitions as data, and the workflow and scope of a context
-- ---------------------------------------------------------------------------------------------

-- A stored workflow version (hash P:workflow:<version>) as the API shows it.
local function workflow_info(h)
    return {
        name = h.name or '', version = h.version or '', task = h.task or '',
        steps = decode_list(h.steps), applied_at = h.applied_at or '',
    }
end

-- True when lists a and b hold the same strings (allowlists compare as sets).
local function same_set(a, b)
    if #a ~= #b then
        return false
    end
    local seen = {}
    for _, x in ipairs(a) do
        seen[x] = true
    end
    for _, x in ipairs(b) do
        if not seen[x] then
            return false
        end
    end
    return true
end

-- An id or a list of ids (absent: none), as charter_seed reads grantee, issuer, delegated_from.
local function ids_of(v, what)
    if type(v) == 'string' then
        return {check_id(v, what)}
    end
    return check_id_list(v, what, true)
end

-- The refusal of a seed entry whose id the graph already holds with other content.
local function clash(part, i, id, noun, what)
    return string.format('%s[%d].id: %s "%s" is already in the graph and differs in %s; ids ' ..
                             'are shared by every workflow of a graph, so use another id or an ' ..
                             'identical %s', part, i - 1, noun, id, what, noun)
end

-- The first entry of seed (charter_seed's argument) whose node exists in the graph with other
-- content, as a one-line reason naming the entry (0-based, the definition's order), or nil.
-- A grant's revocation is state, not content: it never clashes.
local function seed_clash(P, seed)
    for i, r in ipairs(check_object_list(seed.resources, 'resources')) do
        local w = 'resources[' .. i .. ']'
        local h = hash(P .. ':resource:' .. check_id(r.id, w .. '.id'))
        if h then
            local diff
            if h.title ~= check_text(r.title, w .. '.title', '') then
                diff = 'title'
            elseif tonumber(h.conf) ~= check_label(r.conf, w .. '.conf', CONF_NAMES, 2) then
                diff = 'confidentiality'
            elseif tonumber(h.integrity) ~=
                check_label(r.integrity, w .. '.integrity', INTEGRITY_NAMES, 1) then
                diff = 'integrity'
            elseif h.content ~= check_text(r.content, w .. '.content', '') then
                diff = 'content'
            end
            if diff then
                return clash('resources', i, r.id, 'resource', diff)
            end
        end
    end
    for i, r in ipairs(check_object_list(seed.recipients, 'recipients')) do
        local w = 'recipients[' .. i .. ']'
        local h = hash(P .. ':recipient:' .. check_id(r.id, w .. '.id'))
        if h and tonumber(h.clearance) ~=
            check_label(r.clearance, w .. '.clearance', CONF_NAMES, 2) then
            return clash('recipients', i, r.id, 'recipient', 'clearance')
        end
    end
    for i, a in ipairs(check_object_list(seed.actors, 'actors')) do
        local h = hash(P .. ':actor:' .. check_id(a.id, 'actors[' .. i .. '].id'))
        if h and h.kind ~= a.kind then
            return clash('actors', i, a.id, 'actor', 'kind')
        end
    end
    for i, g in ipairs(check_object_list(seed.grants, 'grants')) do
        local w = 'grants[' .. i .. ']'
        local key = P .. ':grant:' .. check_id(g.id, w .. '.id')
        local h = hash(key)
        if h then
            local parents = ids_of(g.delegated_from, w .. '.delegated_from')
            local diff
            if (h.root == '1') ~= check_bool(g.root, w .. '.root', #parents == 0) then
                diff = 'root'
            elseif not same_set(decode_list(h.tools),
                                check_id_list(g.tools, w .. '.tools', true)) then
                diff = 'tools'
            elseif not same_set(decode_list(h.recipients),
                                check_id_list(g.recipients, w .. '.recipients', true)) then
                diff = 'recipients'
            elseif not same_set(decode_list(h.resources),
                                check_id_list(g.resources, w .. '.resources', true)) then
                diff = 'resources'
            elseif tonumber(h.valid_from) ~=
                tonumber(check_time(g.valid_from, w .. '.valid_from')) then
                diff = 'valid_from'
            elseif tonumber(h.valid_to) ~= tonumber(check_time(g.valid_to, w .. '.valid_to')) then
                diff = 'valid_to'
            elseif not same_set(members(key .. ':granted_to'),
                                ids_of(g.grantee, w .. '.grantee')) then
                diff = 'grantee'
            elseif not same_set(members(key .. ':issued_by'),
                                ids_of(g.issuer, w .. '.issuer')) then
                diff = 'issuer'
            elseif not same_set(members(key .. ':delegated_from'), parents) then
                diff = 'delegated_from'
            end
            if diff then
                return clash('grants', i, g.id, 'grant', diff)
            end
        end
    end
    return nil
end

--[[ charter_put_workflow
keys: P. args: JSON {version,name,task,steps}, definition (the definition's bytes, UTF-8
  text), seed (charter_seed's argument, derived from the definition by charterd).
  version is the hex SHA-256 of the definition, computed and checked by charterd.
reply: {"created":bool,"workflow":{name,version,task,steps,applied_at}}. When the version is
  stored already nothing is written (created false). Otherwise the seed's nodes are created
  where absent (charter_seed), the definition is stored under P:workflow:<version>, indexed in
  P:workflows (scored by the time of application) and P:workflow_names (name -> this version,
  the latest under the name). Node ids are shared by every workflow of the graph: a node the
  graph holds with other content (a grant's revocation aside) refuses the whole call with
  {"refused":"<part>[<i>].id: ..."}, naming the entry (0-based, the definition's order) and
  what differs, and nothing is written.
errors: invalid; nothing written. ]]
local function charter_put_workflow(keys, args)
    local P = prefix(keys)
    local info = json_arg(args[1], 'workflow')
    local version = info.version
    if not hex64(version) then
        raise('invalid', 'version must be 64 lowercase hex digits')
    end
    local name = check_id(info.name, 'name')
    local task = check_text(info.task, 'task')
    local steps = check_id_list(info.steps, 'steps', true)
    local definition = check_text(args[2], 'definition')
    local seed = json_arg(args[3], 'seed')
    local key = P .. ':workflow:' .. version
    if exists(key) then
        return cjson.encode({created = false, workflow = workflow_info(hash(key))})
    end
    local why = seed_clash(P, seed)
    if why then
        return cjson.encode({refused = why})
    end
    charter_seed(keys, {args[3]}) -- validates everything before its first write
    local ts, tnum = now()
    redis.call('HSET', key, 'version', version, 'name', name, 'task', task, 'steps',
               encode_list(steps), 'definition', definition, 'applied_at', ts)
    redis.call('ZADD', P .. ':workflows', tnum, version)
    redis.call('HSET', P .. ':workflow_names', name, version)
    return cjson.encode({created = true, workflow = workflow_info(hash(key))})
end

--[[ charter_get_workflow
keys: P. args: a version (64 hex digits) or a name (the latest version applied under it).
reply: {"workflow":{name,version,task,steps,applied_at},"definition":"<the bytes>"}.
errors: not_found, invalid. ]]
local function charter_get_workflow(keys, args)
    local P = prefix(keys)
    local ref = args[1]
    local version
    if hex64(ref) and exists(P .. ':workflow:' .. ref) then
        version = ref
    else
        check_id(ref, 'workflow')
        version = redis.call('HGET', P .. ':workflow_names', ref)
    end
    local h = version and hash(P .. ':workflow:' .. version)
    if not h then
        raise('not_found', 'workflow ' .. ref .. ' not found')
    end
    return cjson.encode({workflow = workflow_info(h), definition = h.definition or ''})
end

--[[ charter_list_workflows
keys: P. args: none.
reply: {"workflows":[{name,version,task,steps,applied_at}]}, in the order first applied.
errors: none. ]]
local function charter_list_workflows(keys, args)
    local P = prefix(keys)
    local out = {}
    for _, v in ipairs(redis.call('ZRANGE', P .. ':workflows', 0, -1)) do
        local h = hash(P .. ':workflow:' .. v)
        if h then
            out[#out + 1] = workflow_info(h)
        end
    end
    return cjson.encode({workflows = out})
end

--[[ charter_run_workflow
keys: P. args: run_id.
reply: {"run_id":id,"workflow":"<the version the run follows>","status":"<status>"}.
errors: not_found, invalid. ]]
local function charter_run_workflow(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local f = redis.call('HMGET', P .. ':run:' .. run_id, 'id', 'workflow', 'status')
    if not f[1] then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    return cjson.encode({run_id = run_id, workflow = f[2] or '', status = f[3] or ''})
end

--[[ charter_scope_context
keys: P. args: JSON {context_id,run_id,workflow,parent,tools,recipients,resources}.
  Completes a context just opened, once: its workflow (the version its run follows) and, for a
  narrowed context, its parent (a context of the same run and step) and its effective lists
  tools, recipients and resources (lists of ids, each a subset of the parent's, checked by
  charterd). A context without a workflow is not usable by any gate (fail closed).
reply: {"context":{id,run_id,step,workflow,parent}}.
errors: not_found (context, run or parent), exists (the context is already complete), refused
  (workflow is not the run's; the parent is of another run or step), invalid. ]]
local function charter_scope_context(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'scope')
    local id = check_id(doc.context_id, 'context_id')
    local run_id = check_id(doc.run_id, 'run_id')
    local workflow = doc.workflow
    if not hex64(workflow) then
        raise('invalid', 'workflow must be a version: 64 lowercase hex digits')
    end
    local parent = nil
    if present(doc.parent) and doc.parent ~= '' then
        parent = check_id(doc.parent, 'parent')
    end
    local lists = {}
    for _, k in ipairs({'tools', 'recipients', 'resources'}) do
        if parent then
            lists[k] = check_id_list(doc[k], k, false)
        elseif present(doc[k]) then
            raise('invalid', k .. ' narrow a parent context: give parent too')
        end
    end
    local key = P .. ':context:' .. id
    local h = hash(key)
    if not h or h.run_id ~= run_id then
        raise('not_found', 'context ' .. id .. ' of run ' .. run_id .. ' not found')
    end
    if present(h.workflow) then
        raise('exists', 'context ' .. id .. ' is already complete')
    end
    local follows = redis.call('HGET', P .. ':run:' .. run_id, 'workflow')
    if not follows then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    if follows ~= workflow then
        raise('refused',
              'run ' .. run_id .. ' follows workflow ' .. follows .. ', not ' .. workflow)
    end
    if parent then
        local ph = hash(P .. ':context:' .. parent)
        if not ph then
            raise('not_found', 'parent context ' .. parent .. ' not found')
        end
        if ph.run_id ~= run_id or ph.step ~= h.step then
            raise('refused', 'parent context ' .. parent .. ' is not of run ' .. run_id ..
                      ' and step ' .. (h.step or ''))
        end
        redis.call('HSET', key, 'workflow', workflow, 'parent', parent, 'scope_tools',
                   encode_list(lists.tools), 'scope_recipients', encode_list(lists.recipients),
                   'scope_resources', encode_list(lists.resources))
    else
        redis.call('HSET', key, 'workflow', workflow)
    end
    return cjson.encode({context = {id = id, run_id = run_id, step = h.step or '',
                                    workflow = workflow, parent = parent or ''}})
end

register('charter_put_workflow', charter_put_workflow, false)
register('charter_get_workflow', charter_get_workflow, true)
register('charter_list_workflows', charter_list_workflows, true)
register('charter_run_workflow', charter_run_workflow, true)
register('charter_scope_context', charter_scope_context, false)

-- ---------------------------------------------------------------------------------------------
-- Blobs: large snapshots stored once, by content
-- ---------------------------------------------------------------------------------------------

--[[ charter_blob_exists
keys: P. args: sha (64 lowercase hex digits).
reply: {"exists":bool}: whether P:blob:<sha> is stored. errors: invalid. ]]
local function charter_blob_exists(keys, args)
    local P = prefix(keys)
    local sha = args[1]
    if not hex64(sha) then
        raise('invalid', 'sha must be 64 lowercase hex digits')
    end
    return cjson.encode({exists = exists(P .. ':blob:' .. sha)})
end

--[[ charter_put_blob
keys: P. args: sha, text.
reply: {"stored":bool}: the text is stored under P:blob:<sha> unless a blob is there already
  (SET NX: a blob never changes). The library cannot hash with SHA-256: readers check that the
  text hashes to its name, so a blob stored under the wrong name is detected, never trusted.
errors: invalid. ]]
local function charter_put_blob(keys, args)
    local P = prefix(keys)
    local sha, text = args[1], args[2]
    if not hex64(sha) then
        raise('invalid', 'sha must be 64 lowercase hex digits')
    end
    if type(text) ~= 'string' or text == '' then
        raise('invalid', 'text must be a non-empty string')
    end
    local ok = redis.call('SET', P .. ':blob:' .. sha, text, 'NX')
    return cjson.encode({stored = ok ~= false})
end

--[[ charter_get_blob
keys: P. args: sha. reply: the stored text as it is (not JSON-encoded), or nil.
errors: invalid. ]]
local function charter_get_blob(keys, args)
    local P = prefix(keys)
    local sha = args[1]
    if not hex64(sha) then
        raise('invalid', 'sha must be 64 lowercase hex digits')
    end
    local v = redis.call('GET', P .. ':blob:' .. sha)
    if not v then
        return nil
    end
    return cjson.encode({text = v})
end

register('charter_blob_exists', charter_blob_exists, true)
register('charter_put_blob', charter_put_blob, false)
register('charter_get_blob', charter_get_blob, true)
