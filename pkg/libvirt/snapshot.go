package libvirt

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// DomainSnapshot is a snapshot libvirt returned (remote_nonnull_domain_snapshot). Created with
// SnapshotNoMetadata it is a name only: libvirt keeps no record of it, and the caller the
// layers it made.
type DomainSnapshot struct {
	Name   string
	Domain Domain
}

// SnapshotCreateFlags are virDomainSnapshotCreateFlags.
type SnapshotCreateFlags uint32

const (
	// SnapshotNoMetadata keeps no snapshot record in libvirt: the caller records the layers
	// (banlieue in the machine's status), and libvirt has nothing to forget or to refuse an
	// undefine over.
	SnapshotNoMetadata SnapshotCreateFlags = 1 << 2
	// SnapshotDiskOnly takes the disks alone, no memory: on a running domain each disk gets a
	// new external top layer and the guest keeps running.
	SnapshotDiskOnly SnapshotCreateFlags = 1 << 4
	// SnapshotReuseExt makes libvirt use the layer files as they are, created beforehand with
	// the right backing file, instead of creating them itself.
	SnapshotReuseExt SnapshotCreateFlags = 1 << 5
	// SnapshotQuiesce freezes the guest's filesystems through the guest agent for the switch
	// and thaws them after: application-consistent, and refused without an agent.
	SnapshotQuiesce SnapshotCreateFlags = 1 << 6
	// SnapshotAtomic switches every disk or none.
	SnapshotAtomic SnapshotCreateFlags = 1 << 7
)

// DomainSnapshotCreateXML takes the snapshot xml describes (DiskOnlySnapshotXML) of dom.
func (c *Client) DomainSnapshotCreateXML(ctx context.Context, dom Domain, xml string, flags SnapshotCreateFlags) (DomainSnapshot, error) {
	var snap DomainSnapshot
	err := c.call(ctx, wire.ProgramRemote, procDomainSnapshotCreateXML, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.String(xml)
		e.Uint32(uint32(flags))
	}, func(d *xdr.Decoder) {
		snap.Name = d.String(maxString)
		snap.Domain = decodeDomain(d)
	})
	if flags&SnapshotQuiesce != 0 {
		// The freeze comes first: an agent that cannot be used fails the call before any layer
		// is switched.
		err = agentError(err)
	}
	return snap, err
}

// SnapshotDisk is one disk of a disk-only snapshot: its target (vda) and the file of its new
// top layer, or Skip to leave it out (snapshot='no'), e.g. a shared or read-only disk.
type SnapshotDisk struct {
	Target string
	File   string
	Skip   bool
}

// DiskOnlySnapshotXML is the <domainsnapshot> of an external disk-only snapshot named name:
// each disk's new qcow2 top layer at its File. A disk of the domain that is not listed gets
// libvirt's default for it, so callers list every disk.
func DiskOnlySnapshotXML(name string, disks []SnapshotDisk) (string, error) {
	type source struct {
		File string `xml:"file,attr"`
	}
	type driver struct {
		Type string `xml:"type,attr"`
	}
	type disk struct {
		Name     string  `xml:"name,attr"`
		Snapshot string  `xml:"snapshot,attr"`
		Type     string  `xml:"type,attr,omitempty"`
		Driver   *driver `xml:"driver"`
		Source   *source `xml:"source"`
	}
	doc := struct {
		XMLName xml.Name `xml:"domainsnapshot"`
		Name    string   `xml:"name"`
		Disks   []disk   `xml:"disks>disk"`
	}{Name: name}
	if name == "" || len(disks) == 0 {
		return "", errors.New("libvirt: a disk-only snapshot needs a name and at least one disk")
	}
	seen := map[string]bool{}
	for _, d := range disks {
		if d.Target == "" || seen[d.Target] {
			return "", fmt.Errorf("libvirt: snapshot disk target %q is empty or repeated", d.Target)
		}
		seen[d.Target] = true
		if d.Skip {
			doc.Disks = append(doc.Disks, disk{Name: d.Target, Snapshot: "no"})
			continue
		}
		if d.File == "" {
			return "", fmt.Errorf("libvirt: snapshot disk %s has no layer file", d.Target)
		}
		doc.Disks = append(doc.Disks, disk{Name: d.Target, Snapshot: "external", Type: "file",
			Driver: &driver{Type: "qcow2"}, Source: &source{File: d.File}})
	}
	var b bytes.Buffer
	if err := xml.NewEncoder(&b).Encode(doc); err != nil {
		return "", err
	}
	return b.String(), nil
}

