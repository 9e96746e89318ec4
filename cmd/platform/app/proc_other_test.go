//go:build !linux

package app

import "syscall"

// childAttr sets nothing outside Linux: the cleanup of each test stops its
// processes.
func childAttr() *syscall.SysProcAttr { return nil }
