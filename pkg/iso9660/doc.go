// Package iso9660 writes small, deterministic ISO 9660 (ECMA-119) images
// with a Joliet supplementary volume descriptor and no Rock Ridge or boot
// record.
//
// It exists so that a NoCloud seed (a CD image labelled CIDATA) can be built
// in process, without genisoimage or a temporary file. Images are flat: every
// file sits in the root directory.
//
// # Layout
//
// Extents are assigned in this order, each starting on a 2048-byte sector:
//
//	LBA 0-15   system area, zero (ECMA-119 6.2.1)
//	LBA 16     primary volume descriptor (8.4)
//	LBA 17     Joliet supplementary volume descriptor (8.5), escape "%/E"
//	LBA 18     volume descriptor set terminator (8.3)
//	LBA 19, 20 primary path table, type L then type M (9.4)
//	LBA 21, 22 Joliet path table, type L then type M
//	LBA 23     primary root directory (9.1)
//	LBA 24     Joliet root directory
//	LBA 25+    file extents in name order; an empty file still takes a sector
//
// The LBAs above hold while each table and directory fits in one sector,
// which is the case for any handful of files; a bigger root directory simply
// takes more sectors and shifts what follows.
//
// # Names
//
// The Joliet tree carries each name as given, in UCS-2 big-endian, up to 64
// characters, without a version suffix (as genisoimage -J writes it). Names
// must be in the Basic Multilingual Plane and must not contain control
// characters or any of * / : ; ? \ (the Joliet specification forbids them).
//
// The primary tree carries a mapped name for readers without Joliet: ASCII
// letters are uppercased, every other character outside [A-Z0-9_.] becomes
// '_', every dot but the last becomes '_', a name without a dot gains a
// trailing one, and the version suffix ";1" is appended (ECMA-119 7.5), so
// "meta-data" is recorded as "META_DATA.;1". Name and extension together may
// hold 30 characters (the interchange level 2 limit of ECMA-119 10.2; level
// 1's 8.3 cannot hold META_DATA). A name that is too long, or that collides
// with another after mapping, is an error rather than being shortened or
// renamed, so that the primary tree never silently differs from the
// caller's intent.
//
// # Determinism
//
// Every date in the image is the Volume's Time, or 1970-01-01 when it is zero;
// files are ordered by name whatever the input order. Equal inputs therefore
// give equal bytes, and the image size is known before anything is written.
package iso9660
