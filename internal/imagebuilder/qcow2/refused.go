package qcow2

import "fmt"

// Rule is what a refused image broke.
type Rule int

const (
	// RuleVirtualSize: the virtual size is over Limits.MaxVirtualSize.
	RuleVirtualSize Rule = iota + 1
	// RuleZstdWindow: a compressed cluster declares a zstd window over Limits.MaxZstdWindow.
	RuleZstdWindow
	// RuleStructure: the L1 table is far larger than the virtual size needs, or a table or
	// cluster lies outside the file or is referenced twice. No real image does this; a crafted
	// one does it to allocate from a size it claims or to expand a few bytes into a whole disk.
	RuleStructure
)

// RefusedError is an image the reader will not convert because it breaks a limit or a
// structure rule, as opposed to one it cannot read.
type RefusedError struct {
	Rule Rule
	// Seen and Limit are the value the image declares and the limit it breaks, in bytes, for
	// RuleVirtualSize and RuleZstdWindow; Seen is -1 when a zstd frame's header is unreadable.
	Seen, Limit int64
	// Detail says what is wrong, for RuleStructure.
	Detail string
}

func (e *RefusedError) Error() string {
	switch e.Rule {
	case RuleVirtualSize:
		return fmt.Sprintf("qcow2: virtual size %d exceeds the limit of %d bytes", e.Seen, e.Limit)
	case RuleZstdWindow:
		return fmt.Sprintf("qcow2: a compressed cluster declares a zstd window of %d bytes, over the limit of %d", e.Seen, e.Limit)
	default:
		return "qcow2: " + e.Detail
	}
}

// structural is the refusal of an image that breaks a structure rule.
func structural(format string, args ...any) error {
	return &RefusedError{Rule: RuleStructure, Detail: fmt.Sprintf(format, args...)}
}
