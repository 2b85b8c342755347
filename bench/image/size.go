//go:build bench

package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is the -size flag: a count of bytes, plain ("2147483648") or with a binary unit
// ("4GiB", "512MiB"), as docs/performance.md writes it.
type byteSize int64

var byteUnits = []struct {
	suffix string
	factor int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

func (s *byteSize) String() string { return strconv.FormatInt(int64(*s), 10) }

func (s *byteSize) Set(v string) error {
	n, err := parseByteSize(v)
	if err != nil {
		return err
	}
	*s = byteSize(n)
	return nil
}

func parseByteSize(v string) (int64, error) {
	num, factor := strings.TrimSpace(v), int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, factor = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, optionally with B, KiB, MiB, GiB or TiB", v)
	}
	if n > (1<<63-1)/factor {
		return 0, fmt.Errorf("size %q overflows", v)
	}
	return n * factor, nil
}
