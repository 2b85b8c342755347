package libvirt

import "context"

// UploadLimiter bounds the volume uploads a Client streams at once, across every Client that
// shares it: Acquire waits for a slot for as long as ctx allows and returns the function that
// gives it back. A host that takes many uploads at once spends its disk and network on all of
// them together, and each takes the longer; a Dialer that redials keeps its limiter, so the
// bound holds across connections to one host.
type UploadLimiter interface {
	Acquire(ctx context.Context) (release func(), err error)
}

// acquireUpload takes an upload slot from the Client's limiter, if it has one.
func (c *Client) acquireUpload(ctx context.Context) (func(), error) {
	if c.uploads == nil {
		return func() {}, nil
	}
	return c.uploads.Acquire(ctx)
}
