package app

import "syscall"

// childAttr makes the kernel kill a child platform process if the test
// binary dies first (a timeout panic, a ^C), so no server outlives its test.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
