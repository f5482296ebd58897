-- queries/workflows.lua - workflow definitions as data, and the workflow and narrowed scope of
-- a context.

local workflows = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local raise, present, check_id = validation.raise, validation.present, validation.check_id
local check_text, check_id_list = validation.check_text, validation.check_id_list
local check_object_list, check_bool = validation.check_object_list, validation.check_bool
local CONF_NAMES, INTEGRITY_NAMES = validation.CONF_NAMES, validation.INTEGRITY_NAMES
local check_label, check_time = validation.check_label, validation.check_time
local json_arg, prefix, hex64 = validation.json_arg, validation.prefix, validation.hex64
local now, hash, members, exists = graph.now, graph.hash, graph.members, graph.exists
local decode_list, encode_list = graph.decode_list, graph.encode_list
local charter_seed = graph.charter_seed

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

-- The clash of the seed entry part[i] (i 1-based; the text counts from 0, the definition's
-- order), a noun with id id: the graph holds it with other content (what names the field or
-- edge set that differs) or, what nil, does not hold it. Returns the one-line reason and the
-- same as {node,id,differs|missing} for a reader that names the node in its own words.
local function clash(part, i, id, noun, what)
    if not what then
        return string.format('%s[%d].id: %s "%s" is not in the graph', part, i - 1, noun, id),
               {node = noun, id = id, missing = true}
    end
    return string.format('%s[%d].id: %s "%s" is already in the graph and differs in %s; ids ' ..
                             'are shared by every workflow of a graph, so use another id or an ' ..
                             'identical %s', part, i - 1, noun, id, what, noun),
           {node = noun, id = id, differs = what}
end

-- The first entry of seed (charter_seed's argument) whose node exists in the graph with other
-- content or, when missing is true, is not in the graph, as clash() gives it, or nil.
-- A grant's revocation is state, not content: it never clashes.
local function seed_clash(P, seed, missing)
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
        elseif missing then
            return clash('resources', i, r.id, 'resource')
        end
    end
    for i, r in ipairs(check_object_list(seed.recipients, 'recipients')) do
        local w = 'recipients[' .. i .. ']'
        local h = hash(P .. ':recipient:' .. check_id(r.id, w .. '.id'))
        if h and tonumber(h.clearance) ~=
            check_label(r.clearance, w .. '.clearance', CONF_NAMES, 2) then
            return clash('recipients', i, r.id, 'recipient', 'clearance')
        elseif not h and missing then
            return clash('recipients', i, r.id, 'recipient')
        end
    end
    for i, a in ipairs(check_object_list(seed.actors, 'actors')) do
        local h = hash(P .. ':actor:' .. check_id(a.id, 'actors[' .. i .. '].id'))
        if h and h.kind ~= a.kind then
            return clash('actors', i, a.id, 'actor', 'kind')
        elseif not h and missing then
            return clash('actors', i, a.id, 'actor')
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
        elseif missing then
            return clash('grants', i, g.id, 'grant')
        end
    end
    return nil
end

--[[ charter_put_workflow
call: put_workflow(workflow, definition, seed)
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
    local why = seed_clash(P, seed, false)
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

--[[ charter_seed_clash
call: seed_clash(seed, missing?)
keys: P. args: seed (charter_seed's argument, derived from a workflow's definition by charterd
  as for charter_put_workflow), missing ("1": a node the seed names that the graph does not
  hold clashes too, as an audit of a run against its workflow asks; "0", the default: only a
  node the graph holds with other content, what charter_put_workflow refuses).
reply: {} when every node of the seed the graph holds (with missing "1": every node of the
  seed) matches it. Otherwise the first that does not, resources, recipients, actors, then
  grants, each in the definition's order: {"clash":"<part>[<i>].id: ...","node":"<resource,
  recipient, actor or grant>","id":id,"differs":"<what>"}, with charter_put_workflow's
  refusal text as clash and what one of title, confidentiality, integrity, content,
  clearance, kind, root, tools, recipients, resources, valid_from, valid_to, grantee (the
  grant's :granted_to set), issuer (:issued_by) or delegated_from (:delegated_from); for a
  node the graph does not hold, "missing":true in place of differs and clash
  '<part>[<i>].id: <node> "<id>" is not in the graph'. A grant's revocation is state, not
  content: it never clashes. Reads only.
errors: invalid. ]]
local function charter_seed_clash(keys, args)
    local P = prefix(keys)
    local seed = json_arg(args[1], 'seed')
    local missing = check_bool(args[2], 'missing', false)
    local why, what = seed_clash(P, seed, missing)
    if not why then
        return cjson.encode({})
    end
    what.clash = why
    return cjson.encode(what)
end

--[[ charter_get_workflow
call: get_workflow(version_or_name)
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
call: list_workflows()
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
call: run_workflow(run_id)
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
call: scope_context(json scope)
keys: P. args: JSON {context_id,run_id,workflow,grant,parent,tools,recipients,resources}.
  Completes a context just opened, once: its workflow (the version its run follows), the grant
  its step acts under in that workflow (optional: a hint charter_delivery_facts reads the chain
  of; charterd checks it against the workflow every time) and, for a
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
    local grant = ''
    if present(doc.grant) then
        grant = check_id(doc.grant, 'grant')
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
                   'scope_resources', encode_list(lists.resources), 'grant', grant)
    else
        redis.call('HSET', key, 'workflow', workflow, 'grant', grant)
    end
    return cjson.encode({context = {id = id, run_id = run_id, step = h.step or '',
                                    workflow = workflow, parent = parent or ''}})
end

-- Exported: what later files and the registry use.
workflows.charter_put_workflow = charter_put_workflow
workflows.charter_seed_clash = charter_seed_clash
workflows.charter_get_workflow = charter_get_workflow
workflows.charter_list_workflows = charter_list_workflows
workflows.charter_run_workflow = charter_run_workflow
workflows.charter_scope_context = charter_scope_context
end
