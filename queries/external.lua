-- queries/external.lua - the end of an external run: a host drives such a run through the Gate,
-- call by call, and no executor ends it, so the host (or an operator) says when it is over. Only
-- an ended run has a run receipt and leaves the database under retention (archive.lua).

local external = {}
do -- the file's scope: its locals end at the last line; what later files use is exported there
local raise, check_id, prefix = validation.raise, validation.check_id, validation.prefix
local now = graph.now
local check_sealed = events.check_sealed
local charter_transition_run = runs.charter_transition_run
local pending_approval = approvals.pending_approval

--[[ charter_complete_run
call: complete_run(run_id, event)
keys: P. args: run_id, sealed event status_changed whose detail starts with
  "created -> completed".
reply: {"ok":true,"seq":n,"from":"created"} when the run is an external run, created, with no
  approval pending on the database's clock: in this one call it becomes completed and the event
  is written (its ts is the time the run ended); {"ok":true,"unchanged":true,"status":
  "completed"} for an external run already completed (nothing written); else {"ok":false,
  "reason":"mode"|"status"|"approval","status":"<current>","mode":"<mode>"[,"approval":"<id>"]}
  and nothing is written: a scripted or live run (its executor ends it), an external run in
  another status (cancelled), one with a send held for a human (the approval's id); or the
  conflict reply.
errors: not_found (run), invalid. ]]
local function charter_complete_run(keys, args)
    local P = prefix(keys)
    local run_id = check_id(args[1], 'run_id')
    check_sealed(args[2], 'event', 'status_changed')
    local st, mode = unpack(redis.call('HMGET', P .. ':run:' .. run_id, 'status', 'mode'))
    if not st then
        raise('not_found', 'run ' .. run_id .. ' not found')
    end
    mode = mode or ''
    if mode ~= 'external' then
        return cjson.encode({ok = false, reason = 'mode', status = st, mode = mode})
    end
    if st == 'completed' then
        return cjson.encode({ok = true, unchanged = true, status = st})
    end
    if st ~= 'created' then
        return cjson.encode({ok = false, reason = 'status', status = st, mode = mode})
    end
    local ts = now()
    local held = pending_approval(P, run_id, ts)
    if held then
        return cjson.encode({ok = false, reason = 'approval', status = st, mode = mode,
                             approval = held})
    end
    return charter_transition_run(keys, {run_id, 'created', 'completed', args[2]})
end

-- Exported: what later files and the registry use.
external.charter_complete_run = charter_complete_run
end
