// Package labhost connects tests to the lab libvirtd (hack/libvirt-lab.sh) with the client
// credentials it trusts. It is apart from internal/testenv so the controller's tests, which use
// testenv, never link pkg/libvirt.
package labhost

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// Dialer reaches the lab host as a trusted client.
func Dialer(t testing.TB, lab testenv.LibvirtLab) libvirt.Dialer {
	t.Helper()
	ep, err := libvirt.ParseEndpoint(lab.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := libvirt.NewCredentials(lab.Read(t, "cacert.pem"), lab.Read(t, "clientcert.pem"), lab.Read(t, "clientkey.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return libvirt.Dialer{Endpoint: ep, Credentials: creds}
}

// Dial connects to the lab host and closes the connection when t ends. It retries for up to
// 30 s: a test that restarted libvirtd, or another suite that did, leaves it briefly away.
func Dial(t testing.TB, lab testenv.LibvirtLab) *libvirt.Client {
	t.Helper()
	d := Dialer(t, lab)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := d.Dial(ctx)
		cancel()
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("dialling the lab host: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// VolumeNames lists the volumes of a pool on the host, sorted. libvirtd refuses a refresh while
// an upload into the pool runs (a seed or an import); volumes created through libvirt are listed
// without one, so that refusal is not a failure.
func VolumeNames(ctx context.Context, t testing.TB, c *libvirt.Client, poolName string) []string {
	t.Helper()
	pool, err := c.StoragePoolLookupByName(ctx, poolName)
	if err != nil {
		t.Fatal(err)
	}
	var remote *libvirt.Error
	if err := c.StoragePoolRefresh(ctx, pool); err != nil && !errors.As(err, &remote) {
		t.Fatal(err)
	}
	vols, err := c.StoragePoolListAllVolumes(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(vols))
	for _, v := range vols {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	return names
}
