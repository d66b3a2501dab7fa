package sandbox

import (
	"errors"
	"fmt"

	"github.com/sealrun/sealrun/sandbox/cgroup"
)

// InfraError is a failure of the infrastructure — the runtime, cgroups, network namespaces,
// mounts, the UID range records — as opposed to anything the contained command did. A run that
// meets one is the host's fault: the daemon marks it invalid and reruns it. Anything a command
// does (a non-zero exit, a signal, an OOM kill, a limit) is an exit status, never an InfraError.
type InfraError struct {
	Container string // the container or run it happened to
	Op        string // what was being done ("start", "kill", "cgroup remove", ...)
	Err       error
}

func (e *InfraError) Error() string {
	return fmt.Sprintf("sandbox infrastructure failure (%s %s): %v", e.Op, e.Container, e.Err)
}

func (e *InfraError) Unwrap() error { return e.Err }

// IsInfra reports whether err is (or wraps) an InfraError.
func IsInfra(err error) bool {
	var ie *InfraError
	return errors.As(err, &ie)
}

func infra(container, op string, err error) error {
	if err == nil {
		return nil
	}
	if IsInfra(err) {
		return err
	}
	return &InfraError{Container: container, Op: op, Err: err}
}

// CommandError: the container started but its command could not be executed (not found, not
// executable, a bad working directory). The caller's fault, like a non-zero exit.
type CommandError struct {
	Container string
	Message   string // the runtime's own words
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("container %s: the command could not be run: %s", e.Container, e.Message)
}

// Sentinels callers branch on.
var (
	// ErrRunInUse: a run with this id is live on this machine (this host's or another's).
	ErrRunInUse = errors.New("run id in use")
	// ErrBadConfig: a container or limits configuration that can never start.
	ErrBadConfig = cgroup.ErrBadConfig // "bad sandbox configuration", shared with sandbox/cgroup
	// ErrNeverRan: the container's process never ran — the runtime failed to create or start it,
	// or its init failed after the network hook and before the process was executed. Always
	// wrapped in an InfraError: nothing of the caller's ran, so the caller may start it again.
	ErrNeverRan = errors.New("the container's process never ran")
)

// NeverRan reports whether err says a container's process never ran (ErrNeverRan).
func NeverRan(err error) bool { return errors.Is(err, ErrNeverRan) }
