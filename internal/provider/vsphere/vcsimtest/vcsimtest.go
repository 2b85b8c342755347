// Package vcsimtest starts an in-process vcsim (govmomi's vCenter simulator) for tests, serving
// TLS with a certificate of a CA of the test's own, so that clients verify the server as they
// would a real vCenter, and acts on it out of band as a person in the vSphere Client would.
package vcsimtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator" // the tagging endpoints
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// The inventory of Start: one datacenter DC0 with one cluster DC0_C0 of two hosts, a template,
// a folder Folder for the machines, a datastore and two port groups every host reaches.
const (
	Username      = "banlieue@vsphere.local"
	Password      = "s3cret-Pa55"
	Datacenter    = "DC0"
	Folder        = "banlieue"
	Template      = "/DC0/vm/DC0_C0_RP0_VM0" // marked as template, powered off, one disk
	FailureDomain = "dc0.dc0-c0"             // vcenter.DomainName("DC0", "DC0_C0")
	Datastore     = "LocalDS_0"
	Network       = "VM Network"
	Network2      = "DC0_DVPG0"
)

// Sim is a running simulator and an administrator's session on it.
type Sim struct {
	URL   string // https://127.0.0.1:port/sdk
	CAPEM []byte
	// Admin is a session of its own, for the changes a test makes out of band.
	Admin *vim25.Client
}

// Start starts the simulator for the test's lifetime.
func Start(t testing.TB) *Sim {
	t.Helper()
	m, err := NewModel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Remove)
	caPEM, cert := ServingCA(t)
	m.Service.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	m.Service.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword(Username, Password)}
	m.Service.RegisterEndpoints = true
	srv := m.Service.NewServer()
	t.Cleanup(srv.Close)
	s := &Sim{URL: "https://" + srv.URL.Host + "/sdk", CAPEM: caPEM}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	ctx := Context(t)
	if s.Admin, err = Login(ctx, s.URL, roots, Username, Password); err != nil {
		t.Fatal(err)
	}
	if err := PrepareInventory(ctx, s.Admin); err != nil {
		t.Fatal(err)
	}
	return s
}

// NewModel creates the inventory of Start (vcsim's VPX model, one cluster of two hosts, one
// machine), not yet served: the caller sets its TLS and listen address.
func NewModel() (*simulator.Model, error) {
	m := simulator.VPX()
	m.ClusterHost, m.Host, m.Machine = 2, 0, 1
	if err := m.Create(); err != nil {
		return nil, fmt.Errorf("vcsim inventory: %w", err)
	}
	return m, nil
}

// Login opens an administrator's session on the simulator at sdk, verifying the server against
// roots only.
func Login(ctx context.Context, sdk string, roots *x509.CertPool, user, password string) (*vim25.Client, error) {
	u, err := url.Parse(sdk)
	if err != nil {
		return nil, err
	}
	sc := soap.NewClient(u, false)
	tr := sc.DefaultTransport()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	tr.DialTLSContext = (&tls.Dialer{Config: tr.TLSClientConfig}).DialContext
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("connect to vcsim: %w", err)
	}
	if err := session.NewManager(c).Login(ctx, url.UserPassword(user, password)); err != nil {
		return nil, fmt.Errorf("log in to vcsim: %w", err)
	}
	return c, nil
}

// PrepareInventory turns the model's one machine into a powered-off template (Template) and makes
// the folder Folder for the machines, as an administrator.
func PrepareInventory(ctx context.Context, c *vim25.Client) error {
	finder := find.NewFinder(c, true)
	tpl, err := finder.VirtualMachine(ctx, Template)
	if err != nil {
		return fmt.Errorf("find the template: %w", err)
	}
	task, err := tpl.PowerOff(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("power off the template: %w", err)
	}
	if err := tpl.MarkAsTemplate(ctx); err != nil {
		return fmt.Errorf("mark the template: %w", err)
	}
	vmFolder, err := finder.Folder(ctx, "/"+Datacenter+"/vm")
	if err != nil {
		return fmt.Errorf("find /%s/vm: %w", Datacenter, err)
	}
	if _, err := vmFolder.CreateFolder(ctx, Folder); err != nil {
		return fmt.Errorf("create the folder %s: %w", Folder, err)
	}
	return nil
}

// Context is a context bounded to a minute, cancelled with the test.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Ref finds an object by absolute inventory path.
func (s *Sim) Ref(t testing.TB, path string) types.ManagedObjectReference {
	t.Helper()
	ref, err := object.NewSearchIndex(s.Admin).FindByInventoryPath(Context(t), path)
	if err != nil || ref == nil {
		t.Fatalf("find %s: %v", path, err)
	}
	return ref.Reference()
}

// VM reads a virtual machine's properties by absolute inventory path; nil when there is none.
func (s *Sim) VM(t testing.TB, path string) *mo.VirtualMachine {
	t.Helper()
	ctx := Context(t)
	ref, err := object.NewSearchIndex(s.Admin).FindByInventoryPath(ctx, path)
	if err != nil {
		t.Fatalf("find %s: %v", path, err)
	}
	if ref == nil {
		return nil
	}
	var vm mo.VirtualMachine
	err = property.DefaultCollector(s.Admin).RetrieveOne(ctx, ref.Reference(),
		[]string{"name", "config", "runtime.powerState", "guest"}, &vm)
	if fault.Is(err, &types.ManagedObjectNotFound{}) {
		return nil // deleted between the search and the read
	}
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return &vm
}

