-- queries/validation.lua - errors and argument validation shared by every function.
-- The library validates every argument before its first write; these helpers raise the
-- {"err":...} reply (turned into JSON by the registry's wrapper) and never write.

local validation = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there

-- Raises a reply-level error; register() turns it into {"err":code,"msg":msg}. Only raised
-- before the first write of a function, so an error reply always means nothing was written.
local function raise(code, msg)
    error({charter_err = code, msg = msg})
end

local function present(v)
    return v ~= nil and v ~= cjson.null
end

-- The character checks below are anchored patterns ('^[...]+$'): one match attempt that runs
-- along the string, where an unanchored find of the complement class starts a new attempt at
-- every byte (some ten times the time on a 64-byte hash).
local function valid_id(s)
    return type(s) == 'string' and #s >= 1 and #s <= 128 and s:find('^[%w_%.%-]+$') ~= nil
end

local function check_id(s, what)
    if not valid_id(s) then
        raise('invalid', what .. ' must be 1..128 characters of [A-Za-z0-9_.-]')
    end
    return s
end

-- Invocation ids additionally allow ':' but may not end in a delivery edge suffix.
local function check_invocation(s)
    if type(s) ~= 'string' or #s < 1 or #s > 128 or not s:find('^[%w_%.:%-]+$') then
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
    -- ASCII without NUL, the common case, in one anchored match.
    if s:find('^[\1-\127]*$') then
        return true
    end
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
        local id = v[i]
        if id == nil then
            raise('invalid', what .. ' must be a list of ids')
        end
        -- The element's name is built only for the error: on the hot path of every commit.
        if not valid_id(id) then
            raise('invalid', what .. '[' .. i .. '] must be 1..128 characters of [A-Za-z0-9_.-]')
        end
        out[i] = id
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

-- A JSON argument decoded, its text matching start (white space, then the opening bracket):
-- cjson decodes [] and {} alike, so an array and an object are told apart by that bracket.
local function json_decoded(s, what, start, noun)
    if type(s) ~= 'string' then
        raise('invalid', what .. ' is required')
    end
    local ok, v = pcall(cjson.decode, s)
    if not ok or type(v) ~= 'table' or not s:find(start) then
        raise('invalid', what .. ' must be a JSON ' .. noun)
    end
    return v
end

local function json_arg(s, what)
    return json_decoded(s, what, '^[ \t\r\n]*{', 'object')
end

-- A JSON array argument, decoded (its items are checked by the caller).
local function json_list_arg(s, what)
    return json_decoded(s, what, '^[ \t\r\n]*%[', 'array')
end

-- The graph prefix: the only key, "charter:{G}".
local function prefix(keys)
    local p = keys[1]
    if #keys ~= 1 or type(p) ~= 'string' or not p:match('^charter:{[%w_%.%-]+}$') or #p > 75 then
        raise('invalid', 'the only key must be the graph prefix charter:{<graph>}')
    end
    return p
end

-- A SHA-256 in hex as the library stores it: 64 lowercase hex digits.
local function hex64(s)
    return type(s) == 'string' and #s == 64 and s:find('^[0-9a-f]+$') ~= nil
end

-- Exported: what later files and the registry use.
validation.raise = raise
validation.present = present
validation.check_id = check_id
validation.check_invocation = check_invocation
validation.check_text = check_text
validation.check_id_list = check_id_list
validation.check_object_list = check_object_list
validation.check_count = check_count
validation.check_bool = check_bool
validation.CONF_NAMES = CONF_NAMES
validation.INTEGRITY_NAMES = INTEGRITY_NAMES
validation.check_label = check_label
validation.check_time = check_time
validation.json_arg = json_arg
validation.json_list_arg = json_list_arg
validation.prefix = prefix
validation.hex64 = hex64
end
