package nocloud

import (
	"fmt"

	"banlieue.io/banlieue/pkg/iso9660"
)

const (
	// Label is the volume label cloud-init's NoCloud source looks for.
	Label = "CIDATA"
	// MaxPayloadSize bounds UserData and NetworkConfig; see the package doc.
	MaxPayloadSize = 1 << 20
)

// File names in the seed, fixed by cloud-init.
const (
	metaDataFile      = "meta-data"
	userDataFile      = "user-data"
	networkConfigFile = "network-config"
)

// Seed is the content of a NoCloud seed.
type Seed struct {
	// InstanceID is the domain UUID. cloud-init runs its per-instance
	// modules again whenever it changes.
	InstanceID string
	// Hostname becomes local-hostname.
	Hostname string
	// UserData is written byte for byte; nil means no user-data file, while
	// an empty non-nil slice gives an empty one.
	UserData []byte
	// NetworkConfig is written byte for byte; nil means none, and the guest
	// falls back to DHCP. NetworkConfigV2 renders one.
	NetworkConfig []byte
}

// Build validates s and lays out its image. The image's Size is known before
// it is written, and the bytes depend on s alone.
func (s Seed) Build() (*iso9660.Image, error) {
	if err := checkIdentifier("instance-id", s.InstanceID); err != nil {
		return nil, err
	}
	if err := checkIdentifier("hostname", s.Hostname); err != nil {
		return nil, err
	}
	files := []iso9660.File{{Name: metaDataFile, Data: s.MetaData()}}
	for _, p := range []struct {
		name string
		data []byte
	}{{userDataFile, s.UserData}, {networkConfigFile, s.NetworkConfig}} {
		if p.data == nil {
			continue
		}
		if len(p.data) > MaxPayloadSize {
			return nil, fmt.Errorf("nocloud: %s is %d bytes, more than the %d-byte maximum", p.name, len(p.data), MaxPayloadSize)
		}
		files = append(files, iso9660.File{Name: p.name, Data: p.data})
	}
	// No Time: the fixed epoch keeps equal seeds byte-identical, so a
	// rebuilt seed never looks like a change.
	im, err := iso9660.Build(iso9660.Volume{Label: Label, Files: files})
	if err != nil {
		return nil, fmt.Errorf("nocloud: %w", err)
	}
	return im, nil
}
