-- queries/blobs.lua - large snapshots stored once, by content (the event names them by SHA-256).

local blobs = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local raise, prefix, hex64 = validation.raise, validation.prefix, validation.hex64
local exists = graph.exists

--[[ charter_blob_exists
call: blob_exists(sha)
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
call: put_blob(sha, text)
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
call: get_blob(sha)
keys: P. args: sha. reply: {"text":"<the stored text>"}, or nil (readers check that the text
  hashes to sha). errors: invalid. ]]
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

-- Exported: what later files and the registry use.
blobs.charter_blob_exists = charter_blob_exists
blobs.charter_put_blob = charter_put_blob
blobs.charter_get_blob = charter_get_blob
end
