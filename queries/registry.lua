-- queries/registry.lua - the registration table: every function of the library, its name, the
-- module function that serves it and whether it is read-only (the no-writes flag). Last in the
-- library, so every module above has exported its functions when they are registered.

do -- the registry's scope ends at the last line

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

-- Every function of the library: its name, the module function and whether it is read only
-- (the no-writes flag). The only list of them.
local FUNCTIONS = {
    {'charter_version', graph.charter_version, true},
    {'charter_time', graph.charter_time, true},
    {'charter_seed', graph.charter_seed, false},
    {'charter_graph_stats', graph.charter_graph_stats, true},
    {'charter_create_run', runs.charter_create_run, false},
    {'charter_transition_run', runs.charter_transition_run, false},
    {'charter_unfinished_runs', runs.charter_unfinished_runs, true},
    {'charter_run_head', runs.charter_run_head, true},
    {'charter_get_run', runs.charter_get_run, true},
    {'charter_list_runs', runs.charter_list_runs, true},
    {'charter_open_context', runs.charter_open_context, false},
    {'charter_context_owner', runs.charter_context_owner, true},
    {'charter_get_resource', graph.charter_get_resource, true},
    {'charter_get_recipient', graph.charter_get_recipient, true},
    {'charter_quarantine_resource', graph.charter_quarantine_resource, false},
    {'charter_release_resource', graph.charter_release_resource, false},
    {'charter_create_artifact', lineage.charter_create_artifact, false},
    {'charter_get_artifact', lineage.charter_get_artifact, true},
    {'charter_lineage_summary', lineage.charter_lineage_summary, true},
    {'charter_input_facts', lineage.charter_input_facts, true},
    {'charter_audit_summaries', lineage.charter_audit_summaries, true},
    {'charter_seal_summary', lineage.charter_seal_summary, false},
    {'charter_ancestry', lineage.charter_ancestry, true},
    {'charter_lineage_state', lineage.charter_lineage_state, true},
    {'charter_grant_chain', grants.charter_grant_chain, true},
    {'charter_append_event', events.charter_append_event, false},
    {'charter_get_event', events.charter_get_event, true},
    {'charter_audit_events', events.charter_audit_events, true},
    {'charter_find_delivery', delivery.charter_find_delivery, true},
    {'charter_delivery_facts', delivery.charter_delivery_facts, true},
    {'charter_invoke_facts', delivery.charter_invoke_facts, true},
    {'charter_commit_delivery', delivery.charter_commit_delivery, false},
    {'charter_revoke_grant', grants.charter_revoke_grant, false},
    {'charter_restore_grants', grants.charter_restore_grants, false},
    {'charter_integrity', graph.charter_integrity, false},
    {'charter_integrity_state', graph.charter_integrity_state, true},
    {'charter_keyless_runs', graph.charter_keyless_runs, true},
    {'charter_adopt_key', graph.charter_adopt_key, false},
    {'charter_get_receipt', runs.charter_get_receipt, true},
    {'charter_attach_receipt', runs.charter_attach_receipt, false},
    {'charter_put_workflow', workflows.charter_put_workflow, false},
    {'charter_seed_clash', workflows.charter_seed_clash, true},
    {'charter_get_workflow', workflows.charter_get_workflow, true},
    {'charter_list_workflows', workflows.charter_list_workflows, true},
    {'charter_run_workflow', workflows.charter_run_workflow, true},
    {'charter_scope_context', workflows.charter_scope_context, false},
    {'charter_blob_exists', blobs.charter_blob_exists, true},
    {'charter_put_blob', blobs.charter_put_blob, false},
    {'charter_get_blob', blobs.charter_get_blob, true},
    {'charter_enqueue_run', executor.charter_enqueue_run, false},
    {'charter_claim_run', executor.charter_claim_run, false},
    {'charter_request_recovery', executor.charter_request_recovery, false},
    {'charter_renew_lease', executor.charter_renew_lease, false},
    {'charter_release_lease', executor.charter_release_lease, false},
    {'charter_reap_leases', executor.charter_reap_leases, false},
    {'charter_request_cancel', executor.charter_request_cancel, false},
    {'charter_cancel_unclaimed', executor.charter_cancel_unclaimed, false},
    {'charter_list_leases', executor.charter_list_leases, true},
    {'charter_request_approval', approvals.charter_request_approval, false},
    {'charter_get_approval', approvals.charter_get_approval, true},
    {'charter_list_approvals', approvals.charter_list_approvals, true},
    {'charter_decide_approval', approvals.charter_decide_approval, false},
    {'charter_complete_run', external.charter_complete_run, false},
    {'charter_save_checkpoint', checkpoints.charter_save_checkpoint, false},
    {'charter_get_checkpoint', checkpoints.charter_get_checkpoint, true},
    {'charter_resume_run', checkpoints.charter_resume_run, false},
    {'charter_retrieval_ingest', retrieval.charter_retrieval_ingest, false},
    {'charter_retrieval_bind_scope', retrieval.charter_retrieval_bind_scope, false},
    {'charter_retrieval_get_scope', retrieval.charter_retrieval_get_scope, true},
    {'charter_retrieval_search', retrieval.charter_retrieval_search, false},
    {'charter_retrieval_get_search', retrieval.charter_retrieval_get_search, true},
    {'charter_retrieval_link', retrieval.charter_retrieval_link, false},
    {'charter_retrieval_trace', retrieval.charter_retrieval_trace, true},
    {'charter_retrieval_checkpoint', retrieval.charter_retrieval_checkpoint, false},
    {'charter_retrieval_get_checkpoint', retrieval.charter_retrieval_get_checkpoint, true},
    {'charter_graph_claim', tenants.charter_graph_claim, false},
    {'charter_tenant_create', tenants.charter_tenant_create, false},
    {'charter_tenant_list', tenants.charter_tenant_list, true},
    {'charter_tenant_names', tenants.charter_tenant_names, true},
    {'charter_tenant_admit', tenants.charter_tenant_admit, false},
    {'charter_credential_issue', tenants.charter_credential_issue, false},
    {'charter_credential_list', tenants.charter_credential_list, true},
    {'charter_credential_revoke', tenants.charter_credential_revoke, false},
    {'charter_quota_take', tenants.charter_quota_take, false},
    {'charter_quota_release', tenants.charter_quota_release, false},
    {'charter_put_lineage', lineage_records.charter_put_lineage, false},
    {'charter_lineage_records', lineage_records.charter_lineage_records, true},
    {'charter_lineage_get', lineage_records.charter_lineage_get, true},
    {'charter_run_export', archive.charter_run_export, true},
    {'charter_remove_run', archive.charter_remove_run, false},
    {'charter_archived_invocations', archive.charter_archived_invocations, true},
    {'charter_archived_run', archive.charter_archived_run, true},
    {'charter_retention_lease', archive.charter_retention_lease, false},
    {'charter_retention_due', archive.charter_retention_due, true},
}

-- Only redis.* exists while the library loads (no ipairs, type or error), hence the counted loop.
-- A row naming a function no module exported passes nil, which register_function refuses, so
-- FUNCTION LOAD fails and charterd says so.
for i = 1, #FUNCTIONS do
    local f = FUNCTIONS[i]
    register(f[1], f[2], f[3])
end
end
