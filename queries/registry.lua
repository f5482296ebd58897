-- queries/registry.lua - the registration table: every function of the library, its name and
-- whether it is read-only (the no-writes flag). Last in the library, so every function above
-- is defined when it is registered.

-- Wraps fn so a raise() becomes the JSON error reply; any other error (a failed redis.call)
-- propagates as a Redis error.
local function register(name, fn, readonly)
    local function callback(keys, args)
        local ok, res = pcall(fn, keys, args)
        if ok then
            return res
        end
        if type(res) == 'table' and res.charter_err then
            return cjson.encode({err = res.charter_err, msg = res.msg})
        end
        error(res)
    end
    local flags = {}
    if readonly then
        flags = {'no-writes'}
    end
    redis.register_function({function_name = name, callback = callback, flags = flags})
end

register('charter_version', charter_version, true)
register('charter_time', charter_time, true)
register('charter_seed', charter_seed, false)
register('charter_graph_stats', charter_graph_stats, true)
register('charter_create_run', charter_create_run, false)
register('charter_transition_run', charter_transition_run, false)
register('charter_unfinished_runs', charter_unfinished_runs, true)
register('charter_run_head', charter_run_head, true)
register('charter_get_run', charter_get_run, true)
register('charter_list_runs', charter_list_runs, true)
register('charter_open_context', charter_open_context, false)
register('charter_context_owner', charter_context_owner, true)
register('charter_get_resource', charter_get_resource, true)
register('charter_get_recipient', charter_get_recipient, true)
register('charter_create_artifact', charter_create_artifact, false)
register('charter_get_artifact', charter_get_artifact, true)
register('charter_ancestry', charter_ancestry, true)
register('charter_lineage_state', charter_lineage_state, true)
register('charter_grant_chain', charter_grant_chain, true)
register('charter_append_event', charter_append_event, false)
register('charter_get_event', charter_get_event, true)
register('charter_audit_events', charter_audit_events, true)
register('charter_find_delivery', charter_find_delivery, true)
register('charter_delivery_facts', charter_delivery_facts, true)
register('charter_commit_delivery', charter_commit_delivery, false)
register('charter_revoke_grant', charter_revoke_grant, false)
register('charter_restore_grants', charter_restore_grants, false)
register('charter_integrity', charter_integrity, false)
register('charter_get_receipt', charter_get_receipt, true)
register('charter_attach_receipt', charter_attach_receipt, false)
register('charter_put_workflow', charter_put_workflow, false)
register('charter_get_workflow', charter_get_workflow, true)
register('charter_list_workflows', charter_list_workflows, true)
register('charter_run_workflow', charter_run_workflow, true)
register('charter_scope_context', charter_scope_context, false)
register('charter_blob_exists', charter_blob_exists, true)
register('charter_put_blob', charter_put_blob, false)
register('charter_get_blob', charter_get_blob, true)
register('charter_enqueue_run', charter_enqueue_run, false)
register('charter_claim_run', charter_claim_run, false)
register('charter_request_recovery', charter_request_recovery, false)
register('charter_renew_lease', charter_renew_lease, false)
register('charter_release_lease', charter_release_lease, false)
register('charter_reap_leases', charter_reap_leases, false)
register('charter_request_cancel', charter_request_cancel, false)
register('charter_cancel_unclaimed', charter_cancel_unclaimed, false)
register('charter_list_leases', charter_list_leases, true)
register('charter_request_approval', charter_request_approval, false)
register('charter_get_approval', charter_get_approval, true)
register('charter_list_approvals', charter_list_approvals, true)
register('charter_decide_approval', charter_decide_approval, false)
register('charter_save_checkpoint', charter_save_checkpoint, false)
register('charter_get_checkpoint', charter_get_checkpoint, true)
register('charter_resume_run', charter_resume_run, false)
