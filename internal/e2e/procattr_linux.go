package e2e

import "syscall"

// childProcAttr makes child processes die with the test process, so an
// interrupted or timed-out test leaves no servers behind.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
