-- queries/grants.lua - grants and the delegation chain: the upward walk the guard checks,
-- revocation stamped with the database clock, and restoring revoked grants.

local grants = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local MAX_CHAIN = library.MAX_CHAIN
local raise, check_id, prefix = validation.raise, validation.check_id, validation.prefix
local now, hash, members, exists = graph.now, graph.hash, graph.members, graph.exists
local grant_object = graph.grant_object

--[[ charter_grant_chain
call: grant_chain(grant_id)
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

--[[ charter_revoke_grant
call: revoke_grant(grant_id)
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
call: restore_grants(grant_id)
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

-- Exported: what later files and the registry use.
grants.chain_table = chain_table
grants.charter_grant_chain = charter_grant_chain
grants.charter_revoke_grant = charter_revoke_grant
grants.charter_restore_grants = charter_restore_grants
end
