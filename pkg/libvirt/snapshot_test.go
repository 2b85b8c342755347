package libvirt

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// The expected arguments are laid out by hand, field by field, as remote_protocol.x declares
// them:
//
//	struct remote_domain_snapshot_create_xml_args { remote_nonnull_domain dom;
//	    remote_nonnull_string xml_desc; unsigned int flags; };
//	struct remote_domain_snapshot_create_xml_ret { remote_nonnull_domain_snapshot snap; };
//	struct remote_nonnull_domain_snapshot { remote_nonnull_string name; remote_nonnull_domain dom; };
//	struct remote_domain_block_commit_args { remote_nonnull_domain dom; remote_nonnull_string disk;
//	    remote_string base; remote_string top; unsigned hyper bandwidth; unsigned int flags; };
//	struct remote_domain_get_block_job_info_args { remote_nonnull_domain dom;
//	    remote_nonnull_string path; unsigned int flags; };
//	struct remote_domain_get_block_job_info_ret { int found; int type; unsigned hyper bandwidth;
//	    unsigned hyper cur; unsigned hyper end; };
//	struct remote_domain_block_job_abort_args { remote_nonnull_domain dom;
//	    remote_nonnull_string path; unsigned int flags; };
//	struct remote_domain_fsfreeze_args { remote_nonnull_domain dom;
//	    remote_nonnull_string mountpoints<REMOTE_DOMAIN_FSFREEZE_MOUNTPOINTS_MAX>; unsigned int flags; };
//	struct remote_domain_fsfreeze_ret { int filesystems; };   (FSTHAW: the same)
func TestSnapshotProceduresWire(t *testing.T) {
	dom := Domain{Name: "vm-1", UUID: UUID{9, 8, 7}, ID: 4}
	var args [][]byte
	var procs []procedure
	f := startFake(t, func(s *fakeSession) {
		for {
			h, payload, err := s.read()
			if err != nil {
				return
			}
			args = append(args, payload)
			procs = append(procs, procedure(h.Procedure))
			switch procedure(h.Procedure) {
			case procDomainSnapshotCreateXML:
				s.reply(h, wire.OK, func(e *xdr.Encoder) {
					e.String("snap-1")
					encodeDomain(e, dom)
				})
			case procDomainGetBlockJobInfo:
				if len(procs) == 3 {
					s.reply(h, wire.OK, func(e *xdr.Encoder) {
						e.Int32(1)
						e.Int32(4) // VIR_DOMAIN_BLOCK_JOB_TYPE_ACTIVE_COMMIT
						e.Uint64(0)
						e.Uint64(1 << 20)
						e.Uint64(1 << 20)
					})
				} else {
					// No job: libvirt fills the rest with whatever; found is what counts.
					s.reply(h, wire.OK, func(e *xdr.Encoder) {
						e.Int32(0)
						e.Int32(3)
						e.Uint64(7)
						e.Uint64(5)
						e.Uint64(5)
					})
				}
			case procDomainFSFreeze, procDomainFSThaw:
				if len(procs) < 7 {
					s.reply(h, wire.OK, func(e *xdr.Encoder) { e.Int32(2) })
				} else {
					s.replyError(h, 86, "Guest agent is not responding: QEMU guest agent is not connected")
				}
			default:
				s.reply(h, wire.OK, nil)
			}
		}
	})
	c := f.dial(t)
	ctx := testContext(t)

	flags := SnapshotDiskOnly | SnapshotAtomic | SnapshotNoMetadata | SnapshotReuseExt
	snap, err := c.DomainSnapshotCreateXML(ctx, dom, "<domainsnapshot/>", flags)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Name != "snap-1" || snap.Domain != dom {
		t.Errorf("snapshot %+v", snap)
	}
	if err := c.DomainBlockCommit(ctx, dom, "vda", "", "", 0, BlockCommitActive|BlockCommitShallow); err != nil {
		t.Fatal(err)
	}
	info, err := c.DomainGetBlockJobInfo(ctx, dom, "vda")
	if err != nil {
		t.Fatal(err)
	}
	if want := (BlockJobInfo{Found: true, Type: BlockJobActiveCommit, Cur: 1 << 20, End: 1 << 20}); info != want || !info.Ready() {
		t.Errorf("job %+v, want %+v and ready", info, want)
	}
	if err := c.DomainBlockJobAbort(ctx, dom, "vda", BlockJobAbortPivot); err != nil {
		t.Fatal(err)
	}
	if info, err := c.DomainGetBlockJobInfo(ctx, dom, "vda"); err != nil || info != (BlockJobInfo{}) || info.Ready() {
		t.Errorf("no job: %+v %v, want the zero value", info, err)
	}
	if n, err := c.DomainFSFreeze(ctx, dom, nil); err != nil || n != 2 {
		t.Errorf("freeze: %d %v", n, err)
	}
	if err := c.DomainBlockCommit(ctx, dom, "sda", "/p/overlay.qcow2", "sda[0]", 8, BlockCommitActive); err != nil {
		t.Fatal(err)
	}
	_, err = c.DomainFSThaw(ctx, dom, []string{"/", "/var"})
	var agent *AgentError
	if !errors.Is(err, ErrGuestAgentUnavailable) || !errors.As(err, &agent) || agent.Err.Code != 86 || agent.Err.Procedure != "DOMAIN_FSTHAW" {
		t.Fatalf("thaw without an agent: %v, want ErrGuestAgentUnavailable carrying libvirtd's error 86", err)
	}

	domain := func(e *xdr.Encoder) {
		e.String("vm-1")
		e.FixedOpaque(dom.UUID[:])
		e.Int32(4)
	}
	create := xdr.NewEncoder(nil)
	domain(create)
	create.String("<domainsnapshot/>")
	create.Uint32(4 | 16 | 32 | 128) // NO_METADATA|DISK_ONLY|REUSE_EXT|ATOMIC
	commitShallow := xdr.NewEncoder(nil)
	domain(commitShallow)
	commitShallow.String("vda")
	commitShallow.Uint32(0) // base: NULL
	commitShallow.Uint32(0) // top: NULL
	commitShallow.Uint64(0)
	commitShallow.Uint32(4 | 1) // ACTIVE|SHALLOW
	jobInfo := xdr.NewEncoder(nil)
	domain(jobInfo)
	jobInfo.String("vda")
	jobInfo.Uint32(0)
	pivot := xdr.NewEncoder(nil)
	domain(pivot)
	pivot.String("vda")
	pivot.Uint32(2) // PIVOT
	freeze := xdr.NewEncoder(nil)
	domain(freeze)
	freeze.Uint32(0) // no mountpoints: all
	freeze.Uint32(0)
	commitNamed := xdr.NewEncoder(nil)
	domain(commitNamed)
	commitNamed.String("sda")
	commitNamed.Uint32(1)
	commitNamed.String("/p/overlay.qcow2")
	commitNamed.Uint32(1)
	commitNamed.String("sda[0]")
	commitNamed.Uint64(8)
	commitNamed.Uint32(4)
	thaw := xdr.NewEncoder(nil)
	domain(thaw)
	thaw.Uint32(2)
	thaw.String("/")
	thaw.String("/var")
	thaw.Uint32(0)
	want := []struct {
		proc procedure
		args []byte
	}{
		{185, create.Bytes()},
		{290, commitShallow.Bytes()},
		{238, jobInfo.Bytes()},
		{237, pivot.Bytes()},
		{238, jobInfo.Bytes()},
		{335, freeze.Bytes()},
		{290, commitNamed.Bytes()},
		{336, thaw.Bytes()},
	}
	if len(args) != len(want) {
		t.Fatalf("%d calls, want %d", len(args), len(want))
	}
	for i, w := range want {
		if procs[i] != w.proc {
			t.Errorf("call %d: procedure %d, want %d", i, procs[i], w.proc)
		}
		if !bytes.Equal(args[i], w.args) {
			t.Errorf("call %d: arguments\n got %x\nwant %x", i, args[i], w.args)
		}
	}
}

