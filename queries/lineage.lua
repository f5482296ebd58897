-- queries/lineage.lua - artifacts and their DERIVED_FROM lineage: creating an artifact with its
-- edges and event, reading one, and the ancestry walk the input and delivery gates decide from.

local lineage = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local MAX_LIMIT = library.MAX_LIMIT
local raise, present, check_id = validation.raise, validation.present, validation.check_id
local check_text, check_id_list = validation.check_text, validation.check_id_list
local check_object_list = validation.check_object_list
local check_count, check_bool = validation.check_count, validation.check_bool
local check_label, json_arg = validation.check_label, validation.json_arg
local json_list_arg = validation.json_list_arg
local prefix, hex64 = validation.prefix, validation.hex64
local now, hash, members, exists = graph.now, graph.hash, graph.members, graph.exists
local decode_list, encode_list = graph.decode_list, graph.encode_list
local artifact_object = graph.artifact_object
local check_sealed, head_conflict = events.check_sealed, events.head_conflict
local write_event = events.write_event
local context_table = runs.context_table

-- An artifact's facts as its lineage record holds them (refs aside): f is the HMGET of its nine
-- fields in the walk's order, the edges are read here, a resource's fields through rescache
-- (one read per resource per call). The walk and charter_create_artifact build records with
-- this one function, so the record stored at creation is the one a later walk computes.
local function record_object(P, id, f, rescache)
    local base = P .. ':artifact:' .. id
    local parents = members(base .. ':derived_from')
    local resources = {}
    for _, r in ipairs(members(base .. ':from_resource')) do
        local res = rescache[r]
        if not res then
            local g = redis.call('HMGET', P .. ':resource:' .. r, 'title', 'conf', 'integrity')
            res = {id = r, title = g[1] or nil, conf = tonumber(g[2]), integrity = tonumber(g[3])}
            rescache[r] = res
        end
        resources[#resources + 1] = res
    end
    return {
        id = id, run_id = f[1] or nil, kind = f[2] or nil, title = f[3] or nil,
        conf = tonumber(f[4]), integrity = tonumber(f[5]),
        capture_complete = f[6] == '1', hash = f[7] or nil,
        input_ids = decode_list(f[8] or nil), parents = parents,
        resources = resources, producers = members(base .. ':produced_by'),
        step = f[9] or nil,
    }
end

-- The lineage record of artifact id (key its hash), just created with its edges: its facts as
-- a walk reads them, its refs the records its parents carry (field lineage). Stored once
-- (SET NX, named by its SHA-1) and named in the artifact's field lineage, so a later check
-- compares the graph with it instead of encoding and hashing the walk again. A parent without
-- a record (written before records were kept at creation, or by hand) leaves the artifact
-- without one: its checks walk the whole ancestry as before.
local function keep_record(P, id, key)
    local f = redis.call('HMGET', key, 'run_id', 'kind', 'title', 'conf', 'integrity',
                         'capture_complete', 'hash', 'input_ids', 'step')
    local o = record_object(P, id, f, {})
    local refs = {}
    for m, p in ipairs(o.parents) do
        local sha = redis.call('HGET', P .. ':artifact:' .. p, 'lineage')
        if not sha then
            return
        end
        refs[m] = sha
    end
    o.refs = refs
    local text = cjson.encode(o)
    local sha = redis.sha1hex(text)
    redis.call('SET', P .. ':lineage:' .. sha, text, 'NX')
    redis.call('HSET', key, 'lineage', sha)
    return sha
end

local CONF_NAMES = {[0] = 'public', [1] = 'internal', [2] = 'confidential'}
local INTEGRITY_NAMES = {[0] = 'untrusted', [1] = 'trusted'}
local COUNT_CAP = 1000000000000000

-- The lineage summary of artifact id (README "Lineage summaries"), computed from its own
-- fields and edges and its parents' stored summaries alone: no walk, so its cost does not
-- grow with the depth of the lineage. a holds the fields just written (run_id, kind, conf,
-- integrity, capture_complete, resource or nil, parents sorted, record the SHA-1 of its
-- lineage record or nil). Returns the summary's JSON text and its SHA-1, or nil when a parent
-- has no summary (written before summaries were kept): such an artifact has none either, and
-- its decisions walk its ancestry. A parent whose summary no longer hashes to its
-- summary_hash makes this one not ok. Fields: v, id, run_id, kind, conf and integrity
-- (recomputed: a source's resource's labels, else the max / min of the parents'), sources
-- (sorted [{id,conf,integrity}]: every resource reached, with the labels it had), depth (1
-- for a source, else 1 + the deepest parent's), count (1 + the parents' counts: the
-- artifacts of the ancestry counted once per path, capped at 10^15), ok (every structural rule
-- of the input gate holds for it and its whole ancestry), code and why (the first rule that
-- does not: PROVENANCE_INCOMPLETE or LABEL_MISMATCH, and its witness), parents and refs (the
-- parents' ids and their summary hashes: a Merkle DAG naming the whole ancestry), resource,
-- hash (the content hash it was made for), record.
local function make_summary(P, id, a)
    local s = {v = 1, id = id, run_id = a.run_id, kind = a.kind, parents = a.parents, refs = {},
               resource = a.resource or '', hash = a.hash, record = a.record or '', depth = 1,
               count = 1,
               ok = true, code = '', why = ''}
    local function bad(code, why)
        if s.ok then
            s.ok, s.code, s.why = false, code, why
        end
    end
    local conf, integrity = 0, 1
    local by_source = {}
    if a.kind == 'source' then
        if #a.parents > 0 then
            bad('PROVENANCE_INCOMPLETE', 'source ' .. id .. ' is derived from ' .. #a.parents ..
                ' artifact(s)')
        end
        if not a.resource then
            bad('PROVENANCE_INCOMPLETE', 'source ' .. id .. ' has 0 resources, not 1')
            conf, integrity = -1, -1
        else
            local g = redis.call('HMGET', P .. ':resource:' .. a.resource, 'conf', 'integrity')
            local rc, ri = tonumber(g[1]), tonumber(g[2])
            if not (rc and CONF_NAMES[rc] and ri and INTEGRITY_NAMES[ri]) then
                bad('PROVENANCE_INCOMPLETE', 'resource ' .. a.resource .. ' of ' .. id ..
                    ' has no valid labels')
                conf, integrity = -1, -1
            else
                conf, integrity = rc, ri
                by_source[a.resource] = {id = a.resource, conf = rc, integrity = ri}
            end
        end
    else
        if #a.parents == 0 then
            bad('PROVENANCE_INCOMPLETE', 'derived ' .. id .. ' has no parents')
        end
        if not a.capture_complete then
            bad('PROVENANCE_INCOMPLETE', id .. ' capture incomplete')
        end
        local depth, count = 0, 1
        for m, p in ipairs(a.parents) do
            local g = redis.call('HMGET', P .. ':artifact:' .. p, 'summary', 'summary_hash')
            if not g[1] or not g[2] then
                return nil
            end
            s.refs[m] = g[2]
            local decoded, ps = pcall(cjson.decode, g[1])
            if redis.sha1hex(g[1]) ~= g[2] or not decoded or type(ps) ~= 'table' then
                bad('PROVENANCE_INCOMPLETE', 'the summary of ' .. p ..
                    ' no longer hashes to its summary_hash')
                conf, integrity = -1, -1
            else
                if ps.run_id ~= a.run_id then
                    bad('PROVENANCE_INCOMPLETE', p .. ' is of run ' .. tostring(ps.run_id) ..
                        ', not ' .. a.run_id)
                end
                if not ps.ok then
                    bad(ps.code, ps.why)
                end
                local pc, pi = tonumber(ps.conf) or -1, tonumber(ps.integrity) or -1
                if pc < 0 or pi < 0 or conf < 0 then
                    conf, integrity = -1, -1
                else
                    conf = math.max(conf, pc)
                    integrity = math.min(integrity, pi)
                end
                depth = math.max(depth, tonumber(ps.depth) or 0)
                count = math.min(COUNT_CAP, count + (tonumber(ps.count) or 0))
                if type(ps.sources) == 'table' then
                    for _, r in ipairs(ps.sources) do
                        by_source[r.id] = by_source[r.id] or r
                    end
                end
            end
        end
        s.depth, s.count = depth + 1, count
    end
    -- RULE-INPUT-LABELS at creation: the stored labels must be the recomputed ones.
    if conf >= 0 and (a.conf ~= conf or a.integrity ~= integrity) then
        bad('LABEL_MISMATCH', id .. ' labelled ' .. CONF_NAMES[a.conf] .. ', ' ..
            INTEGRITY_NAMES[a.integrity] .. '; recomputed ' .. CONF_NAMES[conf] .. ', ' ..
            INTEGRITY_NAMES[integrity])
    end
    s.conf, s.integrity = conf, integrity
    local ids = {}
    for r in pairs(by_source) do
        ids[#ids + 1] = r
    end
    table.sort(ids)
    s.sources = {}
    for i, r in ipairs(ids) do
        s.sources[i] = by_source[r]
    end
    local text = cjson.encode(s)
    return text, redis.sha1hex(text)
end

--[[ charter_create_artifact
call: create_artifact(artifact, verified, event)
keys: P. args: JSON {run_id,context_id,kind,title,conf,integrity,hash,content,input_ids,resource,
  capture_complete}, JSON verified [{id,summary_hash}], sealed event (any kind, e.g.
  source_read, output_recorded). kind is "source" or "derived"; conf 0..2 and integrity 0..1
  are the labels the caller computed; hash is the hex SHA-256 of content; resource (a source's
  registered origin) may be absent for a source and must be absent for a derived artifact.
  verified names each input once with the summary_hash of the lineage summary the caller
  verified and decided with ([] for a source): the new summary is made from those summaries
  only.
reply: {"artifact":{...with parents, resources, producers},"seq":n,"summary_hash":h}: the
  artifact a<n>, its DERIVED_FROM edges (to input_ids, duplicates once), FROM_RESOURCE,
  PRODUCED/produced_by, the run's artifact index, its lineage summary (fields summary and
  summary_hash, computed from its parents' summaries alone; h "" when a parent has none) and
  the event, in one call; or the conflict reply.
errors: not_found (run, context, an input, the resource), invalid (arguments; the context is of
  another run; verified does not name exactly the inputs), refused (an input's stored
  summary_hash is no longer the verified one: its summary was swapped after it was verified),
  nothing written. ]]
-- The inputs' summaries must be the ones the caller verified (text: the verified argument,
-- [{id,summary_hash}], each input named once): the caller checked their hashes and seals, and
-- this call reads them again, so a summary swapped in between would be folded into the new
-- summary, which charterd then seals. Raises invalid or refused; reads only.
local function check_verified_parents(P, inputs, text)
    local list = check_object_list(json_list_arg(text, 'verified'), 'verified')
    local want, named = {}, {}
    for i, v in ipairs(list) do
        local id = check_id(v.id, 'verified[' .. i .. '].id')
        if type(v.summary_hash) ~= 'string' or (want[id] and want[id] ~= v.summary_hash) then
            raise('invalid', 'verified[' .. i .. '] must name ' .. id .. ' with one summary_hash')
        end
        want[id] = v.summary_hash
    end
    for _, p in ipairs(inputs) do
        if want[p] == nil then
            raise('invalid', 'verified names no summary_hash for input ' .. p)
        end
        named[p] = true
        local have = redis.call('HGET', P .. ':artifact:' .. p, 'summary_hash')
        if have ~= want[p] then
            raise('refused', 'the lineage summary of ' .. p .. ' is no longer the one verified (' ..
                  want[p] .. '): nothing was written')
        end
    end
    for id in pairs(want) do
        if not named[id] then
            raise('invalid', 'verified names ' .. id .. ', which is not an input')
        end
    end
end

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
    local ev = check_sealed(args[3], 'event', nil)

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
    check_verified_parents(P, inputs, args[2])
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
    local record = keep_record(P, id, key)
    local parents = members(key .. ':derived_from')
    local summary, summary_hash = make_summary(P, id, {
        run_id = run_id, kind = kind, conf = conf, integrity = integrity, capture_complete = capture,
        resource = resource, hash = hex, parents = parents, record = record})
    if summary then
        redis.call('HSET', key, 'summary', summary, 'summary_hash', summary_hash)
    end
    local seq = write_event(P, run_id, ev)
    return cjson.encode({artifact = artifact_object(P, id, hash(key), true), seq = seq,
                         summary_hash = summary_hash or ''})
end

--[[ charter_lineage_summary
call: lineage_summary(artifact_id)
keys: P. args: artifact_id.
reply: {"id":id,"summary":text,"summary_hash":h,"artifact":{run_id,kind,conf,integrity,hash,
  title},"summary_seal":mac (absent when not sealed),
  "parents":[...],"resources":[...],"producers":[...],"sources":[{id,conf,integrity}]}: the
  artifact's lineage
  summary as stored at creation (its text byte for byte and its stored SHA-1: the caller checks
  one against the other), its own fields and edges as they stand now (parents: DERIVED_FROM,
  resources: FROM_RESOURCE, producers: produced_by, sorted), and the current labels of every source resource the
  summary names (a label not stored, or a resource that is gone, is absent), with its
  quarantine when it is quarantined (quarantined_at: the time, quarantined: the reason;
  both absent otherwise: charter_quarantine_resource). Only the artifact
  itself and its sources are read: the cost does not grow with the lineage's depth. Without a
  stored summary (an artifact created before summaries were kept) the reply is {"id":id}
  alone, and a summary that is not JSON gives no sources.
errors: not_found (artifact), invalid. ]]
-- The charter_lineage_summary reply of artifact id as a table (shared with
-- charter_delivery_facts); nil when it has no summary. Raises not_found.
local function summary_object(P, id)
    local base = P .. ':artifact:' .. id
    local f = redis.call('HMGET', base, 'run_id', 'kind', 'conf', 'integrity', 'hash', 'summary',
                         'summary_hash', 'title', 'summary_seal')
    if not (f[1] or f[2] or f[5]) and not exists(base) then
        raise('not_found', 'artifact ' .. id .. ' not found')
    end
    if not f[6] or not f[7] then
        return nil
    end
    local sources = {}
    local decoded, s = pcall(cjson.decode, f[6])
    if decoded and type(s) == 'table' and type(s.sources) == 'table' then
        for i, r in ipairs(s.sources) do
            if type(r) == 'table' and type(r.id) == 'string' then
                local g = redis.call('HMGET', P .. ':resource:' .. r.id, 'conf', 'integrity',
                                     'quarantined_at', 'quarantine_reason')
                sources[i] = {id = r.id, conf = tonumber(g[1]), integrity = tonumber(g[2]),
                              quarantined_at = g[3] or nil,
                              quarantined = g[3] and (g[4] or '') or nil}
            end
        end
    end
    return {
        id = id, summary = f[6], summary_hash = f[7], summary_seal = f[9] or nil,
        artifact = {run_id = f[1] or nil, kind = f[2] or nil, conf = tonumber(f[3]),
                    integrity = tonumber(f[4]), hash = f[5] or nil, title = f[8] or nil},
        parents = members(base .. ':derived_from'), resources = members(base .. ':from_resource'),
        producers = members(base .. ':produced_by'), sources = sources}
end

local function charter_lineage_summary(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'artifact_id')
    return cjson.encode(summary_object(P, id) or {id = id})
end

--[[ charter_input_facts
call: input_facts(json request)
keys: P. args: JSON {context_id, artifact_ids:[1..1000 ids]}.
reply: {"context":{...},"summaries":[{...},...]}: every fact the input gate reads, at one
  instant and in one call whatever the depth of the lineages: the context as
  charter_context_owner replies it, and per artifact id (in the order given) its summary as
  charter_lineage_summary replies it ({"id":id} alone when it has none, {"id":id,
  "missing":true} when there is no such artifact: the caller checks the context first).
errors: not_found (the context), invalid. ]]
local function charter_input_facts(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'request')
    local context_id = check_id(doc.context_id, 'context_id')
    local ids = check_id_list(doc.artifact_ids, 'artifact_ids', false)
    if #ids < 1 or #ids > 1000 then
        raise('invalid', 'artifact_ids must hold 1 to 1000 ids')
    end
    local context = context_table(P, context_id)
    local summaries = {}
    for i, id in ipairs(ids) do
        local read, o = pcall(summary_object, P, id)
        if read then
            summaries[i] = o or {id = id}
        elseif type(o) == 'table' and o.charter_err == 'not_found' then
            summaries[i] = {id = id, missing = true}
        else
            error(o)
        end
    end
    return cjson.encode({context = context, summaries = summaries})
end

--[[ charter_audit_summaries
call: audit_summaries(run_id, with_seals)
keys: P. args: run_id, with_seals ("1": the reply lists every checked artifact's seal; "0").
reply: {"checked":n} or, at the first artifact whose stored lineage summary is not the one
  re-derived from the raw graph, also "first_bad":id and "problem":text; with with_seals "1"
  also "seals":[[id,summary_hash,seal or ""],...] of the artifacts checked before first_bad,
  in the same order (charterd verifies them: the integrity key never reaches Redis). The run's
  artifacts are visited in creation order (P:run:<id>:artifacts), so every parent of the run
  is checked before its children: each must have a summary (an artifact without one, deleted
  or written before summaries were kept, decides UNKNOWN and is named), it must hash to its
  summary_hash, and the summary re-derived from the artifact's own fields, its DERIVED_FROM
  and FROM_RESOURCE edges, its lineage record recomputed from the graph (as keep_record
  computes it) and its parents' summaries (already checked) must equal the stored one field
  by field. Reads only.
errors: not_found (run), invalid. ]]
local function same_summary(a, b)
    local function flat(v)
        if type(v) ~= 'table' then
            return tostring(v)
        end
        local parts = {}
        for i, x in ipairs(v) do
            parts[i] = type(x) == 'table' and
                           (tostring(x.id) .. ':' .. tostring(x.conf) .. ':' .. tostring(x.integrity))
                           or tostring(x)
        end
        return table.concat(parts, ',')
    end
    for _, k in ipairs({'run_id', 'kind', 'resource', 'hash', 'record', 'parents', 'refs', 'conf',
                        'integrity', 'sources', 'depth', 'count', 'ok', 'code', 'why'}) do
        -- A summary kept before it named its content hash is compared without it.
        if not (k == 'hash' and b.hash == nil) and flat(a[k]) ~= flat(b[k]) then
            return k
        end
    end
    return nil
end

-- The summary re-derived from the raw graph for artifact id (key its hash, f its fields run_id,
-- kind, conf, integrity, capture_complete): its lineage record recomputed as keep_record
-- computes it (without storing it), then make_summary over its own edges and its parents'
-- stored summaries. Returns the summary's JSON text, or nil and the problem.
local function rederive_summary(P, id, key, f)
    local resources = members(key .. ':from_resource')
    if #resources > 1 or (f[2] ~= 'source' and #resources > 0) then
        return nil, 'its FROM_RESOURCE edges are not the ones its summary names'
    end
    local rf = redis.call('HMGET', key, 'run_id', 'kind', 'title', 'conf', 'integrity',
                          'capture_complete', 'hash', 'input_ids', 'step')
    local o = record_object(P, id, rf, {})
    local refs, record = {}, ''
    for m, p in ipairs(o.parents) do
        refs[m] = redis.call('HGET', P .. ':artifact:' .. p, 'lineage')
        if not refs[m] then
            refs = nil
            break
        end
    end
    if refs then
        o.refs = refs
        record = redis.sha1hex(cjson.encode(o))
    end
    local text = make_summary(P, id, {
        run_id = f[1] or '', kind = f[2] or '', conf = tonumber(f[3]),
        integrity = tonumber(f[4]), capture_complete = f[5] == '1',
        resource = resources[1], hash = rf[7], parents = o.parents, record = record})
    if not text then
        return nil, 'a parent has no summary to re-derive it from'
    end
    return text
end

local function charter_audit_summaries(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    local with_seals = check_bool(args[2], 'with_seals', false)
    if not exists(P .. ':run:' .. run_id) then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    local checked, seals = 0, {}
    local function reply(id, problem)
        return cjson.encode({checked = checked, first_bad = id, problem = problem,
                             seals = with_seals and seals or nil})
    end
    for _, id in ipairs(redis.call('ZRANGE', P .. ':run:' .. run_id .. ':artifacts', 0, -1)) do
        local key = P .. ':artifact:' .. id
        local f = redis.call('HMGET', key, 'run_id', 'kind', 'conf', 'integrity',
                             'capture_complete', 'summary', 'summary_hash', 'summary_seal')
        checked = checked + 1
        if not f[6] and not f[7] then
            return reply(id, 'it has no lineage summary (deleted, or written before summaries ' ..
                             'were kept): decisions on it are UNKNOWN')
        end
        if not f[6] or not f[7] or redis.sha1hex(f[6]) ~= f[7] then
            return reply(id, 'its stored summary no longer hashes to its summary_hash')
        end
        local decoded, stored = pcall(cjson.decode, f[6])
        if not decoded or type(stored) ~= 'table' then
            return reply(id, 'its stored summary is not a summary')
        end
        local text, problem = rederive_summary(P, id, key, f)
        if not text then
            return reply(id, problem)
        end
        local field = same_summary(cjson.decode(text), stored)
        if field then
            return reply(id, 'its stored summary differs from the one re-derived from the ' ..
                             'graph in ' .. field)
        end
        seals[#seals + 1] = {id, f[7], f[8] or ''}
    end
    return reply(nil, nil)
end

--[[ charter_seal_summary
call: seal_summary(artifact_id, summary_hash, seal)
keys: P. args: artifact_id, summary_hash (40 hex digits), seal (64 hex digits: charterd's
  HMAC of the summary under its integrity key; the key never reaches Redis).
reply: {"sealed":true} when the seal was stored, or was stored already with the same value;
  {"sealed":false} when the artifact's summary_hash is not summary_hash, or another seal is
  stored (nothing written). Stores field summary_seal of the artifact once.
errors: not_found (artifact), invalid. ]]
local function charter_seal_summary(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'artifact_id')
    local sh, seal = args[2], args[3]
    if type(sh) ~= 'string' or #sh ~= 40 or sh:find('[^0-9a-f]') then
        raise('invalid', 'summary_hash must be 40 lowercase hex digits')
    end
    if not hex64(seal) then
        raise('invalid', 'seal must be 64 lowercase hex digits')
    end
    local key = P .. ':artifact:' .. id
    local f = redis.call('HMGET', key, 'summary_hash', 'summary_seal')
    if not f[1] and not exists(key) then
        raise('not_found', 'artifact ' .. id .. ' not found')
    end
    if f[1] ~= sh then
        return cjson.encode({sealed = false})
    end
    if f[2] then
        return cjson.encode({sealed = f[2] == seal})
    end
    redis.call('HSET', key, 'summary_seal', seal)
    return cjson.encode({sealed = true})
end

--[[ charter_get_artifact
call: get_artifact(artifact_id)
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
call: ancestry(payload_id, limit)
keys: P. args: payload_id, limit (integer 1..100000).
reply: {"root":id,"truncated":bool,"lineage":"<sha1>","new":{"<sha1>":"<record>",...},
  "artifacts":[{id,run_id,kind,title,conf,integrity,capture_complete,hash,input_ids,parents,
  refs,resources:[{id,title,conf,integrity}],producers,step}]}:
  breadth-first over derived_from from the payload (first), each artifact once. A label that is
  not stored is absent; a parent whose hash is missing stays under parents with no entry; a
  resource whose hash is missing is {id} alone. After limit artifacts the walk stops and
  truncated is true if any further artifact was reachable. Content is not included.
  Each artifact's object is its lineage record: refs holds, per parent, the SHA-1 of the
  parent's record, or "" when the parent is not in the walk or closes a cycle. lineage is the
  SHA-1 of the payload's record, which so names every fact of the walk; new holds the records
  not stored yet under P:lineage:<sha1> (charter_put_lineage stores them).
errors: not_found (payload), invalid. ]]
-- The lineage records of a walk (out, in walk order, out[1] the root), hashed bottom-up: a
-- depth-first walk from the root over the parents in the walk finishes every parent before
-- its child, so a record names its parents' records by their SHA-1 (a parent still on the
-- walk's path closes a cycle and is named by its id alone, under parents). The reply is put
-- together from the records' own texts: each artifact is encoded once, as it is hashed.
-- Only the records not stored yet are returned under new: a stored record's parents are
-- stored too (charter_put_lineage stores a walk's new records together), so the search for
-- them stops at the first stored one, and a lineage checked again costs one EXISTS.
local function lineage_text(P, root, truncated, out)
    local index = {}
    for i, o in ipairs(out) do
        index[o.id] = i
    end
    local texts, sha, state, next_parent = {}, {}, {[1] = 1}, {[1] = 1}
    local stack = {1}
    while #stack > 0 do
        local i = stack[#stack]
        local parents = out[i].parents
        local k, pushed = next_parent[i], false
        while k <= #parents do
            local j = index[parents[k]]
            k = k + 1
            if j and not state[j] then
                next_parent[i] = k
                state[j], next_parent[j] = 1, 1
                stack[#stack + 1] = j
                pushed = true
                break
            end
        end
        if not pushed then
            local o = out[i]
            local refs = {}
            for m, p in ipairs(o.parents) do
                local j = index[p]
                refs[m] = (j and state[j] == 2) and sha[j] or ''
            end
            o.refs = refs
            texts[i] = cjson.encode(o)
            sha[i] = redis.sha1hex(texts[i])
            state[i] = 2
            stack[#stack] = nil
        end
    end
    local new, seen, todo = {}, {[1] = true}, {1}
    while #todo > 0 do
        local i = todo[#todo]
        todo[#todo] = nil
        if redis.call('EXISTS', P .. ':lineage:' .. sha[i]) == 0 then
            new[sha[i]] = texts[i]
            for m, p in ipairs(out[i].parents) do
                local j = index[p]
                if j and out[i].refs[m] ~= '' and not seen[j] then
                    seen[j] = true
                    todo[#todo + 1] = j
                end
            end
        end
    end
    return '{"root":' .. cjson.encode(root) .. ',"truncated":' .. tostring(truncated) ..
               ',"lineage":"' .. sha[1] .. '","new":' .. cjson.encode(new) .. ',"artifacts":[' ..
               table.concat(texts, ',') .. ']}'
end

-- The ancestry reply of charter_ancestry as JSON text (shared with charter_delivery_facts).
local function ancestry_text(P, root, limit)
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
            local o = record_object(P, id, f, rescache)
            for _, p in ipairs(o.parents) do
                if not seen[p] then
                    seen[p] = true
                    queue[#queue + 1] = p
                end
            end
            out[#out + 1] = o
        end
    end
    return lineage_text(P, root, truncated, out)
end

local function charter_ancestry(keys, args)
    local P = prefix(keys)
    local root = check_id(args[1], 'payload_id')
    local limit = check_count(args[2], 'limit', 1, MAX_LIMIT)
    return ancestry_text(P, root, limit)
end

--[[ charter_lineage_state
call: lineage_state(payload_id, limit) -> list
keys: P. args: payload_id, limit (integer 1..100000).
reply: when the payload carries a lineage record (field lineage, stored at creation) and that
  record is stored, the graph as it stands: ["state", n, text], text being n strings joined
  by NUL bytes: per artifact, breadth-first from the payload over derived_from (each once),
  id, run_id, kind, title, conf, integrity, capture_complete, hash, input_ids, step, lineage,
  the count of parents and the parents (sorted), the count of resources and per resource id,
  title, conf, integrity (a derived artifact's resources are checked to be none with one
  EXISTS over many), the count of producers and the producers (sorted). Nothing is
  encoded or hashed (one text, not an array of strings: converting thousands of strings into
  a reply costs more than the walk's reads): the caller compares each artifact with the
  record its field lineage names. Otherwise (an artifact of the walk that is missing, has no
  record or lacks one of those fields, a resource that lacks one, a derived artifact with a
  FROM_RESOURCE set, or a walk that would pass limit artifacts): the charter_ancestry reply (a JSON text), from the same instant.
errors: not_found (payload), invalid. ]]
local function charter_lineage_state(keys, args)
    local P = prefix(keys)
    local root = check_id(args[1], 'payload_id')
    local limit = check_count(args[2], 'limit', 1, MAX_LIMIT)
    local top = redis.call('HGET', P .. ':artifact:' .. root, 'lineage')
    if not top or redis.call('EXISTS', P .. ':lineage:' .. top) == 0 then
        return ancestry_text(P, root, limit)
    end
    local out, n, none = {}, 0, {}
    local seen, queue, head = {[root] = true}, {root}, 1
    local rescache = {}
    while head <= #queue do
        if head > limit then
            return ancestry_text(P, root, limit)
        end
        local id = queue[head]
        head = head + 1
        local base = P .. ':artifact:' .. id
        local f = redis.call('HMGET', base, 'run_id', 'kind', 'title', 'conf', 'integrity',
                             'capture_complete', 'hash', 'input_ids', 'step', 'lineage')
        out[n + 1] = id
        for i = 1, 10 do
            if not f[i] then
                return ancestry_text(P, root, limit)
            end
            out[n + 1 + i] = f[i]
        end
        n = n + 11
        local parents = members(base .. ':derived_from')
        out[n + 1] = #parents
        n = n + 1
        for _, p in ipairs(parents) do
            n = n + 1
            out[n] = p
            if not seen[p] then
                seen[p] = true
                queue[#queue + 1] = p
            end
        end
        -- A derived artifact has no FROM_RESOURCE edge: its sets are checked to be absent
        -- together below, one EXISTS per 512 artifacts instead of one SMEMBERS each.
        local resources = {}
        if f[2] == 'derived' then
            none[#none + 1] = base .. ':from_resource'
        else
            resources = members(base .. ':from_resource')
        end
        n = n + 1
        out[n] = #resources
        for _, r in ipairs(resources) do
            local g = rescache[r]
            if not g then
                g = redis.call('HMGET', P .. ':resource:' .. r, 'title', 'conf', 'integrity')
                if not (g[1] and g[2] and g[3]) then
                    return ancestry_text(P, root, limit)
                end
                rescache[r] = g
            end
            out[n + 1], out[n + 2], out[n + 3], out[n + 4] = r, g[1], g[2], g[3]
            n = n + 4
        end
        local producers = members(base .. ':produced_by')
        n = n + 1
        out[n] = #producers
        for _, c in ipairs(producers) do
            n = n + 1
            out[n] = c
        end
    end
    for i = 1, #none, 512 do
        if redis.call('EXISTS', unpack(none, i, math.min(i + 511, #none))) > 0 then
            return ancestry_text(P, root, limit)
        end
    end
    return {'state', tostring(n), table.concat(out, '\0')}
end

-- Exported: what later files and the registry use.
lineage.charter_create_artifact = charter_create_artifact
lineage.charter_get_artifact = charter_get_artifact
lineage.charter_lineage_summary = charter_lineage_summary
lineage.charter_input_facts = charter_input_facts
lineage.summary_object = summary_object
lineage.charter_audit_summaries = charter_audit_summaries
lineage.charter_seal_summary = charter_seal_summary
lineage.ancestry_text = ancestry_text
lineage.charter_ancestry = charter_ancestry
lineage.charter_lineage_state = charter_lineage_state
end