// BlockCommitFlags are virDomainBlockCommitFlags.
type BlockCommitFlags uint32

const (
	// BlockCommitShallow commits top into its immediate backing layer alone.
	BlockCommitShallow BlockCommitFlags = 1 << 0
	// BlockCommitActive commits the active (top) layer of a running domain: the job mirrors
	// the guest's writes into the base until pivoted (DomainBlockJobAbort with
	// BlockJobAbortPivot) or cancelled.
	BlockCommitActive BlockCommitFlags = 1 << 2
)

// DomainBlockCommit starts a job that merges the layers of disk (its target, vda) from top
// down into base, both named by path or by index (vda[1]); an empty top is the active layer.
// An empty base with BlockCommitShallow is top's backing layer. An empty base without it would
// be the bottom of the chain, banlieue's shared base image, which is never written: refused
// here, before anything is sent. bandwidth is in MiB/s, 0 unlimited.
func (c *Client) DomainBlockCommit(ctx context.Context, dom Domain, disk, base, top string, bandwidth uint64, flags BlockCommitFlags) error {
	if base == "" && flags&BlockCommitShallow == 0 {
		return fmt.Errorf("libvirt: block commit of %s: name the base layer or commit shallow; the bottom of the chain is never written", disk)
	}
	return c.call(ctx, wire.ProgramRemote, procDomainBlockCommit, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.String(disk)
		e.OptString(optString(base))
		e.OptString(optString(top))
		e.Uint64(bandwidth)
		e.Uint32(uint32(flags))
	}, nil)
}

// BlockJobType is virDomainBlockJobType.
type BlockJobType int32

const (
	BlockJobUnknown      BlockJobType = 0
	BlockJobPull         BlockJobType = 1
	BlockJobCopy         BlockJobType = 2
	BlockJobCommit       BlockJobType = 3
	BlockJobActiveCommit BlockJobType = 4
	BlockJobBackup       BlockJobType = 5
)

// BlockJobInfo is a disk's block job (DOMAIN_GET_BLOCK_JOB_INFO). Cur and End are progress in
// unspecified units; an active commit or copy whose Cur reached End mirrors and may pivot.
type BlockJobInfo struct {
	Found     bool // false: the disk has no job
	Type      BlockJobType
	Bandwidth uint64 // MiB/s
	Cur, End  uint64
}

// Ready reports a job that has copied everything so far: a mirror that may pivot.
func (i BlockJobInfo) Ready() bool { return i.Found && i.End > 0 && i.Cur == i.End }

// DomainGetBlockJobInfo returns the block job of disk (target or path).
func (c *Client) DomainGetBlockJobInfo(ctx context.Context, dom Domain, disk string) (BlockJobInfo, error) {
	var info BlockJobInfo
	err := c.call(ctx, wire.ProgramRemote, procDomainGetBlockJobInfo, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.String(disk)
		e.Uint32(0)
	}, func(d *xdr.Decoder) {
		info.Found = d.Int32() == 1
		info.Type = BlockJobType(d.Int32())
		info.Bandwidth = d.Uint64()
		info.Cur = d.Uint64()
		info.End = d.Uint64()
	})
	if !info.Found {
		info = BlockJobInfo{}
	}
	return info, err
}

// BlockJobAbortFlags are virDomainBlockJobAbortFlags.
type BlockJobAbortFlags uint32

