package api

// Hard limits on what one request may carry. They bound the memory and time a
// request can cost the dispatcher; input beyond them is rejected with an error
// naming the limit, never truncated.
const (
	// MaxBodyBytes is the largest request body accepted, after decompression.
	MaxBodyBytes = 64 << 20
	// MaxItemsPerRequest is the most jobs (or capbox requests) in one request.
	MaxItemsPerRequest = 100_000
	// MaxProblems is the most problems one error lists; the rest are counted.
	MaxProblems = 100

	// MaxNameLen is the longest job, task group, container, queue, pool or
	// node name.
	MaxNameLen = 253
	// MaxStringLen is the longest free-form string: a path, a command
	// argument, an environment value, a label value, a message.
	MaxStringLen = 4096
	// MaxIdempotencyKeyLen is the longest idempotency key.
	MaxIdempotencyKeyLen = 128

	// MaxCapboxIDLen is the longest capbox ID a capbox task may name.
	MaxCapboxIDLen = 64
	// MaxTasksPerCapbox is the most tasks an appmaster may start in one
	// capbox over its life.
	MaxTasksPerCapbox = 10_000

	// MaxTaskGroups is the most task groups in one job.
	MaxTaskGroups = 64
	// MaxTaskCount is the most tasks in one task group (an array job).
	MaxTaskCount = 10_000_000
	// MaxContainersPerPod is the most containers in one pod.
	MaxContainersPerPod = 16
	// MaxArgs is the most elements of a container's command plus args.
	MaxArgs = 256
	// MaxEnv is the most environment variables of one container.
	MaxEnv = 256
	// MaxLabels is the most labels on one job or node.
	MaxLabels = 64
	// MaxLabelKeyLen is the longest label key.
	MaxLabelKeyLen = 128
	// MaxConstraints is the most constraints on one job or capbox request.
	MaxConstraints = 32
	// MaxConstraintValues is the most values one constraint may list.
	MaxConstraintValues = 64
	// MaxPreferredNodes is the most preferred (data-local) nodes of a task
	// group or capbox request.
	MaxPreferredNodes = 64
	// MaxPorts is the most ports one container may ask for.
	MaxPorts = 64
	// MaxVolumesPerPod is the most volumes of a pod, and the most mounts
	// of one of its containers.
	MaxVolumesPerPod = 32
	// MaxPluginRefs is the most filters, and separately scorers, in a policy.
	MaxPluginRefs = 16

	// MaxPriority is the highest job priority; priorities run from 0 to it.
	MaxPriority = 1000
	// MaxScorerWeight is the largest weight of a scorer in a policy.
	MaxScorerWeight = 100
	// MaxQueueWeight is the largest fair-share weight of a queue.
	MaxQueueWeight = 1000
	// MaxAttempts is the largest retry limit of a job.
	MaxAttempts = 100

	// MaxCPU is the most CPU one container may ask for, in millicores.
	MaxCPU = 1024 * 1000
	// MaxMemory is the most memory one container may ask for, in bytes.
	MaxMemory = 64 << 40
	// MaxGPUs is the most GPUs one container may ask for.
	MaxGPUs = 64
	// MaxDisk is the most disk one container may ask for, in bytes.
	MaxDisk = 1 << 50
)
