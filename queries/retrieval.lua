-- queries/retrieval.lua - scoped retrieval: the search index of a graph, its scopes, searches
-- and checkpoints. It takes the validation and graph helpers it uses from their modules at the
-- head of its block; registry.lua registers its functions.
--
-- Every graph has its own RediSearch index, P:retrieval:index (RediSearch 1.x keeps its own keys
-- under that name, so they share the graph's hash tag), over the chunk documents P:chunk:<id>. A
-- scope is an immutable node (P:scope:<id>) whose filters the engine applies to every search;
-- only its use counter (P:scope:<id>:usage) changes. Query text reaches the engine only as words
-- of [a-z0-9] joined by this file, so no query syntax a caller writes can change the filters;
-- the hits are checked against the filters once more here, byte for byte, before they are
-- returned.

local retrieval = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local raise, present, check_id = validation.raise, validation.present, validation.check_id
local check_text, check_id_list = validation.check_text, validation.check_id_list
local check_object_list, check_count = validation.check_object_list, validation.check_count
local check_bool, json_arg, prefix = validation.check_bool, validation.json_arg, validation.prefix
local now, hash, members, exists = graph.now, graph.hash, graph.members, graph.exists
local encode_list, contains = graph.encode_list, graph.contains

local RETRIEVAL_FIELDS = {tenant = true, resource_id = true, visibility = true}
local RETRIEVAL_MAX_WORDS = 32
local RETRIEVAL_MAX_RESULTS = 100
local RETRIEVAL_DEFAULT_FOLLOW_UPS = 5

local function retrieval_index(P)
    return P .. ':retrieval:index'
end

-- True when the graph's index exists (FT.INFO answers).
local function retrieval_index_exists(P)
    local r = redis.pcall('FT.INFO', retrieval_index(P))
    return type(r) == 'table' and r.err == nil
end

-- {field: {values}} from a decoded JSON object; an empty list ({} or []) stays empty: deny-all.
local function retrieval_filters(v, what)
    if not present(v) then
        return {}
    end
    if type(v) ~= 'table' then
        raise('invalid', what .. ' must be an object {field: [values]}')
    end
    local out = {}
    for k, vals in pairs(v) do
        if type(k) ~= 'string' or not RETRIEVAL_FIELDS[k] then
            raise('invalid', what .. ': "' .. tostring(k) ..
                  '" is not a filter field (tenant, resource_id, visibility)')
        end
        out[k] = check_id_list(vals, what .. '.' .. k, false)
    end
    return out
end

local function retrieval_has_filters(f)
    return next(f) ~= nil
end

-- A JSON object text of filters with every list an array, [] included.
local function retrieval_encode_filters(f)
    local parts = {}
    local keys = {}
    for k in pairs(f) do
        keys[#keys + 1] = k
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
        parts[#parts + 1] = cjson.encode(k) .. ':' .. encode_list(f[k])
    end
    return '{' .. table.concat(parts, ',') .. '}'
end

local function retrieval_scope_object(P, id, h)
    local used = tonumber(redis.call('HGET', P .. ':scope:' .. id .. ':usage', 'follow_ups')) or 0
    return {
        id = id, context_id = h.context_id or '', run_id = h.run_id or '',
        principal = h.principal or '', task = h.task or '', filters = h.filters or '{}',
        unrestricted = h.unrestricted == '1', expires_at = h.expires_at or '',
        max_follow_ups = tonumber(h.max_follow_ups) or 0, follow_ups_used = used,
        parent = h.parent or '', resumed_from = h.resumed_from or '', created_at = h.created_at or '',
    }
end

local function retrieval_load_scope(P, id)
    local h = hash(P .. ':scope:' .. check_id(id, 'scope_id'))
    if not h then
        raise('not_found', 'scope ' .. id .. ' not found')
    end
    return h
end

--[[ charter_retrieval_ingest
call: retrieval_ingest(json ingest)
keys: P. args: JSON {chunks:[{chunk_id,resource_id,tenant,visibility,revision,text}]}: each
  chunk a piece of a registered resource (its labels come from the resource), indexed for BM25
  under P:chunk:<chunk_id>; an existing chunk id is replaced (a new revision). The index is
  created on first use.
reply: {"indexed":n}. errors: invalid, not_found (a resource), nothing written. ]]
local function charter_retrieval_ingest(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'ingest')
    local chunks = check_object_list(doc.chunks, 'chunks')
    if #chunks == 0 or #chunks > 10000 then
        raise('invalid', 'chunks must hold 1..10000 chunks')
    end
    local rows = {}
    for i, c in ipairs(chunks) do
        local w = 'chunks[' .. i .. ']'
        local row = {
            chunk_id = check_id(c.chunk_id, w .. '.chunk_id'),
            resource_id = check_id(c.resource_id, w .. '.resource_id'),
            tenant = check_id(c.tenant, w .. '.tenant'),
            visibility = check_id(c.visibility, w .. '.visibility'),
            revision = check_count(c.revision or 0, w .. '.revision', 0, 2 ^ 50),
            text = check_text(c.text, w .. '.text'),
        }
        if not exists(P .. ':resource:' .. row.resource_id) then
            raise('not_found', 'resource ' .. row.resource_id .. ' not found')
        end
        rows[i] = row
    end
    local idx = retrieval_index(P)
    if not retrieval_index_exists(P) then
        redis.call('FT.CREATE', idx, 'SCHEMA', 'text', 'TEXT', 'tenant', 'TAG', 'resource_id',
                   'TAG', 'visibility', 'TAG', 'revision', 'NUMERIC', 'chunk_id', 'TAG')
    end
    for _, r in ipairs(rows) do
        redis.call('FT.ADD', idx, P .. ':chunk:' .. r.chunk_id, 1.0, 'REPLACE', 'FIELDS', 'text',
                   r.text, 'tenant', r.tenant, 'resource_id', r.resource_id, 'visibility',
                   r.visibility, 'revision', r.revision, 'chunk_id', r.chunk_id)
    end
    return cjson.encode({indexed = #rows})
end

--[[ charter_retrieval_bind_scope
call: retrieval_bind_scope(json scope)
keys: P. args: JSON {context_id,principal,task,filters:{field:[ids]},unrestricted,expires_in_ms,
  max_follow_ups,parent,resumed_from}. charterd has already checked that the scope lies within
  the context's step and grant chain and, for a child (parent set), within the parent (scope.c);
  this function stores it. A child keeps its parent's context, principal and task and never
  outlives it. No filters is refused unless unrestricted; unrestricted with filters is refused.
  expires_in_ms 0 means no expiry of its own; max_follow_ups 0 means the default (5).
reply: {"scope":{id,context_id,run_id,principal,task,filters,unrestricted,expires_at,
  max_follow_ups,follow_ups_used,parent,resumed_from,created_at}} (filters a JSON text).
errors: invalid, not_found (context, parent). ]]
local function charter_retrieval_bind_scope(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'scope')
    local filters = retrieval_filters(doc.filters, 'filters')
    local unrestricted = check_bool(doc.unrestricted, 'unrestricted', false)
    if not retrieval_has_filters(filters) and not unrestricted then
        raise('invalid', 'a scope without filters must say unrestricted')
    end
    if retrieval_has_filters(filters) and unrestricted then
        raise('invalid', 'an unrestricted scope has no filters')
    end
    local ttl = check_count(doc.expires_in_ms or 0, 'expires_in_ms', 0, 2 ^ 40)
    local budget = check_count(doc.max_follow_ups or 0, 'max_follow_ups', 0, 1000)
    if budget == 0 then
        budget = RETRIEVAL_DEFAULT_FOLLOW_UPS
    end
    local ts, tnum = now()
    local expires = ''
    if ttl > 0 then
        local e = tnum + ttl / 1000
        expires = string.format('%d.%06d', math.floor(e), math.floor((e % 1) * 1e6))
    end
    local context_id, principal, task, parent = nil, nil, nil, ''
    if present(doc.parent) and doc.parent ~= '' then
        parent = check_id(doc.parent, 'parent')
        local ph = retrieval_load_scope(P, parent)
        context_id, principal, task = ph.context_id, ph.principal, ph.task
        if ph.expires_at and ph.expires_at ~= '' and
            (expires == '' or tonumber(expires) > tonumber(ph.expires_at)) then
            expires = ph.expires_at
        end
        budget = math.min(budget, tonumber(ph.max_follow_ups) or budget)
    else
        context_id = check_id(doc.context_id, 'context_id')
        principal = check_id(doc.principal, 'principal')
        task = check_text(doc.task, 'task', '')
    end
    local ctx = hash(P .. ':context:' .. context_id)
    if not ctx then
        raise('not_found', 'context ' .. context_id .. ' not found')
    end
    local resumed = ''
    if present(doc.resumed_from) and doc.resumed_from ~= '' then
        resumed = check_id(doc.resumed_from, 'resumed_from')
    end
    local id = 's' .. redis.call('HINCRBY', P .. ':counter', 'scope', 1)
    local key = P .. ':scope:' .. id
    redis.call('HSET', key, 'id', id, 'context_id', context_id, 'run_id', ctx.run_id or '',
               'principal', principal, 'task', task, 'filters', retrieval_encode_filters(filters),
               'unrestricted', unrestricted and '1' or '0', 'expires_at', expires,
               'max_follow_ups', budget, 'parent', parent, 'resumed_from', resumed,
               'created_at', ts)
    return cjson.encode({scope = retrieval_scope_object(P, id, hash(key))})
end

--[[ charter_retrieval_get_scope
call: retrieval_get_scope(scope_id)
keys: P. args: scope_id. reply: {"scope":{...}} as bind_scope. errors: not_found, invalid. ]]
local function charter_retrieval_get_scope(keys, args)
    local P = prefix(keys)
    local h = retrieval_load_scope(P, args[1])
    return cjson.encode({scope = retrieval_scope_object(P, h.id, h)})
end

-- The search chain from search id up to its root: [{search_id, scope_id}, ...].
local function retrieval_lineage(P, id)
    local out = {}
    local seen = {}
    while id and id ~= '' and not seen[id] and #out < 1000 do
        seen[id] = true
        local h = hash(P .. ':search:' .. id)
        if not h then
            break
        end
        out[#out + 1] = {search_id = id, scope_id = h.scope_id or '', parent = h.parent or ''}
        id = h.parent
    end
    return out
end

-- The engine query for words within filters: (w1|w2|...) @field:{v1|v2} ..., every tag value
-- escaped. words are [a-z0-9] only, checked here again.
local function retrieval_engine_query(words, filters)
    for i, w in ipairs(words) do
        if type(w) ~= 'string' or w == '' or #w > 64 or w:find('[^a-z0-9]') then
            raise('invalid', 'words[' .. i .. '] must be 1..64 of [a-z0-9]')
        end
    end
    local q = {'(' .. table.concat(words, '|') .. ')'}
    local fields = {}
    for k in pairs(filters) do
        fields[#fields + 1] = k
    end
    table.sort(fields)
    for _, k in ipairs(fields) do
        local vals = {}
        for i, v in ipairs(filters[k]) do
            vals[i] = v:gsub('[^%w]', '\\%0')
        end
        q[#q + 1] = '@' .. k .. ':{' .. table.concat(vals, '|') .. '}'
    end
    return table.concat(q, ' ')
end

--[[ charter_retrieval_search
call: retrieval_search(json search)
keys: P. args: JSON {scope_id,words:[a-z0-9 words],query,limit,parent,resources:[the step's
  resources, from charterd]}. Checks, on the database's clock just before the search, that the
  scope has not expired (refused "SCOPE_EXPIRED: ...") and, for a follow-up (parent set: a search
  of the same scope), that the scope's follow-up budget is not spent (refused
  "FOLLOW_UP_BUDGET_EXHAUSTED: ..."; a follow-up is counted). The engine filters are the scope's,
  with resource_id cut to the step's resources; an empty list anywhere is deny-all (no search).
  The hits are checked against the filters again. The search is recorded (P:search:<id>).
reply: {"search":{id,scope_id,parent},"results":[{chunk_id,resource_id,tenant,visibility,
  revision,text,score,title,conf,integrity}],"lineage":[{search_id,scope_id,parent}],
  "denied_all":bool}. errors: invalid, not_found (scope, parent search), refused. ]]
local function charter_retrieval_search(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'search')
    local h = retrieval_load_scope(P, doc.scope_id)
    local scope_id = h.id
    local words = doc.words or {}
    if type(words) ~= 'table' then
        raise('invalid', 'words must be a list')
    end
    local limit = check_count(doc.limit or 5, 'limit', 1, RETRIEVAL_MAX_RESULTS)
    local step_resources = check_id_list(doc.resources, 'resources', true)
    local query_text = check_text(doc.query, 'query', '')
    local parent = ''
    if present(doc.parent) and doc.parent ~= '' then
        parent = check_id(doc.parent, 'parent')
        local ph = hash(P .. ':search:' .. parent)
        if not ph then
            raise('not_found', 'search ' .. parent .. ' not found')
        end
        if ph.scope_id ~= scope_id then
            raise('invalid', 'search ' .. parent .. ' is not of scope ' .. scope_id)
        end
    end
    local filters = retrieval_filters(cjson.decode(h.filters or '{}'), 'stored filters')
    local ts, tnum = now()
    if h.expires_at and h.expires_at ~= '' and tnum >= tonumber(h.expires_at) then
        raise('refused', 'SCOPE_EXPIRED: scope ' .. scope_id .. ' expired at ' .. h.expires_at)
    end
    local usage = P .. ':scope:' .. scope_id .. ':usage'
    if parent ~= '' then
        local used = tonumber(redis.call('HGET', usage, 'follow_ups')) or 0
        local max = tonumber(h.max_follow_ups) or 0
        if used >= max then
            raise('refused', 'FOLLOW_UP_BUDGET_EXHAUSTED: scope ' .. scope_id .. ' has used ' ..
                  used .. ' of ' .. max .. ' follow-ups')
        end
    end

    -- The step bounds every scope: resource_id is cut to the step's resources.
    local allowed = {}
    local src = filters.resource_id or step_resources
    for _, r in ipairs(src) do
        if contains(step_resources, r) then
            allowed[#allowed + 1] = r
        end
    end
    filters.resource_id = allowed
    local denied = false
    for _, vals in pairs(filters) do
        if #vals == 0 then
            denied = true
        end
    end
    local results = {}
    if not denied and #words > 0 and retrieval_index_exists(P) then
        local q = retrieval_engine_query(words, filters)
        local r = redis.call('FT.SEARCH', retrieval_index(P), q, 'WITHSCORES', 'SCORER', 'BM25',
                             'LIMIT', 0, limit)
        local i = 2
        while i + 2 <= #r + 1 and #results < limit do
            local key, score, flat = r[i], r[i + 1], r[i + 2]
            i = i + 3
            local f = {}
            for j = 1, #flat, 2 do
                f[flat[j]] = flat[j + 1]
            end
            local ok = type(key) == 'string'
            for k, vals in pairs(filters) do
                ok = ok and contains(vals, f[k])
            end
            local res = ok and hash(P .. ':resource:' .. f.resource_id)
            if res then
                results[#results + 1] = {
                    chunk_id = f.chunk_id or '', resource_id = f.resource_id,
                    tenant = f.tenant or '', visibility = f.visibility or '',
                    revision = tonumber(f.revision) or 0, text = f.text or '',
                    score = tonumber(score) or 0, title = res.title or '',
                    conf = tonumber(res.conf), integrity = tonumber(res.integrity),
                }
            end
        end
    end
    if parent ~= '' then
        redis.call('HINCRBY', usage, 'follow_ups', 1)
    end
    local id = 'q' .. redis.call('HINCRBY', P .. ':counter', 'search', 1)
    local ids = {}
    for i, r in ipairs(results) do
        ids[i] = r.chunk_id
    end
    redis.call('HSET', P .. ':search:' .. id, 'id', id, 'scope_id', scope_id, 'parent', parent,
               'query', query_text, 'words', encode_list(words), 'chunks', encode_list(ids),
               'denied_all', denied and '1' or '0', 'created_at', ts)
    return cjson.encode({search = {id = id, scope_id = scope_id, parent = parent},
                         results = results, lineage = retrieval_lineage(P, id),
                         denied_all = denied})
end

--[[ charter_retrieval_get_search
call: retrieval_get_search(search_id)
keys: P. args: search_id. reply: {"search":{id,scope_id,parent,query,chunks,created_at}}
  (chunks a JSON text). errors: invalid, not_found. ]]
local function charter_retrieval_get_search(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'search_id')
    local h = hash(P .. ':search:' .. id)
    if not h then
        raise('not_found', 'search ' .. id .. ' not found')
    end
    return cjson.encode({search = {id = id, scope_id = h.scope_id or '', parent = h.parent or '',
                                   query = h.query or '', chunks = h.chunks or '[]',
                                   created_at = h.created_at or ''}})
end

--[[ charter_retrieval_link
call: retrieval_link(search_id, artifact_ids)
keys: P. args: search_id, JSON list of artifact ids: the source artifacts a search's results
  became (P:search:<id>:artifacts, and P:artifact:<a>:retrieved_by the search).
reply: {"linked":n}. errors: invalid, not_found. ]]
local function charter_retrieval_link(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'search_id')
    local ok, list = pcall(cjson.decode, args[2] or '')
    if not ok then
        raise('invalid', 'artifact ids must be a JSON list')
    end
    local ids = check_id_list(list, 'artifact_ids', false)
    if not exists(P .. ':search:' .. id) then
        raise('not_found', 'search ' .. id .. ' not found')
    end
    for _, a in ipairs(ids) do
        if not exists(P .. ':artifact:' .. a) then
            raise('not_found', 'artifact ' .. a .. ' not found')
        end
    end
    for _, a in ipairs(ids) do
        redis.call('SADD', P .. ':search:' .. id .. ':artifacts', a)
        redis.call('SADD', P .. ':artifact:' .. a .. ':retrieved_by', id)
    end
    return cjson.encode({linked = #ids})
end

--[[ charter_retrieval_trace
call: retrieval_trace(artifact_id)
keys: P. args: artifact_id. reply: {"artifact_id":id,"searches":[{search_id,scope_id,parent,
  query,scope:{...}}]}: the search that retrieved the artifact and every search above it, each
  with its scope. errors: invalid, not_found (an artifact no search retrieved). ]]
local function charter_retrieval_trace(keys, args)
    local P = prefix(keys)
    local a = check_id(args[1], 'artifact_id')
    local by = members(P .. ':artifact:' .. a .. ':retrieved_by')
    if #by == 0 then
        raise('not_found', 'artifact ' .. a .. ' was not retrieved by a search')
    end
    local out = {}
    for _, l in ipairs(retrieval_lineage(P, by[1])) do
        local sh = hash(P .. ':search:' .. l.search_id) or {}
        local sc = hash(P .. ':scope:' .. l.scope_id)
        out[#out + 1] = {search_id = l.search_id, scope_id = l.scope_id, parent = l.parent,
                         query = sh.query or '',
                         scope = sc and retrieval_scope_object(P, l.scope_id, sc) or cjson.null}
    end
    return cjson.encode({artifact_id = a, searches = out})
end

--[[ charter_retrieval_checkpoint
call: retrieval_checkpoint(json checkpoint)
keys: P. args: JSON {scope_id,principal,task}: saves the scope bound to a trusted binding; the
  principal must be the scope's. reply: {"checkpoint_id":id}. errors: invalid, not_found. ]]
local function charter_retrieval_checkpoint(keys, args)
    local P = prefix(keys)
    local doc = json_arg(args[1], 'checkpoint')
    local h = retrieval_load_scope(P, doc.scope_id)
    local principal = check_id(doc.principal, 'principal')
    local task = check_text(doc.task, 'task', '')
    if principal ~= h.principal then
        raise('invalid', 'the binding\'s principal is not the scope\'s')
    end
    local ts = now()
    local id = 'k' .. redis.call('HINCRBY', P .. ':counter', 'checkpoint', 1)
    redis.call('HSET', P .. ':checkpoint:' .. id, 'id', id, 'scope_id', h.id, 'principal',
               principal, 'task', task, 'filters', h.filters or '{}', 'unrestricted',
               h.unrestricted or '0', 'max_follow_ups', h.max_follow_ups or '0', 'created_at', ts)
    return cjson.encode({checkpoint_id = id})
end

--[[ charter_retrieval_get_checkpoint
call: retrieval_get_checkpoint(checkpoint_id)
keys: P. args: checkpoint_id. reply: {"checkpoint":{id,scope_id,principal,task,filters,
  unrestricted,max_follow_ups,created_at}} (filters a JSON text). errors: invalid, not_found. ]]
local function charter_retrieval_get_checkpoint(keys, args)
    local P = prefix(keys)
    local id = check_id(args[1], 'checkpoint_id')
    local h = hash(P .. ':checkpoint:' .. id)
    if not h then
        raise('not_found', 'checkpoint ' .. id .. ' not found')
    end
    return cjson.encode({checkpoint = {
        id = id, scope_id = h.scope_id or '', principal = h.principal or '', task = h.task or '',
        filters = h.filters or '{}', unrestricted = h.unrestricted == '1',
        max_follow_ups = tonumber(h.max_follow_ups) or 0, created_at = h.created_at or '',
    }})
end

-- Exported: what later files and the registry use.
retrieval.charter_retrieval_ingest = charter_retrieval_ingest
retrieval.charter_retrieval_bind_scope = charter_retrieval_bind_scope
retrieval.charter_retrieval_get_scope = charter_retrieval_get_scope
retrieval.charter_retrieval_search = charter_retrieval_search
retrieval.charter_retrieval_get_search = charter_retrieval_get_search
retrieval.charter_retrieval_link = charter_retrieval_link
retrieval.charter_retrieval_trace = charter_retrieval_trace
retrieval.charter_retrieval_checkpoint = charter_retrieval_checkpoint
retrieval.charter_retrieval_get_checkpoint = charter_retrieval_get_checkpoint
end
