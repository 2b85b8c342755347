package libvirt

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// fullLimiter never has a free slot: Acquire waits until ctx ends.
type fullLimiter struct{ asked int }

func (l *fullLimiter) Acquire(ctx context.Context) (func(), error) {
	l.asked++
	<-ctx.Done()
	return nil, ctx.Err()
}

// Both upload paths wait for the limiter before anything goes to the host: with no free slot
// they give up at the caller's deadline. The Client has no connection, so an upload that did
// not wait would fail differently (or panic), not with the deadline.
func TestUploadsWaitForTheLimiter(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "vol")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for name, upload := range map[string]func(ctx context.Context, c *Client) error{
		"StorageVolUpload": func(ctx context.Context, c *Client) error {
			return c.StorageVolUpload(ctx, StorageVol{Name: "v"}, bytes.NewReader([]byte("x")), 1, nil)
		},
		"StorageVolUploadSparse": func(ctx context.Context, c *Client) error {
			return c.StorageVolUploadSparse(ctx, StorageVol{Name: "v"}, f, nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := &fullLimiter{}
			c := &Client{uploads: l}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if err := upload(ctx, c); !errors.Is(err, context.DeadlineExceeded) || l.asked != 1 {
				t.Errorf("upload with no free slot = %v after %d Acquire calls; want the deadline after 1", err, l.asked)
			}
		})
	}
}
