// Package labhost connects tests to the lab libvirtd (hack/libvirt-lab.sh) with the client
// credentials it trusts. It is apart from internal/testenv so the controller's tests, which use
// testenv, never link pkg/libvirt.
package labhost

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// CreatePool starts a transient dir pool name under the lab's pools/ directory through host. When
// t ends its volumes are deleted, the pool destroyed (a transient pool is then gone) and the
// directory removed, over a new connection and with the pool looked up by name: libvirtd may
// have restarted meanwhile.
func CreatePool(ctx context.Context, t testing.TB, host *libvirt.Client, lab testenv.LibvirtLab, name string) libvirt.StoragePool {
	t.Helper()
	dir := filepath.Join(lab.Dir, "pools", name)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	var def strings.Builder
	def.WriteString("<pool type='dir'><name>")
	_ = xml.EscapeText(&def, []byte(name)) // a strings.Builder never fails a write
	def.WriteString("</name><target><path>")
	_ = xml.EscapeText(&def, []byte(dir))
	def.WriteString("</path></target></pool>")
	pool, err := host.StoragePoolCreateXML(ctx, def.String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	d := Dialer(t, lab)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A connection of its own: host may be closed by now (a test that restarts libvirtd
		// redials).
		host, err := d.Dial(ctx)
		if err != nil {
			return
		}
		defer host.Close()
		if p, err := host.StoragePoolLookupByName(ctx, name); err == nil {
			if vols, err := host.StoragePoolListAllVolumes(ctx, p); err == nil {
				for _, v := range vols {
					_ = host.StorageVolDelete(ctx, v)
				}
			}
			_ = host.StoragePoolDestroy(ctx, p)
		}
		_ = os.RemoveAll(dir)
	})
	return pool
}

// RemoveDomains destroys and undefines every domain on the host whose name starts with prefix:
// what a failed run left behind (a define that timed out on the test's side may still have
// completed on the daemon's). Best effort, for cleanups.
func RemoveDomains(ctx context.Context, host *libvirt.Client, prefix string) {
	doms, err := host.ListAllDomains(ctx)
	if err != nil {
		return
	}
	for _, d := range doms {
		if strings.HasPrefix(d.Name, prefix) {
			_ = host.DomainDestroy(ctx, d)
			_ = host.DomainUndefine(ctx, d, libvirt.UndefineManagedSave|libvirt.UndefineNVRAM|libvirt.UndefineTPM)
		}
	}
}

// UploadRaw puts a local file into poolName as a raw volume named name, holes kept as holes.
func UploadRaw(ctx context.Context, t testing.TB, host *libvirt.Client, poolName, name, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := host.StoragePoolLookupByName(ctx, poolName)
	if err != nil {
		t.Fatal(err)
	}
	var def strings.Builder
	def.WriteString("<volume type='file'><name>")
	_ = xml.EscapeText(&def, []byte(name)) // a strings.Builder never fails a write
	fmt.Fprintf(&def, "</name><capacity unit='bytes'>%d</capacity><allocation unit='bytes'>0</allocation>"+
		"<target><format type='raw'/></target></volume>", fi.Size())
	vol, err := host.StorageVolCreateXML(ctx, pool, def.String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := host.StorageVolUploadSparse(ctx, vol, f, nil); err != nil {
		t.Fatalf("uploading %s: %v", name, err)
	}
}
