//go:build !linux

package genkitmodel

import (
	"errors"
	"syscall"
)

// raise is Linux only (tgkill): elsewhere TestSignalHandling skips.
func raise(syscall.Signal) error { return errors.ErrUnsupported }
