-- queries/lineage.lua - artifacts and their DERIVED_FROM lineage: creating an artifact with its
-- edges and event, reading one, and the ancestry walk the input and delivery gates decide from.

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
