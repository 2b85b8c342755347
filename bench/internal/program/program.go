//go:build bench

// Package program is what every benchmark command does alike: how it ends on an error, and how
// an interrupted run still cleans up.
package program

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// OnSignal runs cleanup and exits on SIGINT or SIGTERM, so an interrupted run leaves no pool,
// domain or API server behind.
func OnSignal(cleanup func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		fmt.Fprintln(os.Stderr, "bench: interrupted, cleaning up")
		cleanup()
		os.Exit(130)
	}()
}

// Fatal ends the benchmark with err, if there is one.
func Fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
