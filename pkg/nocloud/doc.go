// Package nocloud builds the NoCloud seed that hands a libvirt guest its
// cloud-init configuration: a CD image labelled CIDATA whose root holds
// meta-data, and user-data and network-config when they are given.
//
// The image is built in memory with package iso9660 (ISO 9660 plus Joliet,
// so the hyphenated names survive), byte-identical for identical input.
//
// NetworkConfigV2 renders the optional network-config file, cloud-init's
// network config version 2, from the LibvirtMachine NICs: static IPAM gives
// addresses, a default route and nameservers, anything else DHCPv4. Each
// interface is matched by MAC address and renamed to its NIC name; one
// without a MAC is matched by that name instead.
//
// # Limits
//
// UserData and NetworkConfig may each hold at most MaxPayloadSize (1 MiB).
// cloud-init's NoCloud source reads the files whole and sets no limit of
// its own; the bound comes from where the payload lives. userData travels in
// the LibvirtMachine spec, and Kubernetes objects are capped by etcd's
// default 1.5 MiB request limit, so nothing larger can arrive legitimately.
// 1 MiB leaves room for the rest of the object while still refusing a
// runaway payload before it becomes a storage volume. Clouds are far
// stricter (EC2 16 KiB, OpenStack and Azure 64 KiB, GCE 256 KiB), so a
// payload that works elsewhere always fits.
//
// InstanceID and Hostname are written unquoted into meta-data, whose format
// is fixed, so they are restricted to values that keep the file a two-key
// YAML map of strings: letters, digits, '.', '_' and '-', starting with a
// letter or digit, at most 253 bytes, and not a word or number YAML would
// type otherwise (yes, null, 123, 1e3, 0x1f, 2024-01-31 ...). That admits a
// canonical UUID and a domain name of the form <namespace>-<name>.
package nocloud
