-- queries/tenants.lua - the tenant registry, stored credentials and per-tenant quotas. A graph is
-- a tenant; the registry lives outside every graph's hash tag, under the prefix
-- charter:{_tenants} (R below; tenant names beginning with "_" are refused, so no tenant's
-- graph can share it), so one call admits a caller of any tenant: the tenant exists, the
-- credential's stored hash, its role and actors, and the per-second call counter. Counters
-- are Redis integers changed inside these functions, so quotas hold across charterd processes.
-- Keys: R:tenants (set of names), R:tenant:<name> (hash: max_runs, max_artifacts,
-- calls_per_second, created_at, runs, artifacts), R:cred:<id> (hash: tenant, role, actors,
-- label, hash, created_at, revoked_at), R:creds:<tenant> (set of ids), R:cps:<tenant>:<second>
-- (counter expiring after 2 s). Secrets never reach Redis: charterd stores their SHA-256.
-- In a tenant's own graph (prefix P = charter:{<name>}, the graph's slot) P:tenant (hash: name,
-- claimed_at) marks a graph claimed for a tenant by charter_graph_claim before it is
-- registered: the registry and the graph are in different cluster slots, so no one function
-- can check the one and write the other.

local tenants = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local raise, present, check_id = validation.raise, validation.present, validation.check_id
local check_text, check_id_list = validation.check_text, validation.check_id_list
local check_count, json_arg = validation.check_count, validation.json_arg
local prefix, hex64 = validation.prefix, validation.hex64
local now, hash, members, exists = graph.now, graph.hash, graph.members, graph.exists
local decode_list, encode_list = graph.decode_list, graph.encode_list

local QUOTA_KINDS = {runs = 'max_runs', artifacts = 'max_artifacts'}
local CREDENTIAL_ROLES = {operator = true, viewer = true, host = true}

local function check_tenant_name(s, what)
    if type(s) ~= 'string' or #s < 1 or #s > 64 or s:find('[^%w_%.%-]') or s:sub(1, 1) == '_' then
        raise('invalid', what .. ' must be 1..64 characters of [A-Za-z0-9_.-], not beginning with "_"')
    end
    return s
end

local function tenant_object(name, h)
    return {
        name = name, implicit = false, created_at = h.created_at or '',
        max_runs = tonumber(h.max_runs) or 0, max_artifacts = tonumber(h.max_artifacts) or 0,
        calls_per_second = tonumber(h.calls_per_second) or 0,
        retention_seconds = tonumber(h.retention_s) or 0,
        invocation_window_seconds = tonumber(h.invocation_window_s) or 0,
        runs = tonumber(h.runs) or 0, artifacts = tonumber(h.artifacts) or 0,
    }
end

local function implicit_tenant(name)
    return {name = name, implicit = true, created_at = '', max_runs = 0, max_artifacts = 0,
            calls_per_second = 0, retention_seconds = 0, invocation_window_seconds = 0, runs = 0,
            artifacts = 0}
end

local function credential_object(id, h, with_hash)
    local o = {
        id = id, tenant = h.tenant or '', role = h.role or '', actors = decode_list(h.actors),
        label = h.label or '', created_at = h.created_at or '', revoked_at = h.revoked_at or '',
    }
    if with_hash then
        o.hash = h.hash or ''
    end
    return o
end

-- A credential document {id, hash, role, actors, label} as charterd sends it.
local function check_credential_doc(d)
    if type(d) ~= 'table' or type(d.id) ~= 'string' or #d.id ~= 16 or d.id:find('[^0-9a-f]') then
        raise('invalid', 'credential id must be 16 lowercase hex digits')
    end
    if not hex64(d.hash) then
        raise('invalid', 'credential hash must be 64 lowercase hex digits')
    end
    if not CREDENTIAL_ROLES[d.role] then
        raise('invalid', 'role must be operator, viewer or host')
    end
    local actors = check_id_list(d.actors, 'actors', true)
    if d.role == 'host' and #actors == 0 then
        raise('invalid', 'a host credential needs at least one actor')
    end
    if d.role ~= 'host' and #actors > 0 then
        raise('invalid', 'only a host credential acts for actors')
    end
    local label = check_text(d.label, 'label', '')
    if #label > 128 then
        raise('invalid', 'label must be at most 128 bytes')
    end
    return actors, label
end

local function store_credential(R, tenant, d, actors, label, ts)
    local key = R .. ':cred:' .. d.id
    if exists(key) then
        raise('exists', 'credential ' .. d.id .. ' exists')
    end
    redis.call('HSET', key, 'tenant', tenant, 'role', d.role, 'actors', encode_list(actors),
               'label', label, 'hash', d.hash, 'created_at', ts, 'revoked_at', '')
    redis.call('SADD', R .. ':creds:' .. tenant, d.id)
    return credential_object(d.id, hash(key), false)
