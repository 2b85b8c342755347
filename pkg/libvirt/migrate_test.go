package libvirt

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// The expected arguments are laid out by hand, field by field, as remote_protocol.x declares
// them, so a slip in encodeTypedParam cannot hide behind itself:
//
//	struct remote_domain_migrate_perform3_params_args {
//	    remote_nonnull_domain dom;
//	    remote_string dconnuri;
//	    remote_typed_param params<REMOTE_DOMAIN_MIGRATE_PARAM_LIST_MAX>;
//	    opaque cookie_in<REMOTE_MIGRATE_COOKIE_MAX>;
//	    unsigned int flags;
//	};
//	struct remote_typed_param { remote_nonnull_string field; remote_typed_param_value value; };
//	union remote_typed_param_value switch (int type) { ... case VIR_TYPED_PARAM_ULLONG (4):
//	    unsigned hyper ul; ... case VIR_TYPED_PARAM_STRING (7): remote_nonnull_string s; };
func TestDomainMigratePerform3ParamsWire(t *testing.T) {
	dom := Domain{Name: "vm-1", UUID: UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, ID: 7}
	var got []byte
	f := startFake(t, func(s *fakeSession) {
		for {
			h, payload, err := s.read()
			if err != nil {
				return
			}
			if procedure(h.Procedure) != procDomainMigratePerform3Params {
				t.Errorf("procedure %d, want DOMAIN_MIGRATE_PERFORM3_PARAMS (305)", h.Procedure)
			}
			if got == nil {
				got = payload
				s.reply(h, wire.OK, func(e *xdr.Encoder) { e.Uint32(0) }) // cookie_out<>: empty
				continue
			}
			// VIR_ERR_OPERATION_ABORTED, as after DOMAIN_ABORT_JOB.
			s.replyError(h, 78, "operation aborted: migration out job: canceled by client")
		}
	})
	c := f.dial(t)
	ctx := testContext(t)
	params := MigrateParams{
		DestXML:      "<domain/>",
		Bandwidth:    8,
		MigrateDisks: []string{"vda", "vdb"},
	}
	flags := MigrateLive | MigratePeer2Peer | MigratePersistDest | MigrateUndefineSource | MigrateNonSharedInc
	if err := c.DomainMigratePerform3Params(ctx, dom, "qemu+tls://127.0.0.1:17101/system", params.Typed(), flags); err != nil {
		t.Fatal(err)
	}

	want := xdr.NewEncoder(nil)
	want.String("vm-1")
	want.FixedOpaque(dom.UUID[:])
	want.Int32(7)
	want.Uint32(1) // dconnuri present
	want.String("qemu+tls://127.0.0.1:17101/system")
	want.Uint32(4) // four parameters
	want.String("destination_xml")
	want.Int32(7)
	want.String("<domain/>")
	want.String("bandwidth")
	want.Int32(4)
	want.Uint64(8)
	want.String("migrate_disks")
	want.Int32(7)
	want.String("vda")
	want.String("migrate_disks")
	want.Int32(7)
	want.String("vdb")
	want.Uint32(0)                    // cookie_in: empty opaque
	want.Uint32(1 | 2 | 8 | 16 | 128) // VIR_MIGRATE_LIVE|PEER2PEER|PERSIST_DEST|UNDEFINE_SOURCE|NON_SHARED_INC
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("arguments\n got %x\nwant %x", got, want.Bytes())
	}

	err := c.DomainMigratePerform3Params(ctx, dom, "qemu+tls://127.0.0.1:17101/system", nil, flags)
	var remote *Error
	if !errors.As(err, &remote) || remote.Code != 78 || remote.Procedure != "DOMAIN_MIGRATE_PERFORM3_PARAMS" {
		t.Fatalf("aborted migration: %v, want libvirtd's error 78 naming DOMAIN_MIGRATE_PERFORM3_PARAMS", err)
	}
}

// A Perform without peer-to-peer would be one step of an exchange the caller must drive, and a
// list beyond libvirt's bound would be refused by libvirtd after a round trip: both are refused
// before anything is sent.
func TestDomainMigratePerform3ParamsRefusedLocally(t *testing.T) {
	sent := 0
	f := startFake(t, func(s *fakeSession) {
		for {
			h, _, err := s.read()
			if err != nil {
				return
			}
			sent++
			s.reply(h, wire.OK, func(e *xdr.Encoder) { e.Uint32(0) })
		}
	})
	c := f.dial(t)
	ctx := testContext(t)
	if err := c.DomainMigratePerform3Params(ctx, Domain{Name: "vm"}, "qemu+tls://b/system", nil, MigrateLive); err == nil || !strings.Contains(err.Error(), "peer-to-peer") {
		t.Errorf("without MigratePeer2Peer: %v, want a refusal naming peer-to-peer", err)
	}
	many := make([]TypedParam, maxTypedParams+1)
	for i := range many {
		many[i] = StringParam(MigrateParamMigrateDisks, "vda")
	}
	if err := c.DomainMigratePerform3Params(ctx, Domain{Name: "vm"}, "qemu+tls://b/system", many, MigratePeer2Peer); err == nil {
		t.Error("65 parameters: accepted, want a refusal")
	}
	if sent != 0 {
		t.Errorf("%d calls reached libvirtd, want none", sent)
	}
}