// TemplateDiskGiB is the size of the template's one disk in whole GiB, rounded down.
func (s *Sim) TemplateDiskGiB(t testing.TB) int32 {
	t.Helper()
	vm := s.VM(t, Template)
	disks := object.VirtualDeviceList(vm.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil))
	if len(disks) != 1 {
		t.Fatalf("template has %d disks, want 1", len(disks))
	}
	return int32(disks[0].(*types.VirtualDisk).CapacityInBytes >> 30)
}

// ExtraConfig is a virtual machine's extraConfig as a map.
func ExtraConfig(vm *mo.VirtualMachine) map[string]string {
	out := map[string]string{}
	if vm == nil || vm.Config == nil {
		return out
	}
	for _, b := range vm.Config.ExtraConfig {
		if ov := b.GetOptionValue(); ov != nil {
			if v, ok := ov.Value.(string); ok {
				out[ov.Key] = v
			}
		}
	}
	return out
}

// Names lists the names of the virtual machines directly in a folder, sorted.
func (s *Sim) Names(t testing.TB, folder string) []string {
	t.Helper()
	ctx := Context(t)
	var f mo.Folder
	if err := property.DefaultCollector(s.Admin).RetrieveOne(ctx, s.Ref(t, folder), []string{"childEntity"}, &f); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range f.ChildEntity {
		if c.Type != "VirtualMachine" {
			continue
		}
		// A machine deleted between the two reads is no longer in the folder.
		var vm mo.VirtualMachine
		err := property.DefaultCollector(s.Admin).RetrieveOne(ctx, c, []string{"name"}, &vm)
		if fault.Is(err, &types.ManagedObjectNotFound{}) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, vm.Name)
	}
	sort.Strings(names)
	return names
}

// ReportGuest makes vcsim report what VMware Tools report from a booted guest: an address and
// Tools running.
func (s *Sim) ReportGuest(t testing.TB, path, ip string) {
	t.Helper()
	s.reconfigure(t, path, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
		&types.OptionValue{Key: "SET.guest.ipAddress", Value: ip},
		&types.OptionValue{Key: "SET.guest.toolsRunningStatus", Value: string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)},
	}})
}

func (s *Sim) reconfigure(t testing.TB, path string, spec types.VirtualMachineConfigSpec) {
	t.Helper()
	ctx := Context(t)
	task, err := object.NewVirtualMachine(s.Admin, s.Ref(t, path)).Reconfigure(ctx, spec)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("reconfigure %s: %v", path, err)
	}
}

// PowerOff cuts a virtual machine's power out of band.
func (s *Sim) PowerOff(t testing.TB, path string) {
	t.Helper()
	ctx := Context(t)
	task, err := object.NewVirtualMachine(s.Admin, s.Ref(t, path)).PowerOff(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("power off %s: %v", path, err)
	}
}

// CreateForeign creates a powered-off virtual machine name in folder that banlieue did not
// create (no proof of owner), as a person would, with one marker key in its extraConfig.
func (s *Sim) CreateForeign(t testing.TB, folder, name string) {
	t.Helper()
	ctx := Context(t)
	pool := object.NewResourcePool(s.Admin, s.Ref(t, "/DC0/host/DC0_C0/Resources"))
	task, err := object.NewFolder(s.Admin, s.Ref(t, folder)).CreateVM(ctx, types.VirtualMachineConfigSpec{
		Name: name, GuestId: "otherGuest64", NumCPUs: 1, MemoryMB: 128,
		Files:       &types.VirtualMachineFileInfo{VmPathName: "[" + Datastore + "]"},
		ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: "person.marker", Value: "mine"}},
	}, pool, nil)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("create %s/%s: %v", folder, name, err)
	}
}

// ServingCA makes a CA and a server certificate for 127.0.0.1 signed by it: the CA PEM a
// client trusts, and the certificate a simulator serves.
func ServingCA(t testing.TB) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vcsim test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(2 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "vcsim"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(2 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
}

// ProviderObjects are a vsphere Provider ns/name of this simulator with capabilities, and the
// Secret (vc-creds, keys username and password) and CA ConfigMap (vc-ca) it names, as a person
// registers a vCenter (docs/guides/vsphere-provider.md, steps 1 and 2).
func (s *Sim) ProviderObjects(ns, name string, capabilities banlieuev1.ProviderCapabilities) []client.Object {
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vc-creds", Namespace: ns},
			StringData: map[string]string{"username": Username, "password": Password}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vc-ca", Namespace: ns}, Data: map[string]string{"ca.crt": string(s.CAPEM)}},
		&banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "vsphere"},
			Connection: banlieuev1.ProviderConnection{Endpoint: s.URL,
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "vc-creds"},
				CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "vc-ca"}}},
			Capabilities: capabilities}},
	}
}

// DatastoreSpace reads the datastore name's summary in DC0: its capacity and free space in
// bytes, as vCenter reports them.
func (s *Sim) DatastoreSpace(t testing.TB, name string) (capacity, free int64) {
	t.Helper()
	var ds mo.Datastore
	if err := property.DefaultCollector(s.Admin).RetrieveOne(Context(t), s.Ref(t, "/"+Datacenter+"/datastore/"+name),
		[]string{"summary"}, &ds); err != nil {
		t.Fatalf("read datastore %s: %v", name, err)
	}
	return ds.Summary.Capacity, ds.Summary.FreeSpace
}
