package proxy

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel send the server SIGTERM should the wrap
// die without passing a signal on (a client that kills it with SIGKILL),
// so no server is left running without its client.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}
