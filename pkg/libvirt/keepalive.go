package libvirt

import (
	"context"
	"fmt"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
)

// keepAlive detects a dead peer. Any frame from libvirtd counts as a sign of life; after
// interval of silence the client pings (libvirt's keepalive program, which libvirtd always
// answers), and after count intervals of silence it declares the peer dead, which fails every
// pending call at once. A TCP connection to a vanished host would otherwise hang until the
// kernel gives up, minutes later.
func (c *Client) keepAlive(interval time.Duration, count int) {
	tick := time.NewTicker(interval / 4)
	defer tick.Stop()
	var lastPing time.Time
	for {
		select {
		case <-c.done:
			return
		case now := <-tick.C:
			idle := now.Sub(time.Unix(0, c.lastRecv.Load()))
			if idle >= interval*time.Duration(count) {
				c.fail("keepalive", fmt.Errorf("libvirtd sent nothing for %s (keepalive: %d × %s)", idle.Round(time.Millisecond), count, interval))
				return
			}
			if idle >= interval && now.Sub(lastPing) >= interval {
				c.queueKeepAlive(keepAliveProcPing)
				lastPing = now
			}
		}
	}
}

// queueKeepAlive hands a PING or PONG to keepAliveSender without blocking: if several are
// already queued, one more adds nothing (any message proves liveness).
func (c *Client) queueKeepAlive(proc procedure) {
	select {
	case c.kaOut <- proc:
	default:
	}
}

// keepAliveSender writes keepalive messages. It runs apart from the dead-peer check so that
// a write stuck behind a wedged peer cannot also stop that check.
func (c *Client) keepAliveSender() {
	for {
		select {
		case proc := <-c.kaOut:
			if c.send(context.Background(), keepAliveFrame(proc)) != nil {
				return
			}
		case <-c.done:
			return
		}
	}
}

// keepAliveFrame builds a keepalive message: no payload, serial 0, type Message.
func keepAliveFrame(proc procedure) []byte {
	b := make([]byte, wire.MinFrame)
	wire.PutHeader(b, wire.Header{
		Program:   wire.ProgramKeepAlive,
		Version:   keepAliveProtocolVersion,
		Procedure: int32(proc),
		Type:      wire.Message,
		Status:    wire.OK,
	})
	return b
}
