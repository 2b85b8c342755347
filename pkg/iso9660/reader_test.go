package iso9660

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf16"
)

// parsedImage is what readImage found: for each tree, the root's files by
// recorded name (primary names keep their ";1").
type parsedImage struct {
	label   string
	primary map[string][]byte
	joliet  map[string][]byte
	// jolietExtent is where each Joliet file starts.
	jolietExtent map[string]uint32
	// rootLBA and pathTableLBA are the root directory and L/M path table
	// sectors of each tree.
	rootLBA      [numTrees]uint32
	pathTableLBA [numTrees][2]uint32
}

// readImage is an independent, strict reader for the images this package
// writes. It checks the structural rules a lenient reader would forgive:
// both-endian fields agree, the volume space size is the image size, no
// directory record crosses a sector, and every extent lies inside the image
// without overlapping another.
func readImage(img []byte) (*parsedImage, error) {
	if len(img)%SectorSize != 0 || len(img) < 25*SectorSize {
		return nil, fmt.Errorf("image size %d is not a whole number of sectors past the descriptors", len(img))
	}
	if !bytes.Equal(img[:16*SectorSize], make([]byte, 16*SectorSize)) {
		return nil, errors.New("system area is not zero")
	}
	sector := func(lba uint32) []byte { return img[int(lba)*SectorSize : int(lba+1)*SectorSize] }
	p := &parsedImage{primary: map[string][]byte{}, joliet: map[string][]byte{}, jolietExtent: map[string]uint32{}}
	used := map[uint32]string{}
	claim := func(lba, n uint32, what string) error {
		if int(lba+n)*SectorSize > len(img) {
			return fmt.Errorf("%s extent %d+%d runs past the image", what, lba, n)
		}
		for s := lba; s < lba+n; s++ {
			if prev, ok := used[s]; ok {
				return fmt.Errorf("%s and %s share sector %d", what, prev, s)
			}
			used[s] = what
		}
		return nil
	}
	for i, want := range []byte{typePrimary, typeSupplementary, typeTerminator} {
		vd := sector(uint32(16 + i))
		if vd[0] != want || string(vd[1:6]) != standardID || vd[6] != 1 {
			return nil, fmt.Errorf("sector %d is not a version 1 descriptor of type %d", 16+i, want)
		}
		if err := claim(uint32(16+i), 1, fmt.Sprintf("descriptor %d", i)); err != nil {
			return nil, err
		}
	}
	for t := range numTrees {
		vd := sector(uint32(16 + t))
		if t == jolietTree && string(vd[88:91]) != jolietEscape {
			return nil, fmt.Errorf("supplementary descriptor escape is %q", vd[88:91])
		}
		spaceSize, err := both32(vd[80:])
		if err != nil {
			return nil, fmt.Errorf("volume space size: %w", err)
		}
		if int(spaceSize)*SectorSize != len(img) {
			return nil, fmt.Errorf("volume space size %d sectors, image is %d bytes", spaceSize, len(img))
		}
		for _, off := range []int{120, 124} {
			if v, err := both16(vd[off:]); err != nil || v != 1 {
				return nil, fmt.Errorf("volume set field at %d = %d, %v", off, v, err)
			}
		}
		if bs, err := both16(vd[128:]); err != nil || bs != SectorSize {
			return nil, fmt.Errorf("logical block size %d, %v", bs, err)
		}
		if vd[881] != 1 {
			return nil, errors.New("file structure version is not 1")
		}
		ptSize, err := both32(vd[132:])
		if err != nil {
			return nil, fmt.Errorf("path table size: %w", err)
		}
		lLBA, mLBA := binary.LittleEndian.Uint32(vd[140:]), binary.BigEndian.Uint32(vd[148:])
		p.pathTableLBA[t] = [2]uint32{lLBA, mLBA}
		ptSectors := (ptSize + SectorSize - 1) / SectorSize
		if err := claim(lLBA, ptSectors, "L path table"); err != nil {
			return nil, err
		}
		if err := claim(mLBA, ptSectors, "M path table"); err != nil {
			return nil, err
		}
		rootRec, err := parseRecord(vd[156:190])
		if err != nil {
			return nil, fmt.Errorf("root record: %w", err)
		}
		lTable, mTable := img[int(lLBA)*SectorSize:][:ptSize], img[int(mLBA)*SectorSize:][:ptSize]
		if ptSize != 10 || lTable[0] != 1 || lTable[8] != 0 || binary.LittleEndian.Uint16(lTable[6:]) != 1 ||
			binary.LittleEndian.Uint32(lTable[2:]) != rootRec.extent {
			return nil, fmt.Errorf("L path table %x does not describe root at %d", lTable, rootRec.extent)
		}
		if mTable[0] != 1 || mTable[8] != 0 || binary.BigEndian.Uint16(mTable[6:]) != 1 ||
			binary.BigEndian.Uint32(mTable[2:]) != rootRec.extent {
			return nil, fmt.Errorf("M path table %x does not describe root at %d", mTable, rootRec.extent)
		}
		p.rootLBA[t] = rootRec.extent
		if rootRec.length%SectorSize != 0 || rootRec.flags != flagDirectory {
			return nil, fmt.Errorf("root record length %d flags %#x", rootRec.length, rootRec.flags)
		}
		if err := claim(rootRec.extent, rootRec.length/SectorSize, "root directory"); err != nil {
			return nil, err
		}
		if t == primaryTree {
			p.label = string(bytes.TrimRight(vd[40:72], " "))
		}
		files := p.primary
		if t == jolietTree {
			files = p.joliet
		}
		dir := img[int(rootRec.extent)*SectorSize:][:rootRec.length]
		for i, off := 0, 0; off < len(dir); i++ {
			if dir[off] == 0 { // no more records in this sector (6.8.1.1)
				off = (off/SectorSize + 1) * SectorSize
				continue
			}
			n := int(dir[off])
			if off%SectorSize+n > SectorSize {
				return nil, fmt.Errorf("record at %d crosses a sector", off)
			}
			rec, err := parseRecord(dir[off : off+n])
			if err != nil {
				return nil, fmt.Errorf("record at %d: %w", off, err)
			}
			off += n
			switch i {
			case 0, 1:
				if !bytes.Equal(rec.ident, []byte{byte(i)}) || rec.extent != rootRec.extent ||
					rec.length != rootRec.length || rec.flags != flagDirectory {
					return nil, fmt.Errorf("record %d is not a root self-reference: %+v", i, rec)
				}
				continue
			}
			if rec.flags != 0 {
				return nil, fmt.Errorf("record %q has flags %#x", rec.ident, rec.flags)
			}
			name := string(rec.ident)
			if t == jolietTree {
				if len(rec.ident)%2 != 0 {
					return nil, fmt.Errorf("odd Joliet identifier %x", rec.ident)
				}
				units := make([]uint16, len(rec.ident)/2)
				for j := range units {
					units[j] = binary.BigEndian.Uint16(rec.ident[2*j:])
				}
				name = string(utf16.Decode(units))
			}
			if _, dup := files[name]; dup {
				return nil, fmt.Errorf("name %q recorded twice", name)
			}
			end := int(rec.extent)*SectorSize + int(rec.length)
			if end > len(img) {
				return nil, fmt.Errorf("file %q runs past the image", name)
			}
			if t == primaryTree {
				if err := claim(rec.extent, max(1, (rec.length+SectorSize-1)/SectorSize), "file "+name); err != nil {
					return nil, err
				}
			}
			files[name] = img[int(rec.extent)*SectorSize : end]
			if t == jolietTree {
				p.jolietExtent[name] = rec.extent
			}
		}
	}
	return p, nil
}

