package libvirt

import (
	"context"
	"fmt"
	"math"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// TypedParamType is virTypedParameterType: which arm of remote_typed_param_value a parameter
// carries on the wire.
type TypedParamType int32

const (
	TypedParamInt     TypedParamType = 1 // int
	TypedParamUint    TypedParamType = 2 // unsigned int
	TypedParamLLong   TypedParamType = 3 // hyper
	TypedParamULLong  TypedParamType = 4 // unsigned hyper
	TypedParamDouble  TypedParamType = 5 // double
	TypedParamBoolean TypedParamType = 6 // int, 0 or 1
	TypedParamString  TypedParamType = 7 // remote_nonnull_string
)

// TypedParam is one virTypedParameter (remote_typed_param): a named value of one of libvirt's
// types. Int holds INT, LLONG and BOOLEAN values, Uint holds UINT and ULLONG ones.
type TypedParam struct {
	Field  string
	Type   TypedParamType
	Int    int64
	Uint   uint64
	Double float64
	String string
}

// StringParam, ULLongParam and IntParam build the parameters migration takes.
func StringParam(field, s string) TypedParam {
	return TypedParam{Field: field, Type: TypedParamString, String: s}
}

func ULLongParam(field string, v uint64) TypedParam {
	return TypedParam{Field: field, Type: TypedParamULLong, Uint: v}
}

func IntParam(field string, v int32) TypedParam {
	return TypedParam{Field: field, Type: TypedParamInt, Int: int64(v)}
}

// maxTypedParams bounds a parameter list: REMOTE_DOMAIN_MIGRATE_PARAM_LIST_MAX and
// REMOTE_DOMAIN_JOB_STATS_MAX are both 64.
const maxTypedParams = 64

// maxMigrateCookie is REMOTE_MIGRATE_COOKIE_MAX.
const maxMigrateCookie = 4194304

func encodeTypedParam(e *xdr.Encoder, p TypedParam) {
	e.String(p.Field)
	e.Int32(int32(p.Type))
	switch p.Type {
	case TypedParamInt, TypedParamBoolean:
		e.Int32(int32(p.Int))
	case TypedParamUint:
		e.Uint32(uint32(p.Uint))
	case TypedParamLLong:
		e.Int64(p.Int)
	case TypedParamULLong:
		e.Uint64(p.Uint)
	case TypedParamDouble:
		e.Uint64(math.Float64bits(p.Double)) // XDR double: IEEE 754, big-endian
	case TypedParamString:
		e.String(p.String)
	}
}

func decodeTypedParam(d *xdr.Decoder) TypedParam {
	p := TypedParam{Field: d.String(maxString), Type: TypedParamType(d.Int32())}
	switch p.Type {
	case TypedParamInt, TypedParamBoolean:
		p.Int = int64(d.Int32())
	case TypedParamUint:
		p.Uint = uint64(d.Uint32())
	case TypedParamLLong:
		p.Int = d.Int64()
	case TypedParamULLong:
		p.Uint = d.Uint64()
	case TypedParamDouble:
		p.Double = math.Float64frombits(d.Uint64())
	case TypedParamString:
		p.String = d.String(maxString)
	default:
		// The union has no default arm: the rest of the message cannot be read.
		d.Fail(fmt.Errorf("typed parameter %q: unknown type %d", p.Field, p.Type))
	}
	return p
}

// MigrateFlags are virDomainMigrateFlags.
type MigrateFlags uint32

const (
	// MigrateLive keeps the guest running while its memory is copied; it pauses only for the
	// last pass (the downtime).
	MigrateLive MigrateFlags = 1 << 0
	// MigratePeer2Peer makes the source libvirtd drive the migration itself: it connects to
	// the destination URI with its own client identity, so the caller talks to the source only.
	MigratePeer2Peer MigrateFlags = 1 << 1
	// MigratePersistDest defines the domain persistently on the destination.
	MigratePersistDest MigrateFlags = 1 << 3
	// MigrateUndefineSource removes the source's definition once the destination runs.
	MigrateUndefineSource MigrateFlags = 1 << 4
	// MigrateNonSharedDisk copies whole disks (backing chains included) through NBD.
	MigrateNonSharedDisk MigrateFlags = 1 << 6
	// MigrateNonSharedInc copies the top image of each disk only: the backing chain must
	// already be on the destination, and the top image be there, empty, with the same
	// backing (libvirt creates it only when the file is absent, and then without backing).
	MigrateNonSharedInc MigrateFlags = 1 << 7
	// MigrateChangeProtection stops the domain from being changed on the source while the
	// migration runs.
	MigrateChangeProtection MigrateFlags = 1 << 8
	// MigrateAbortOnError aborts when a disk reports an I/O error during the migration.
	MigrateAbortOnError MigrateFlags = 1 << 12
	// MigrateAutoConverge throttles the guest's CPUs when memory is dirtied faster than sent.
	MigrateAutoConverge MigrateFlags = 1 << 13
	// MigrateTLS encrypts QEMU's migration and NBD streams with the hypervisor's TLS
	// environment (qemu.conf migrate_tls_x509_*), beyond libvirtd's own control connection.
	MigrateTLS MigrateFlags = 1 << 16
)

// Migration parameters (VIR_MIGRATE_PARAM_*) banlieue sets.
const (
	// MigrateParamURI ("migrate_uri") is where QEMU sends the migration stream, e.g.
	// tcp://10.0.0.2: by default the destination's hostname.
	MigrateParamURI = "migrate_uri"
	// MigrateParamDestName ("destination_name") renames the domain on the destination.
	MigrateParamDestName = "destination_name"
	// MigrateParamDestXML ("destination_xml") is the domain's XML on the destination: the same
	// ABI, with paths, pools and networks of the destination.
	MigrateParamDestXML = "destination_xml"
	// MigrateParamPersistXML ("persistent_xml") is the persistent definition the destination
	// keeps with MigratePersistDest.
	MigrateParamPersistXML = "persistent_xml"
	// MigrateParamBandwidth ("bandwidth", unsigned long long, MiB/s) caps this migration's
	// memory stream and NBD disk copy, the copy after a first burst of 16 MiB (QEMU's mirror
	// buffer); 0 is unlimited, or DomainMigrateSetMaxSpeed's setting.
	MigrateParamBandwidth = "bandwidth"
	// MigrateParamListenAddress ("listen_address") is where the destination QEMU listens.
	MigrateParamListenAddress = "listen_address"
	// MigrateParamMigrateDisks ("migrate_disks") names, by target (vda), a disk to copy; one
	// parameter per disk. Without any, every writable non-shared disk is copied.
	MigrateParamMigrateDisks = "migrate_disks"
	// MigrateParamDisksURI ("disks_uri") is where the destination's NBD server listens.
	MigrateParamDisksURI = "disks_uri"
)

// MigrateParams are the typed parameters of one migration, the fields left zero not sent.
type MigrateParams struct {
	URI           string
	DestName      string
	DestXML       string
	PersistXML    string
	Bandwidth     uint64 // MiB/s
	ListenAddress string
	MigrateDisks  []string
	DisksURI      string
}

// Typed returns p as libvirt's parameter list.
func (p MigrateParams) Typed() []TypedParam {
	var out []TypedParam
	str := func(field, v string) {
		if v != "" {
			out = append(out, StringParam(field, v))
		}
	}
	str(MigrateParamURI, p.URI)
	str(MigrateParamDestName, p.DestName)
	str(MigrateParamDestXML, p.DestXML)
	str(MigrateParamPersistXML, p.PersistXML)
	if p.Bandwidth > 0 {
		out = append(out, ULLongParam(MigrateParamBandwidth, p.Bandwidth))
	}
	str(MigrateParamListenAddress, p.ListenAddress)
	for _, d := range p.MigrateDisks {
		out = append(out, StringParam(MigrateParamMigrateDisks, d))
	}
	str(MigrateParamDisksURI, p.DisksURI)
	return out
}

// DomainMigratePerform3Params migrates dom from the libvirtd of c (the source) to the libvirtd
// at destURI with flags, which must include MigratePeer2Peer: the source daemon connects to
// destURI itself, with its own client certificate, and runs the Begin/Prepare/Perform/Finish/
// Confirm exchange; the call returns once the domain runs on the destination, or with the
// error that ended the migration (then the domain still runs on the source). It lasts as long
// as the migration does: call it with a context of WithCallTimeout that covers the copy.
func (c *Client) DomainMigratePerform3Params(ctx context.Context, dom Domain, destURI string, params []TypedParam, flags MigrateFlags) error {
	if flags&MigratePeer2Peer == 0 {
		// Without peer-to-peer, Perform is only one step of a client-driven exchange whose
		// cookies this client would have to carry between the two daemons.
		return fmt.Errorf("libvirt: DomainMigratePerform3Params drives peer-to-peer migrations only (flags %#x)", uint32(flags))
	}
	if len(params) > maxTypedParams {
		return fmt.Errorf("libvirt: %d migration parameters, libvirt takes at most %d", len(params), maxTypedParams)
	}
	return c.call(ctx, wire.ProgramRemote, procDomainMigratePerform3Params, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.OptString(&destURI) // dconnuri
		e.Uint32(uint32(len(params)))
		for _, p := range params {
			encodeTypedParam(e, p)
		}
		e.String("") // cookie_in: opaque<>, empty for peer-to-peer
		e.Uint32(uint32(flags))
	}, func(d *xdr.Decoder) {
		_ = d.String(maxMigrateCookie) // cookie_out: empty for peer-to-peer, nothing to carry
	})
}