// DOMAIN_GET_JOB_STATS, DOMAIN_ABORT_JOB, DOMAIN_MIGRATE_SET_MAX_DOWNTIME and _SPEED.
// remote_domain_get_job_stats_args is the domain then unsigned int flags;
// the reply is int type then remote_typed_param params<REMOTE_DOMAIN_JOB_STATS_MAX>, with
// every arm of the union that a job reports (QEMU's stats are ULLONG, "operation" INT, "success"
// BOOLEAN, "errmsg" STRING; no stat is a DOUBLE today, but the arm must still be read in place).
func TestDomainGetJobStatsWire(t *testing.T) {
	dom := Domain{Name: "vm-1", UUID: UUID{7}, ID: 3}
	var args [][]byte
	f := startFake(t, func(s *fakeSession) {
		for {
			h, payload, err := s.read()
			if err != nil {
				return
			}
			args = append(args, payload)
			switch procedure(h.Procedure) {
			case procDomainGetJobStats:
				if len(args) == 1 { // then one whose parameter has an unknown type
					s.reply(h, wire.OK, func(e *xdr.Encoder) {
						e.Int32(3) // VIR_DOMAIN_JOB_COMPLETED
						e.Uint32(9)
						e.String("operation")
						e.Int32(1)
						e.Int32(3) // VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT
						e.String("time_elapsed")
						e.Int32(4)
						e.Uint64(2345)
						e.String("downtime")
						e.Int32(4)
						e.Uint64(12)
						e.String("data_total")
						e.Int32(4)
						e.Uint64(1 << 30)
						e.String("data_processed")
						e.Int32(4)
						e.Uint64(1 << 29)
						e.String("disk_total")
						e.Int32(4)
						e.Uint64(64 << 20)
						e.String("compression_ratio")
						e.Int32(5)
						e.Uint64(math.Float64bits(1.5))
						e.String("success")
						e.Int32(6)
						e.Int32(1)
						e.String("errmsg")
						e.Int32(7)
						e.String("none")
					})
				} else {
					s.reply(h, wire.OK, func(e *xdr.Encoder) {
						e.Int32(1)
						e.Uint32(1)
						e.String("weird")
						e.Int32(9) // no such arm
						e.Uint32(0)
					})
				}
			case procDomainAbortJob, procDomainMigrateSetMaxDowntime, procDomainMigrateSetMaxSpeed:
				s.reply(h, wire.OK, nil)
			default:
				t.Errorf("unexpected procedure %d", h.Procedure)
				s.reply(h, wire.OK, nil)
			}
		}
	})
	c := f.dial(t)
	ctx := testContext(t)
	st, err := c.DomainGetJobStats(ctx, dom, JobStatsCompleted|JobStatsKeepCompleted)
	if err != nil {
		t.Fatal(err)
	}
	if st.Type != JobCompleted || st.TimeElapsed != 2345*time.Millisecond || st.Downtime != 12*time.Millisecond ||
		st.DataTotal != 1<<30 || st.DataProcessed != 1<<29 || st.DiskTotal != 64<<20 || st.ErrMsg != "none" {
		t.Errorf("stats %+v", st)
	}
	if len(st.Params) != 9 || st.Params[0].Int != 3 || st.Params[6].Double != 1.5 || st.Params[7].Type != TypedParamBoolean || st.Params[7].Int != 1 {
		t.Errorf("params %+v", st.Params)
	}
	if err := c.DomainAbortJob(ctx, dom); err != nil {
		t.Fatal(err)
	}
	if err := c.DomainMigrateSetMaxDowntime(ctx, dom, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := c.DomainMigrateSetMaxSpeed(ctx, dom, 5); err != nil {
		t.Fatal(err)
	}
	// A type without an arm leaves the rest of the reply unreadable: a protocol violation,
	// which ends the connection like any other.
	if _, err := c.DomainGetJobStats(ctx, dom, 0); err == nil || !strings.Contains(err.Error(), "unknown type 9") {
		t.Errorf("a parameter of type 9: %v, want a decoding error naming it", err)
	}

	domain := func(e *xdr.Encoder) {
		e.String("vm-1")
		e.FixedOpaque(dom.UUID[:])
		e.Int32(3)
	}
	stats := func(flags uint32) []byte {
		e := xdr.NewEncoder(nil)
		domain(e)
		e.Uint32(flags)
		return e.Bytes()
	}
	abort := xdr.NewEncoder(nil)
	domain(abort) // remote_domain_abort_job_args: the domain alone
	downtime := xdr.NewEncoder(nil)
	domain(downtime)     // remote_domain_migrate_set_max_downtime_args:
	downtime.Uint64(300) // unsigned hyper downtime (ms)
	downtime.Uint32(0)   // unsigned int flags
	speed := xdr.NewEncoder(nil)
	domain(speed)   // remote_domain_migrate_set_max_speed_args:
	speed.Uint64(5) // unsigned hyper bandwidth (MiB/s)
	speed.Uint32(0) // unsigned int flags
	want := [][]byte{stats(1 | 2), abort.Bytes(), downtime.Bytes(), speed.Bytes(), stats(0)}
	if len(args) != len(want) {
		t.Fatalf("%d calls, want %d", len(args), len(want))
	}
	for i := range want {
		if !bytes.Equal(args[i], want[i]) {
			t.Errorf("call %d: arguments\n got %x\nwant %x", i, args[i], want[i])
		}
	}
}