// A commit into the bottom of the chain (no base, not shallow) would write banlieue's shared
// base image; too many mountpoints would be refused by libvirtd after a round trip. Both are
// refused before anything is sent. Every other error of a freeze, and a QUIESCE snapshot's
// refusal for another reason than the agent, stays libvirtd's plain error.
func TestSnapshotRefusals(t *testing.T) {
	sent := 0
	f := startFake(t, func(s *fakeSession) {
		for {
			h, _, err := s.read()
			if err != nil {
				return
			}
			sent++
			switch procedure(h.Procedure) {
			case procDomainSnapshotCreateXML:
				if sent == 1 {
					s.replyError(h, 74, "QEMU guest agent is not configured")
				} else {
					s.replyError(h, 74, "unsupported flags")
				}
			default:
				s.replyError(h, 55, "Requested operation is not valid: domain is not running")
			}
		}
	})
	c := f.dial(t)
	ctx := testContext(t)
	if err := c.DomainBlockCommit(ctx, Domain{Name: "vm"}, "vda", "", "", 0, BlockCommitActive); err == nil || !strings.Contains(err.Error(), "never written") {
		t.Errorf("a commit into the bottom of the chain: %v, want a refusal", err)
	}
	if _, err := c.DomainFSFreeze(ctx, Domain{Name: "vm"}, make([]string, maxFSFreezeMountpoints+1)); err == nil {
		t.Error("257 mountpoints: accepted, want a refusal")
	}
	if sent != 0 {
		t.Fatalf("%d calls reached libvirtd, want none", sent)
	}
	if _, err := c.DomainSnapshotCreateXML(ctx, Domain{Name: "vm"}, "<domainsnapshot/>", SnapshotDiskOnly|SnapshotQuiesce); !errors.Is(err, ErrGuestAgentUnavailable) {
		t.Errorf("a quiesced snapshot without an agent: %v, want ErrGuestAgentUnavailable", err)
	}
	if _, err := c.DomainSnapshotCreateXML(ctx, Domain{Name: "vm"}, "<domainsnapshot/>", SnapshotDiskOnly); errors.Is(err, ErrGuestAgentUnavailable) || err == nil {
		t.Errorf("an unquiesced snapshot refused with code 74: %v, want libvirtd's plain error", err)
	}
	var remote *Error
	if _, err := c.DomainFSFreeze(ctx, Domain{Name: "vm"}, nil); errors.Is(err, ErrGuestAgentUnavailable) || !errors.As(err, &remote) || remote.Code != 55 {
		t.Errorf("a freeze of a stopped domain: %v, want libvirtd's plain error 55", err)
	}
}