// JobType is virDomainJobType.
type JobType int32

const (
	JobNone      JobType = 0
	JobBounded   JobType = 1 // a job whose end is known, e.g. a migration
	JobUnbounded JobType = 2
	JobCompleted JobType = 3
	JobFailed    JobType = 4
	JobCancelled JobType = 5
)

// JobStatsFlags are virDomainGetJobStatsFlags.
type JobStatsFlags uint32

const (
	// JobStatsCompleted asks for the last completed job instead of the running one: the
	// statistics of a migration that has ended, read on either side.
	JobStatsCompleted JobStatsFlags = 1 << 0
	// JobStatsKeepCompleted keeps those statistics for a later call instead of clearing them.
	JobStatsKeepCompleted JobStatsFlags = 1 << 1
)

// JobStats is a domain's job as DOMAIN_GET_JOB_STATS reports it. Fields libvirt did not report
// (they depend on the job and its phase) are zero; Params holds all of them.
type JobStats struct {
	Type JobType
	// TimeElapsed ("time_elapsed") is the job's time so far, or its total once completed.
	TimeElapsed time.Duration
	// Downtime ("downtime") is how long the guest was paused, or is expected to be.
	Downtime time.Duration
	// DataTotal, DataProcessed and DataRemaining ("data_*") count bytes, memory and disks.
	DataTotal, DataProcessed, DataRemaining uint64
	// DiskTotal and DiskProcessed ("disk_*") count the bytes of the NBD disk copy.
	DiskTotal, DiskProcessed uint64
	// ErrMsg ("errmsg") is why a failed job failed.
	ErrMsg string
	Params []TypedParam
}

