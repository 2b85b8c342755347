package main

import "context"

// runOnStop runs its function when the manager stops, on every replica (leader or not).
type runOnStop func()

func (f runOnStop) Start(ctx context.Context) error {
	<-ctx.Done()
	f()
	return nil
}

func (runOnStop) NeedLeaderElection() bool { return false }