const (
	// BlockJobAbortAsync returns at once instead of once the job has ended.
	BlockJobAbortAsync BlockJobAbortFlags = 1 << 0
	// BlockJobAbortPivot ends a ready active commit or copy by switching the disk to the job's
	// target (the commit's base); without it the job is cancelled and the disk stays as it was.
	BlockJobAbortPivot BlockJobAbortFlags = 1 << 1
)

// DomainBlockJobAbort ends the block job of disk: a pivot, or a cancel.
func (c *Client) DomainBlockJobAbort(ctx context.Context, dom Domain, disk string, flags BlockJobAbortFlags) error {
	return c.call(ctx, wire.ProgramRemote, procDomainBlockJobAbort, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.String(disk)
		e.Uint32(uint32(flags))
	}, nil)
}

// maxFSFreezeMountpoints is REMOTE_DOMAIN_FSFREEZE_MOUNTPOINTS_MAX.
const maxFSFreezeMountpoints = 256

// ErrGuestAgentUnavailable is matched (errors.Is) by the error of a call that needs the guest
// agent when the domain has none: no agent channel configured (libvirt's "QEMU guest agent is
// not configured") or nothing answering on it ("not connected"). The caller falls back to a
// crash-consistent snapshot; every other error is a failure.
var ErrGuestAgentUnavailable = errors.New("libvirt: the guest agent is not available")

// virErrorNumber values of a guest agent that cannot be used.
const (
	ErrArgumentUnsupported = 74 // VIR_ERR_ARGUMENT_UNSUPPORTED: e.g. no agent channel
	ErrAgentUnresponsive   = 86 // VIR_ERR_AGENT_UNRESPONSIVE: agent not connected or not answering
)

// AgentError is libvirtd's refusal of a call that needs the guest agent, which cannot be used.
type AgentError struct{ Err *Error }

func (e *AgentError) Error() string { return e.Err.Error() }

func (e *AgentError) Unwrap() error { return e.Err }

func (e *AgentError) Is(target error) bool { return target == ErrGuestAgentUnavailable }

// agentError types err when it says the agent cannot be used. ARGUMENT_UNSUPPORTED is read so
// only from procedures whose one agent-related refusal it is.
func agentError(err error) error {
	var e *Error
	if errors.As(err, &e) && (e.Code == ErrAgentUnresponsive || e.Code == ErrArgumentUnsupported) {
		return &AgentError{Err: e}
	}
	return err
}

// DomainFSFreeze freezes the guest's filesystems at mountpoints (none: all of them) through
// the guest agent and returns how many it froze. They stay frozen until DomainFSThaw, or until
// the agent's own timeout: the caller thaws on every path, with its own deadline.
func (c *Client) DomainFSFreeze(ctx context.Context, dom Domain, mountpoints []string) (int, error) {
	return c.fsFreezeThaw(ctx, procDomainFSFreeze, dom, mountpoints)
}

// DomainFSThaw thaws what DomainFSFreeze froze and returns how many filesystems it thawed.
func (c *Client) DomainFSThaw(ctx context.Context, dom Domain, mountpoints []string) (int, error) {
	return c.fsFreezeThaw(ctx, procDomainFSThaw, dom, mountpoints)
}

func (c *Client) fsFreezeThaw(ctx context.Context, proc procedure, dom Domain, mountpoints []string) (int, error) {
	if len(mountpoints) > maxFSFreezeMountpoints {
		return 0, fmt.Errorf("libvirt: %d mountpoints, libvirt takes at most %d", len(mountpoints), maxFSFreezeMountpoints)
	}
	var n int32
	err := c.call(ctx, wire.ProgramRemote, proc, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.Uint32(uint32(len(mountpoints)))
		for _, m := range mountpoints {
			e.String(m)
		}
		e.Uint32(0)
	}, func(d *xdr.Decoder) { n = d.Int32() })
	return int(n), agentError(err)
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
