#!lua name=charter
--[[
queries/library.lua - the head of the query library: every read and write charterd makes on
the graph.

One Redis Functions library, built from one source per concern (queries/*.lua) concatenated in
the order CHARTER_QUERY_SOURCES lists in CMakeLists.txt, this file first (it carries the
library's name line) and registry.lua last. Each file is its own scope: one top-level local,
the file's module table, then a `do ... end` block holding everything else. A file takes what it
uses from an earlier file by name at the head of its block (`local raise = validation.raise`) and
exports at its foot what later files and the registry use, so the chunk's top level holds one
local per file, far below Lua's 200 (tests/lua_scopes.pl checks it). Each function takes exactly
one key, the graph prefix
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
  argument {kind,outcome,codes,witness,detail,snapshot,evaluator,seq,ts,prev,hash}, stores
  every text byte for byte as given, and writes only if the run's head is still (seq - 1, prev);
  otherwise it writes nothing and replies {"conflict":true,"head":{...}} with the current head,
  and charterd seals again. Event write: hash P:event:<run>:<seq>, P:run:<id> seq and head,
  ZADD P:run:<id>:events seq seq.
- Empty lists encode as {} (Redis's cjson has no empty-array marker); readers accept both.
]]

local library = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there

local LIBRARY_VERSION = '27'
local MAX_LIMIT = 100000  -- upper bound of any limit argument
local DEFAULT_LIMIT = 1000 -- a limit of 0 means this
local MAX_CHAIN = 64       -- grants one grant_chain walk returns, and a commit accepts
local RUN_STATUSES = {
    created = true, running = true, blocked = true, recovering = true,
    completed = true, error = true, interrupted = true, queued = true, cancelled = true,
    budget_exhausted = true, pending_approval = true,
}

-- Exported: what later files and the registry use.
library.LIBRARY_VERSION = LIBRARY_VERSION
library.MAX_LIMIT = MAX_LIMIT
library.DEFAULT_LIMIT = DEFAULT_LIMIT
library.MAX_CHAIN = MAX_CHAIN
library.RUN_STATUSES = RUN_STATUSES
end
