package iso9660

import (
	"fmt"
	"math"
	"slices"
)

// tree selects one of the two directory hierarchies that share the file
// extents: the primary one and the Joliet one.
type tree int

const (
	primaryTree tree = iota
	jolietTree
	numTrees
)

// file is a regular file with its identifiers and, after plan, its extent.
type file struct {
	name   string
	ident  [numTrees][]byte
	data   []byte
	extent uint32
}

// sectors is the extent length; an empty file still gets one sector so that
// every file has a distinct, valid location.
func (f *file) sectors() int64 {
	return max(1, (int64(len(f.data))+SectorSize-1)/SectorSize)
}

// directory is one directory, recorded once per tree. Only the root exists
// today; a subdirectory would add an entry kind and a parent other than
// itself, while plan and the encoders already walk a list of directories.
type directory struct {
	// number is the 1-based path table ordinal (ECMA-119 9.4.6).
	number uint16
	parent *directory
	// ident is the directory identifier in each tree; the root's is the
	// single byte 0x00 (6.8.2.2).
	ident [numTrees][]byte
	// entries are the files in the recording order of each tree (9.3).
	entries [numTrees][]*file
	extent  [numTrees]uint32
	size    [numTrees]uint32
}

// newRootDirectory checks and names files and sorts them into the root.
func newRootDirectory(files []File) (*directory, error) {
	root := &directory{number: 1, ident: [numTrees][]byte{{0}, {0}}}
	root.parent = root // the root is its own parent (6.8.2, 9.4.6)
	primaryNames := make(map[string]string, len(files))
	jolietNames := make(map[string]bool, len(files))
	var entries []*file
	for _, in := range files {
		if err := checkName(in.Name); err != nil {
			return nil, err
		}
		if jolietNames[in.Name] {
			return nil, fmt.Errorf("iso9660: duplicate file name %q", in.Name)
		}
		jolietNames[in.Name] = true
		if int64(len(in.Data)) > math.MaxUint32 {
			return nil, fmt.Errorf("iso9660: file %q is %d bytes; a single extent holds at most %d", in.Name, len(in.Data), uint32(math.MaxUint32))
		}
		base, ext, err := primaryName(in.Name)
		if err != nil {
			return nil, err
		}
		mapped := base + "." + ext
		if other, ok := primaryNames[mapped]; ok {
			return nil, fmt.Errorf("iso9660: file names %q and %q both map to ISO 9660 name %q", other, in.Name, mapped)
		}
		primaryNames[mapped] = in.Name
		entries = append(entries, &file{
			name: in.Name,
			ident: [numTrees][]byte{
				primaryTree: primaryIdentifier(base, ext),
				jolietTree:  jolietIdentifier(in.Name),
			},
			data: in.Data,
		})
	}
	root.entries[jolietTree] = slices.SortedFunc(slices.Values(entries), func(a, b *file) int {
		return compareNames(a.name, b.name)
	})
	// The primary order ignores the version, which is ";1" throughout.
	root.entries[primaryTree] = slices.SortedFunc(slices.Values(entries), func(a, b *file) int {
		return compareNames(string(a.ident[primaryTree][:len(a.ident[primaryTree])-2]),
			string(b.ident[primaryTree][:len(b.ident[primaryTree])-2]))
	})
	return root, nil
}

// layout is the result of plan: where everything goes.
type layout struct {
	// dirs are in path table order (9.4.3), the root first.
	dirs  []*directory
	files []*file // in extent order
	// pathTableSize, lPathTable and mPathTable are per tree.
	pathTableSize [numTrees]uint32
	lPathTable    [numTrees]uint32
	mPathTable    [numTrees]uint32
	sectors       uint32
}

// firstFreeSector follows the system area and the three volume descriptors.
const firstFreeSector = 19

// plan assigns every extent, in the order the package doc describes.
func plan(root *directory) (*layout, error) {
	l := &layout{dirs: []*directory{root}, files: root.entries[jolietTree]}
	next := int64(firstFreeSector)
	for t := range numTrees {
		for _, d := range l.dirs {
			l.pathTableSize[t] += uint32(pathTableRecordLen(d, t))
		}
		n := sectorsFor(int64(l.pathTableSize[t]))
		l.lPathTable[t] = uint32(next)
		l.mPathTable[t] = uint32(next + n)
		next += 2 * n
	}
	for t := range numTrees {
		for _, d := range l.dirs {
			_, size := packRecords(directoryRecordLens(d, t))
			d.extent[t], d.size[t] = uint32(next), uint32(size)
			next += sectorsFor(size)
		}
	}
	for _, f := range l.files {
		f.extent = uint32(next)
		next += f.sectors()
	}
	if next > math.MaxUint32 {
		return nil, fmt.Errorf("iso9660: image needs %d sectors; a volume holds at most %d", next, uint32(math.MaxUint32))
	}
	l.sectors = uint32(next)
	return l, nil
}

func sectorsFor(n int64) int64 { return (n + SectorSize - 1) / SectorSize }