type record struct {
	ident          []byte
	extent, length uint32
	flags          byte
}

func parseRecord(b []byte) (record, error) {
	if len(b) < dirRecordFixedLen || int(b[0]) != len(b) {
		return record{}, fmt.Errorf("record length %d, slice %d", b[0], len(b))
	}
	extent, err := both32(b[2:])
	if err != nil {
		return record{}, fmt.Errorf("extent: %w", err)
	}
	length, err := both32(b[10:])
	if err != nil {
		return record{}, fmt.Errorf("data length: %w", err)
	}
	if seq, err := both16(b[28:]); err != nil || seq != 1 {
		return record{}, fmt.Errorf("volume sequence number %d, %v", seq, err)
	}
	n := int(b[32])
	if dirRecordLen(n) != len(b) {
		return record{}, fmt.Errorf("identifier length %d in a %d-byte record", n, len(b))
	}
	return record{ident: b[33 : 33+n], extent: extent, length: length, flags: b[25]}, nil
}

func both16(b []byte) (uint16, error) {
	le, be := binary.LittleEndian.Uint16(b), binary.BigEndian.Uint16(b[2:])
	if le != be {
		return 0, fmt.Errorf("both-endian mismatch %d/%d", le, be)
	}
	return le, nil
}

func both32(b []byte) (uint32, error) {
	le, be := binary.LittleEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	if le != be {
		return 0, fmt.Errorf("both-endian mismatch %d/%d", le, be)
	}
	return le, nil
}