func TestDiskOnlySnapshotXML(t *testing.T) {
	for _, c := range []struct {
		name  string
		snap  string
		disks []SnapshotDisk
		want  string // "" for an error
	}{
		{"one disk", "s1", []SnapshotDisk{{Target: "vda", File: "/p/vm-vda-s1.qcow2"}},
			`<domainsnapshot><name>s1</name><disks><disk name="vda" snapshot="external" type="file"><driver type="qcow2"></driver><source file="/p/vm-vda-s1.qcow2"></source></disk></disks></domainsnapshot>`},
		{"a skipped disk, escaped names", "a<b", []SnapshotDisk{{Target: "vda", File: "/p/a&b"}, {Target: "vdb", Skip: true}},
			`<domainsnapshot><name>a&lt;b</name><disks><disk name="vda" snapshot="external" type="file"><driver type="qcow2"></driver><source file="/p/a&amp;b"></source></disk><disk name="vdb" snapshot="no"></disk></disks></domainsnapshot>`},
		{"no name", "", []SnapshotDisk{{Target: "vda", File: "/x"}}, ""},
		{"no disks", "s", nil, ""},
		{"no file", "s", []SnapshotDisk{{Target: "vda"}}, ""},
		{"repeated target", "s", []SnapshotDisk{{Target: "vda", File: "/x"}, {Target: "vda", File: "/y"}}, ""},
		{"empty target", "s", []SnapshotDisk{{File: "/x"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := DiskOnlySnapshotXML(c.snap, c.disks)
			if c.want == "" {
				if err == nil {
					t.Errorf("accepted: %s", got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("got %q %v\nwant %q", got, err, c.want)
			}
		})
	}
}
