package bridge

// Accounting is what slurmdbd says about the site's caps on GPUs and
// running jobs, and its fair-share tree: the QOS and association limits
// Slurm enforces (AccountingStorageEnforce=limits) before it starts a job.
// The daemon reads them each round so that a job its limits would stop is
// never chosen and no GPU is kept for it (docs/limits.md).
//
// Only caps on what runs at once matter here: GPUs (gres/gpu) held and
// jobs running. Caps on submitted jobs, minutes or CPUs are Slurm's to
// judge at submission or show as the job's reason.
type Accounting struct {
	// QOS by name, sorted.
	QOS []QOSLimits `json:"qos,omitempty"`
	// Associations of this cluster, sorted by account, then user, then
	// partition; an account's own association has no user.
	Associations []Association `json:"associations,omitempty"`
}

// NoLimit marks a cap that is not set (Slurm's "infinite" or unset).
const NoLimit = -1

// QOSLimits are one QOS's caps on what runs at once. Each is NoLimit
// when not set.
type QOSLimits struct {
	Name string `json:"name"`
	// MaxGPUsPerUser, MaxGPUsPerAccount: GPUs the running jobs of one
	// user (one account) in this QOS may hold (MaxTRESPerUser,
	// MaxTRESPerAccount gres/gpu). GrpGPUs: GPUs all its running jobs may
	// hold (GrpTRES gres/gpu).
	MaxGPUsPerUser    int `json:"max_gpus_per_user"`
	MaxGPUsPerAccount int `json:"max_gpus_per_account"`
	GrpGPUs           int `json:"grp_gpus"`
	// MaxJobsPerUser, MaxJobsPerAccount, GrpJobs: running jobs (MaxJobsPU,
	// MaxJobsPA, GrpJobs).
	MaxJobsPerUser    int `json:"max_jobs_per_user"`
	MaxJobsPerAccount int `json:"max_jobs_per_account"`
	GrpJobs           int `json:"grp_jobs"`
	// MaxGPUsPerJob: a job asking for more never starts in this QOS
	// (MaxTRESPerJob gres/gpu).
	MaxGPUsPerJob int `json:"max_gpus_per_job"`
}

// Association is one association: an account's own (User empty) or a
// user's in an account, on the whole cluster or one partition.
type Association struct {
	Account   string `json:"account"`
	User      string `json:"user,omitempty"`
	Partition string `json:"partition,omitempty"`
	// ParentAccount is the account above: for a user's association its
	// own account, for an account's the one above it ("" for root).
	ParentAccount string `json:"parent_account,omitempty"`
	// Shares is the raw fair-share shares (sacctmgr Fairshare=), NoLimit
	// for "parent" (the user shares its account's).
	Shares int `json:"shares"`
	// GrpGPUs and GrpJobs cap the GPUs held and jobs run by all running
	// jobs of this association and every association below it (GrpTRES
	// gres/gpu, GrpJobs).
	GrpGPUs int `json:"grp_gpus"`
	GrpJobs int `json:"grp_jobs"`
	// MaxJobs caps the running jobs of each user association at or below
	// this one that sets none itself (MaxJobs).
	MaxJobs int `json:"max_jobs"`
	// MaxGPUsPerJob: a job asking for more never starts (MaxTRESPerJob
	// gres/gpu), inherited like MaxJobs.
	MaxGPUsPerJob int `json:"max_gpus_per_job"`
	// QOS the association may use, and the default one.
	QOS        []string `json:"qos,omitempty"`
	DefaultQOS string   `json:"default_qos,omitempty"`
}

// Running is a running job of the cluster outside the managed partitions,
// as much as the limits need: its GPUs count against its user's, account's
// and QOS's caps like those of the daemon's own jobs.
type Running struct {
	ID        JobID  `json:"id"`
	User      string `json:"user"`
	Account   string `json:"account,omitempty"`
	QOS       string `json:"qos,omitempty"`
	Partition string `json:"partition"`
	// GPUs held, whole; a job running on shards counts one GPU per node.
	GPUs int `json:"gpus"`
}
