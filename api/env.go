package api

// The environment a node gives every container of every pod, on top of the
// container's Env. A job's Env may not set names starting with EnvPrefix.
//
// A task of a group sees all of them but EnvTaskName, EnvCapbox and, unless
// its job is an appmaster, EnvToken. A task
// an appmaster runs in a capbox (a task ID of five segments, the last its
// name) sees the job and group of its capbox, its own task ID, EnvTaskName
// and EnvCapbox, and none of EnvTaskIndex, EnvTaskCount and EnvAttempt: it
// is not one of a group's counted tasks, and is not retried.
const (
	// EnvPrefix starts the name of every variable the node sets.
	EnvPrefix = "SLUICE_"
	// EnvJobID is the job's ID.
	EnvJobID = "SLUICE_JOB_ID"
	// EnvJobName is the job's name.
	EnvJobName = "SLUICE_JOB_NAME"
	// EnvGroup is the task group's name.
	EnvGroup = "SLUICE_GROUP"
	// EnvTaskID is the task's ID with its attempt: job/group/index/attempt,
	// or, for a capbox task, its capbox's task ID and its name.
	EnvTaskID = "SLUICE_TASK_ID"
	// EnvTaskIndex is the task's index within its group, from 0.
	EnvTaskIndex = "SLUICE_TASK_INDEX"
	// EnvTaskCount is the number of tasks of the group.
	EnvTaskCount = "SLUICE_TASK_COUNT"
	// EnvAttempt is the attempt the pod runs, from 1.
	EnvAttempt = "SLUICE_ATTEMPT"
	// EnvTaskName is a capbox task's name.
	EnvTaskName = "SLUICE_TASK_NAME"
	// EnvCapbox is, for a capbox task, the task ID of its capbox.
	EnvCapbox = "SLUICE_CAPBOX"
	// EnvNode is the name of the node the pod runs on.
	EnvNode = "SLUICE_NODE"
	// EnvAddr is the dispatcher base URLs the node uses, comma-separated.
	// In a bridge-mode pod a URL whose host is loopback has it replaced
	// by EnvHostIP's address: loopback in a pod is the pod itself.
	EnvAddr = "SLUICE_ADDR"
	// EnvToken is, in the containers of an appmaster job's own task
	// groups only (not in capboxes or their tasks), the job's token
	// (TargetPod.Token): a bearer token that may read the job, lease and
	// release its capboxes and start and stop tasks in them, and nothing
	// else, until the job ends. Treat it as a secret.
	EnvToken = "SLUICE_TOKEN"
	// EnvHostIP is the node's address as other hosts and the node's pods
	// reach it; never a loopback address.
	EnvHostIP = "SLUICE_HOST_IP"
	// EnvPortPrefix starts the name of the variable, one per port of the
	// pod, that holds the port's number on the node (PortEnvName): every
	// container of a pod sees every port of the pod, its own and its
	// neighbours', since they share the pod's network. Port names are
	// required, so every port has one.
	EnvPortPrefix = "SLUICE_PORT_"
)

// ResourceMountDir is the directory where an offline pod's containers read
// the node's resource file about the pod; no volume may be mounted on or
// below it.
const ResourceMountDir = "/run/sluice"

// PortEnvName returns the variable that holds the number of the pod's
// port named name: EnvPortPrefix and the name upper-cased, '-' and '.'
// made '_' ("http-alt" is SLUICE_PORT_HTTP_ALT). Submit refuses a pod
// two of whose ports have one variable name.
func PortEnvName(name string) string {
	b := make([]byte, 0, len(EnvPortPrefix)+len(name))
	b = append(b, EnvPortPrefix...)
	for i := range len(name) {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z':
			b = append(b, c-'a'+'A')
		case c == '-' || c == '.':
			b = append(b, '_')
		default:
			b = append(b, c)
		}
	}
	return string(b)
}
