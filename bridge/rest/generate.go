package rest

// The adapters of the other slurmrestd API versions are copies of
// adapter_v0042.go with the version renamed. Edit adapter_v0042.go, then
// run `go generate ./bridge/rest`; TestGeneratedAdaptersAreCurrent fails
// while a generated file lags behind. What one version has and the others
// lack goes in a hand-written file (requeue_v0045.go).
//
// Renaming is enough because, in slurm-client v1.2.0's generated types and
// OpenAPI specs (api/v0042 to api/v0045), every field the adapters read or
// write has the same JSON name and type in v0.0.42, v0.0.43, v0.0.44 and
// v0.0.45:
//
//   - job records: job_id, user_name, account, qos, name, partition,
//     job_state (base state then flags), state_reason, tres_per_node,
//     tres_per_job (GRES strings), features (the constraint), restart_cnt,
//     hold, requeue, comment, node_count, priority (a uint32 no-val struct
//     whose number is still int32 in all four: see clampPriority),
//     submit_time, start_time, gres_detail, job_resources.nodes.allocation,
//     array_job_id, array_task_id, array_max_tasks, het_job_id and
//     het_job_offset (uint32 no-val structs), array_task_string;
//   - node records: name, gres, gres_used, partitions, features, state;
//   - job updates: priority, hold, constraints, minimum_nodes,
//     maximum_nodes, tres_per_node, tres_per_job, begin_time, array (a
//     string: the number alone sets the array's limit);
//   - slurmdbd's QOS (GET /slurmdb/qos): name, limits.max.tres.total,
//     limits.max.tres.per.{user,account,job} (TRES lists: type, name,
//     count), limits.max.active_jobs.count and
//     limits.max.jobs.active_jobs.per.{user,account} (uint32 no-val
//     structs); associations (GET /slurmdb/associations, query parameter
//     cluster): cluster, account, user, partition, parent_account,
//     shares_raw, qos, default.qos, max.tres.total, max.tres.per.job,
//     max.jobs.active, max.jobs.per.count; and every reply's
//     meta.slurm.cluster;
//   - DELETE job with signal and flags=FULL_JOB (the same flag list), ping,
//     and the errors[] entries. The path's job id is a string in all four,
//     so a task of a job array is named ARRAY_TASK (slurmrestd 24.11
//     accepts that name in DELETE; POST answers it with "Submit job update
//     against Array Job's JobID instead of array task id", so updates name
//     the record's own id, which changes that record alone).
//
// What differs between the versions, none of it read here:
//
//   - job_state gains EXPEDITING in v0.0.44; node state gains BLOCKED and
//     EXTERNAL in v0.0.44, POWER_DOWN_ASAP and POWER_DOWN_FORCE in v0.0.45
//     (states pass through as strings);
//   - v0.0.43 on document that the no-val time structs also accept time
//     strings; descriptions are reworded ("Comma-separated");
//   - the ping record drops the deprecated pinged and mode fields and gains
//     status in v0.0.45;
//   - the /slurmdb/ qos and associations queries drop the ignored format
//     parameter in v0.0.45;
//   - v0.0.45 adds GET /slurm/v0.0.45/job/{job_id}/requeue (query flags
//     Incomplete, Hold, SpecialExit) and POST /slurm/v0.0.45/jobs/requeue,
//     answered with a status[] of per-job results and errors[]. No earlier
//     version can requeue, so requeues go through scontrol there.

//go:generate sh gen_adapters.sh
