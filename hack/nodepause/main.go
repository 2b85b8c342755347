// Command nodepause is the node's pod sandbox ("pause") process: it holds the pod's namespaces
// until it is told to stop. No registry is reachable from the lab, so hack/node.sh packs this
// into the sandbox image containerd is pinned to instead of pulling registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	// As PID 1 of the pod it inherits orphans; reaping them keeps zombies from piling up.
	signal.Notify(stop, syscall.SIGCHLD)
	for sig := range stop {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