end

--[[ charter_tenant_create
call: tenant_create(tenant, quotas, default_graph, credential) on graph _tenants
keys: R (charter:{_tenants}). args: name, JSON quotas {max_runs,max_artifacts,calls_per_second,
  retention_seconds,invocation_window_seconds} (each optional, an integer >= 0; 0 is
  unlimited, for retention_seconds charterd's --retention, for invocation_window_seconds
  charterd's --invocation-window; both at most ten years), default_graph (the charterd's --graph, an
  implicit tenant), JSON credential {id,hash,role:"operator",label} (the tenant's first
  operator credential; hash is the SHA-256 of its secret).
reply: {"tenant":{name,implicit,created_at,max_runs,max_artifacts,calls_per_second,
  retention_seconds,invocation_window_seconds,runs,artifacts},"credential":{id,tenant,role,actors,label,created_at,revoked_at}}.
errors: exists (the tenant, the default graph's name, or the credential id), invalid.
  charterd first claims the tenant's graph (charter_graph_claim), which refuses a graph that
  holds data. ]]
local function charter_tenant_create(keys, args)
    local R = prefix(keys)
    local name = check_tenant_name(args[1], 'tenant')
    local q = json_arg(args[2], 'quotas')
    local default_graph = check_text(args[3], 'default_graph')
    local d = json_arg(args[4], 'credential')
    local limits = {}
    for _, f in ipairs({'max_runs', 'max_artifacts', 'calls_per_second'}) do
        limits[f] = present(q[f]) and check_count(q[f], f, 0, 1e15) or 0
    end
    local retention = present(q.retention_seconds) and
                          check_count(q.retention_seconds, 'retention_seconds', 0, 315360000) or 0
    local window = present(q.invocation_window_seconds) and
                       check_count(q.invocation_window_seconds, 'invocation_window_seconds', 0,
                                   315360000) or 0
    if d.role ~= 'operator' then
        raise('invalid', 'the first credential of a tenant is an operator credential')
    end
    local actors, label = check_credential_doc(d)
    if name == default_graph or exists(R .. ':tenant:' .. name) then
        raise('exists', 'tenant ' .. name .. ' exists')
    end
    if exists(R .. ':cred:' .. d.id) then
        raise('exists', 'credential ' .. d.id .. ' exists')
    end
    local ts = now()
    local key = R .. ':tenant:' .. name
    redis.call('HSET', key, 'max_runs', string.format('%d', limits.max_runs),
               'max_artifacts', string.format('%d', limits.max_artifacts),
               'calls_per_second', string.format('%d', limits.calls_per_second),
               'retention_s', string.format('%d', retention),
               'invocation_window_s', string.format('%d', window),
               'created_at', ts, 'runs', '0', 'artifacts', '0')
    redis.call('SADD', R .. ':tenants', name)
    local cred = store_credential(R, name, d, actors, label, ts)
    return cjson.encode({tenant = tenant_object(name, hash(key)), credential = cred})
end

-- The keys of a graph at least one of which exists once it holds any data (see queries/README.md).
local GRAPH_HEADS = {'meta', 'counter', 'runs', 'grants', 'workflows', 'workflow_names', 'leases',
                     'runq', 'approvals', 'checkpoints:consumed'}

--[[ charter_graph_claim
call: graph_claim(name)
keys: P (charter:{<name>}, the tenant's own graph). args: name (the tenant; P must be its
  prefix).
reply: {"claimed":true}: the graph holds none of the keys every graph with data has (P:meta,
  written by the first charterd that serves a graph, P:counter, P:runs, P:grants,
  P:workflows, P:workflow_names, P:leases, P:runq, P:approvals, P:checkpoints:consumed), and
  P:tenant now names it. Claiming again a graph that holds only P:tenant succeeds (a creation
  that did not finish, or one racing for the same name: the registry decides which one
  registers). From then on charter_integrity refuses it as a charterd's default graph.
errors: exists (the graph holds data: another charterd's default graph, a tenant's graph, or
  an older graph; nothing written), invalid. ]]
local function charter_graph_claim(keys, args)
    local P = prefix(keys)
    local name = check_tenant_name(args[1], 'name')
    if P ~= 'charter:{' .. name .. '}' then
        raise('invalid', 'the key must be the prefix of graph ' .. name)
    end
    for _, head in ipairs(GRAPH_HEADS) do
        if exists(P .. ':' .. head) then
            raise('exists', 'graph ' .. name .. ' already holds data (' .. P .. ':' .. head ..
                  '): a tenant gets a graph of its own, choose another name')
        end
    end
    redis.call('HSET', P .. ':tenant', 'name', name, 'claimed_at', (now()))
    return cjson.encode({claimed = true})
end

--[[ charter_tenant_list
call: tenant_list(default_graph) on graph _tenants
keys: R. args: default_graph.
reply: {"tenants":[{name,implicit,created_at,max_runs,max_artifacts,calls_per_second,
  retention_seconds,invocation_window_seconds,runs,artifacts}...]}: the implicit default graph first, then every other created tenant by name
  (a registry entry named like the default graph, left by an older charterd, is not listed
  twice: calls naming it act on the implicit default, as charter_tenant_admit does).
errors: invalid. ]]
local function charter_tenant_list(keys, args)
    local R = prefix(keys)
    local default_graph = check_text(args[1], 'default_graph')
    local out = {implicit_tenant(default_graph)}
    for _, name in ipairs(members(R .. ':tenants')) do
        local h = name ~= default_graph and hash(R .. ':tenant:' .. name)
        if h then
            out[#out + 1] = tenant_object(name, h)
        end
    end
    return cjson.encode({tenants = out})
end

--[[ charter_tenant_names
call: tenant_names() on graph _tenants
keys: R. args: none.
reply: {"tenants":["<name>",...]}: every created tenant, sorted (executors poll their queues).
errors: invalid. ]]
local function charter_tenant_names(keys, args)
    local R = prefix(keys)
    return cjson.encode({tenants = members(R .. ':tenants')})
end

--[[ charter_tenant_admit
call: tenant_admit(tenant, credential_id, default_graph, token_hash) on graph _tenants
keys: R. args: tenant (may be "": the credential's), credential_id (may be "": none),
  default_graph, token_hash (with a credential_id: the hex SHA-256 of the token the caller
  presented; "" without one).
reply: {"tenant":{...as tenant_list},"credential":{id,tenant,role,actors,label,created_at,
  revoked_at,hash}|absent,"cps_exceeded":bool}. With a credential_id whose credential is
  unknown or whose stored hash is not token_hash the reply is {"verified":false} and nothing
  else is read or counted, whatever tenant is named (charterd answers "invalid token"), so an
  unauthenticated caller learns nothing of the tenants. A verified credential is returned
  whatever its tenant or revocation (charterd compares its hash again in constant time, then
  the binding). Only a verified, unrevoked credential of a known role bound to the tenant counts
  the call in R:cps:<tenant>:<second> when the tenant has calls_per_second > 0, and
  cps_exceeded says whether the count passed the quota; a call without one counts nothing.
errors: not_found (tenant, for a verified credential or none), invalid. ]]
local function charter_tenant_admit(keys, args)
    local R = prefix(keys)
    local tenant = check_text(args[1], 'tenant', '')
    local cred_id = check_text(args[2], 'credential_id', '')
    local default_graph = check_text(args[3], 'default_graph')
    local token_hash = check_text(args[4], 'token_hash', '')
    local cred = nil
    if cred_id ~= '' then
        if not hex64(token_hash) then
            raise('invalid', 'token_hash must be 64 lowercase hex digits with a credential_id')
        end
        local h = hash(R .. ':cred:' .. cred_id)
        if not h or h.hash ~= token_hash then
            return cjson.encode({verified = false})
        end
        cred = credential_object(cred_id, h, true)
    end
    if tenant == '' then
        if not cred then
            raise('invalid', 'tenant or credential_id is required')
        end
        tenant = cred.tenant
    end
    local t
    if tenant == default_graph then
        t = implicit_tenant(tenant)
    else
        local h = hash(R .. ':tenant:' .. tenant)
        if not h then
            raise('not_found', 'tenant ' .. tenant .. ' not found')
        end
        t = tenant_object(tenant, h)
    end
    local exceeded = false
    if t.calls_per_second > 0 and cred ~= nil and cred.tenant == tenant and
            cred.revoked_at == '' and CREDENTIAL_ROLES[cred.role] then
        local sec = redis.call('TIME')[1]
        local key = R .. ':cps:' .. tenant .. ':' .. sec
        local n = redis.call('INCR', key)
        if n == 1 then
            redis.call('PEXPIRE', key, 2000)
        end
        exceeded = n > t.calls_per_second
    end
    return cjson.encode({tenant = t, credential = cred, cps_exceeded = exceeded})
end

--[[ charter_credential_issue
call: credential_issue(tenant, credential, default_graph) on graph _tenants
keys: R. args: tenant, JSON credential {id,hash,role,actors,label} (role operator, viewer or
  host; a host lists 1.. actor ids, the others none; label at most 128 bytes), default_graph.
reply: {"credential":{id,tenant,role,actors,label,created_at,revoked_at}}.
errors: not_found (tenant), exists (credential id), invalid. ]]
local function charter_credential_issue(keys, args)
    local R = prefix(keys)
    local tenant = check_text(args[1], 'tenant')
    local d = json_arg(args[2], 'credential')
    local default_graph = check_text(args[3], 'default_graph')
    local actors, label = check_credential_doc(d)
    if tenant ~= default_graph and not exists(R .. ':tenant:' .. tenant) then
        raise('not_found', 'tenant ' .. tenant .. ' not found')
    end
    local ts = now()
    return cjson.encode({credential = store_credential(R, tenant, d, actors, label, ts)})
end

--[[ charter_credential_list
call: credential_list(tenant) on graph _tenants
keys: R. args: tenant.
reply: {"credentials":[{id,tenant,role,actors,label,created_at,revoked_at}...]} of the tenant,
  by id (never a hash).
errors: invalid. ]]
local function charter_credential_list(keys, args)
    local R = prefix(keys)
    local tenant = check_text(args[1], 'tenant')
    local out = {}
    for _, id in ipairs(members(R .. ':creds:' .. tenant)) do
        local h = hash(R .. ':cred:' .. id)
        if h and h.tenant == tenant then
            out[#out + 1] = credential_object(id, h, false)
        end
    end
    return cjson.encode({credentials = out})
end

--[[ charter_credential_revoke
call: credential_revoke(tenant, credential_id) on graph _tenants
keys: R. args: tenant, credential_id.
reply: {"credential":{...}} with revoked_at the database time (kept when already revoked).
errors: not_found (no such credential of this tenant), invalid. ]]
local function charter_credential_revoke(keys, args)
    local R = prefix(keys)
    local tenant = check_text(args[1], 'tenant')
    local id = check_id(args[2], 'credential_id')
    local key = R .. ':cred:' .. id
    local h = hash(key)
    if not h or h.tenant ~= tenant then
        raise('not_found', 'credential ' .. id .. ' not found')
    end
    if (h.revoked_at or '') == '' then
        redis.call('HSET', key, 'revoked_at', (now()))
    end
    return cjson.encode({credential = credential_object(id, hash(key), false)})
end

--[[ charter_quota_take
call: quota_take(tenant, kind, count) on graph _tenants
keys: R. args: tenant, kind ("runs" or "artifacts"), n (1..1000000).
reply: {"used":<count after>,"max":<quota>} when the tenant's counter plus n stays within its
  quota (0: unlimited), the counter then raised by n; a tenant not in the registry (the
  implicit default) has no quota: {"used":0,"max":0}, nothing written.
errors: limit ("max_runs" or "max_artifacts" named, nothing written), invalid. ]]
local function charter_quota_take(keys, args)
    local R = prefix(keys)
    local tenant = check_text(args[1], 'tenant')
    local field = QUOTA_KINDS[args[2]]
    if not field then
        raise('invalid', 'kind must be runs or artifacts')
    end
    local n = check_count(args[3], 'n', 1, 1000000)
    local key = R .. ':tenant:' .. tenant
    local max = tonumber(redis.call('HGET', key, field))
    if not max or max == 0 then
        return cjson.encode({used = 0, max = 0})
    end
    local used = tonumber(redis.call('HGET', key, args[2])) or 0
    if used + n > max then
        raise('limit', 'quota ' .. field .. ' of tenant ' .. tenant .. ' reached (' .. used ..
              ' of ' .. max .. ')')
    end
    return cjson.encode({used = redis.call('HINCRBY', key, args[2], n), max = max})
end

--[[ charter_quota_release
call: quota_release(tenant, kind, count) on graph _tenants
keys: R. args: tenant, kind ("runs" or "artifacts"), n (1..1000000).
reply: {"used":<count after>}: gives back what a call took when its write did not happen
  (never below 0).
errors: invalid. ]]
local function charter_quota_release(keys, args)
    local R = prefix(keys)
    local tenant = check_text(args[1], 'tenant')
    if not QUOTA_KINDS[args[2]] then
        raise('invalid', 'kind must be runs or artifacts')
    end
    local n = check_count(args[3], 'n', 1, 1000000)
    local key = R .. ':tenant:' .. tenant
    if not exists(key) then
        return cjson.encode({used = 0})
    end
    local used = redis.call('HINCRBY', key, args[2], -n)
    if used < 0 then
        redis.call('HSET', key, args[2], '0')
        used = 0
    end
    return cjson.encode({used = used})
end

-- Exported: what later files and the registry use.
tenants.charter_graph_claim = charter_graph_claim
tenants.charter_tenant_create = charter_tenant_create
tenants.charter_tenant_list = charter_tenant_list
tenants.charter_tenant_names = charter_tenant_names
tenants.charter_tenant_admit = charter_tenant_admit
tenants.charter_credential_issue = charter_credential_issue
tenants.charter_credential_list = charter_credential_list
tenants.charter_credential_revoke = charter_credential_revoke
tenants.charter_quota_take = charter_quota_take
tenants.charter_quota_release = charter_quota_release
end
