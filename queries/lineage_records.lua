-- queries/lineage_records.lua - lineage records stored once, by content: an artifact's lineage
-- facts as an ancestry walk read them, named by their SHA-1 (the hash the function engine
-- offers), so a decision's snapshot names its whole ancestry with one record's name.

local lineage_records = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local MAX_LIMIT = library.MAX_LIMIT
local raise, check_count, prefix = validation.raise, validation.check_count, validation.prefix

--[[ charter_put_lineage
call: put_lineage(pairs...)
keys: P. args: sha1, record, sha1, record, ... (pairs; the "new" of a charter_ancestry reply).
reply: {"stored":n}: each record is stored under P:lineage:<sha1> unless one is there already
  (SET NX: a record never changes; its name is its content's hash).
errors: invalid (an odd count, a name that is not 40 lowercase hex digits, a record that does
  not hash to its name), nothing written. ]]
local function charter_put_lineage(keys, args)
    local P = prefix(keys)
    if #args % 2 ~= 0 then
        raise('invalid', 'arguments must be pairs of sha1 and record')
    end
    for i = 1, #args, 2 do
        local sha, text = args[i], args[i + 1]
        if type(sha) ~= 'string' or #sha ~= 40 or sha:find('[^0-9a-f]') then
            raise('invalid', 'sha1 must be 40 lowercase hex digits')
        end
        if redis.sha1hex(text) ~= sha then
            raise('invalid', 'record ' .. sha .. ' does not hash to its name')
        end
    end
    local n = 0
    for i = 1, #args, 2 do
        if redis.call('SET', P .. ':lineage:' .. args[i], args[i + 1], 'NX') then
            n = n + 1
        end
    end
    return cjson.encode({stored = n})
end

--[[ charter_lineage_records
call: lineage_records(sha1, limit)
keys: P. args: sha1 (the lineage a snapshot names), limit (integer 1..100000).
reply: {"records":{"<sha1>":"<record>",...},"missing":["<sha1>",...]}: every record reachable
  from the named one through the refs of the records, each once, as stored (not checked here:
  the reader hashes each record and follows only the refs of records it verified); missing
  names each reachable record that is not stored. At most limit records are read.
errors: invalid. ]]
local function charter_lineage_records(keys, args)
    local P = prefix(keys)
    local root = args[1]
    if type(root) ~= 'string' or #root ~= 40 or root:find('[^0-9a-f]') then
        raise('invalid', 'sha1 must be 40 lowercase hex digits')
    end
    local limit = check_count(args[2], 'limit', 1, MAX_LIMIT)
    local records, missing, seen, todo, n = {}, {}, {[root] = true}, {root}, 0
    while #todo > 0 and n < limit do
        local sha = todo[#todo]
        todo[#todo] = nil
        local text = redis.call('GET', P .. ':lineage:' .. sha)
        if not text then
            missing[#missing + 1] = sha
        else
            n = n + 1
            records[sha] = text
            local ok, rec = pcall(cjson.decode, text)
            if ok and type(rec) == 'table' and type(rec.refs) == 'table' then
                for _, r in ipairs(rec.refs) do
                    if type(r) == 'string' and r ~= '' and not seen[r] then
                        seen[r] = true
                        todo[#todo + 1] = r
                    end
                end
            end
        end
    end
    return cjson.encode({records = records, missing = missing})
end

--[[ charter_lineage_get
call: lineage_get(sha1...)
keys: P. args: sha1, sha1, ... (1..32 names).
reply: {"records":{"<sha1>":"<record>",...}}: each named record that is stored, as stored (the
  reader hashes each one before using it); a name not stored is absent.
errors: invalid (a name that is not 40 lowercase hex digits). ]]
local function charter_lineage_get(keys, args)
    local P = prefix(keys)
    local records = {}
    for _, sha in ipairs(args) do
        if type(sha) ~= 'string' or #sha ~= 40 or sha:find('[^0-9a-f]') then
            raise('invalid', 'sha1 must be 40 lowercase hex digits')
        end
        local text = redis.call('GET', P .. ':lineage:' .. sha)
        if text then
            records[sha] = text
        end
    end
    return cjson.encode({records = records})
end

-- Exported: what later files and the registry use.
lineage_records.charter_put_lineage = charter_put_lineage
lineage_records.charter_lineage_records = charter_lineage_records
lineage_records.charter_lineage_get = charter_lineage_get
end
