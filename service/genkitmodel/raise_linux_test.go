package genkitmodel

import (
	"runtime"
	"syscall"
)

// raise sends sig to the calling thread and returns once the thread has
// taken it: a signal tgkill sends to its own unblocked thread is delivered
// before the call returns, and Go's handler for a signal nobody is
// notified of (SIGTERM after signal.Reset) kills the process right there.
// So a process that returns from raise survived the signal, with no wait
// to see whether it dies.
func raise(sig syscall.Signal) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), sig)
}