// DomainGetJobStats returns the statistics of dom's running job, or with JobStatsCompleted of
// its last completed one. A domain without a job reports JobNone.
func (c *Client) DomainGetJobStats(ctx context.Context, dom Domain, flags JobStatsFlags) (JobStats, error) {
	var st JobStats
	err := c.call(ctx, wire.ProgramRemote, procDomainGetJobStats, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.Uint32(uint32(flags))
	}, func(d *xdr.Decoder) {
		st.Type = JobType(d.Int32())
		// Each parameter takes at least a field length, a type and a 4-byte value.
		st.Params = decodeList(d, maxTypedParams, 3*4, decodeTypedParam)
	})
	if err != nil {
		return JobStats{}, err
	}
	for _, p := range st.Params {
		switch p.Field {
		case "time_elapsed":
			st.TimeElapsed = time.Duration(p.Uint) * time.Millisecond
		case "downtime":
			st.Downtime = time.Duration(p.Uint) * time.Millisecond
		case "data_total":
			st.DataTotal = p.Uint
		case "data_processed":
			st.DataProcessed = p.Uint
		case "data_remaining":
			st.DataRemaining = p.Uint
		case "disk_total":
			st.DiskTotal = p.Uint
		case "disk_processed":
			st.DiskProcessed = p.Uint
		case "errmsg":
			st.ErrMsg = p.String
		}
	}
	return st, nil
}

// DomainAbortJob cancels dom's running job, e.g. a migration: the migration call then fails
// and the domain keeps running on the source.
func (c *Client) DomainAbortJob(ctx context.Context, dom Domain) error {
	return c.call(ctx, wire.ProgramRemote, procDomainAbortJob, func(e *xdr.Encoder) { encodeDomain(e, dom) }, nil)
}

// DomainMigrateSetMaxDowntime bounds the guest's pause at the end of a live migration (libvirt
// takes milliseconds); QEMU keeps copying until what remains fits in it.
func (c *Client) DomainMigrateSetMaxDowntime(ctx context.Context, dom Domain, d time.Duration) error {
	return c.call(ctx, wire.ProgramRemote, procDomainMigrateSetMaxDowntime, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.Uint64(uint64(d.Milliseconds()))
		e.Uint32(0)
	}, nil)
}

// DomainMigrateSetMaxSpeed caps dom's migrations at bandwidth MiB/s (0: unlimited): the
// domain's own setting, for migrations that send no bandwidth parameter.
func (c *Client) DomainMigrateSetMaxSpeed(ctx context.Context, dom Domain, bandwidth uint64) error {
	return c.call(ctx, wire.ProgramRemote, procDomainMigrateSetMaxSpeed, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.Uint64(bandwidth)
		e.Uint32(0)
	}, nil)
}

// ErrOperationAborted (VIR_ERR_OPERATION_ABORTED) is the error of a migration cancelled by
// DomainAbortJob: the domain still runs on the source.
const ErrOperationAborted = 78

// DomainRunningMigrated (VIR_DOMAIN_RUNNING_MIGRATED) is the reason of a domain that runs
// because a migration brought it in, not because it booted.
const DomainRunningMigrated DomainStateReason = 2
