// Package tensorboard writes TensorBoard event files (report_to tensorboard) and reads them back:
// the TFRecord framing, the Event and Summary protocol buffers of scalar summaries, and Run, the
// sink that turns metrics.jsonl records into scalars under OUTPUT_DIR/runs/ as HF's
// TensorBoardCallback does.
//
// An event file is a sequence of TFRecords (tensorflow/core/lib/io/record_writer.cc): the data's
// length as a little-endian uint64, the masked CRC32C of those 8 bytes (uint32), the data, and the
// masked CRC32C of the data (uint32); a masked CRC is ((c>>15)|(c<<17)) + 0xa282ead8. Each record's
// data is one serialized Event; the first carries file_version "brain.Event:2".
package tensorboard

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// FileVersion is the first event of every file (event.proto: "Current version is brain.Event:2").
const FileVersion = "brain.Event:2"

// Field numbers, from tensorflow/tensorboard's tensorboard/compat/proto/event.proto and
// summary.proto (proto3):
//
//	message Event      { double wall_time = 1; int64 step = 2;
//	                     oneof what { string file_version = 3; ...; Summary summary = 5; ...;
//	                                  SessionLog session_log = 7; ... } }
//	message SessionLog { SessionStatus status = 1; ... }   // enum SessionStatus { ...; START = 1; ... }
//	message Summary    { repeated Value value = 1; }
//	message Value      { string tag = 1; oneof value { float simple_value = 2; ... } }
const (
	eventWallTime    protowire.Number = 1
	eventStep        protowire.Number = 2
	eventFileVersion protowire.Number = 3
	eventSummary     protowire.Number = 5
	eventSessionLog  protowire.Number = 7
	sessionStatus    protowire.Number = 1
	summaryValue     protowire.Number = 1
	valueTag         protowire.Number = 1
	valueSimple      protowire.Number = 2

	sessionStart = 1 // SessionLog.START
)

// Value is one scalar of a summary: Summary.Value{tag, simple_value}.
type Value struct {
	Tag    string
	Simple float32
}

// Event is the subset of TensorBoard's Event that posttrain writes: a file_version header, a
// SessionLog START (TensorBoard then drops what it has read at steps ≥ Step: a restart), or a
// summary of scalar values.
type Event struct {
	WallTime     float64 // seconds since the Unix epoch
	Step         int64
	FileVersion  string // set on the first event of a file only
	SessionStart bool
	Values       []Value
}

// Marshal returns the event's protobuf encoding.
func (e Event) Marshal() []byte {
	var b []byte
	if e.WallTime != 0 {
		b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(e.WallTime))
	}
	if e.Step != 0 {
		b = protowire.AppendTag(b, eventStep, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(e.Step))
	}
	switch {
	case e.FileVersion != "":
		b = protowire.AppendTag(b, eventFileVersion, protowire.BytesType)
		b = protowire.AppendString(b, e.FileVersion)
	case e.SessionStart:
		var s []byte
		s = protowire.AppendTag(s, sessionStatus, protowire.VarintType)
		s = protowire.AppendVarint(s, sessionStart)
		b = protowire.AppendTag(b, eventSessionLog, protowire.BytesType)
		b = protowire.AppendBytes(b, s)
	case len(e.Values) > 0:
		var sum []byte
		for _, v := range e.Values {
			var vb []byte
			vb = protowire.AppendTag(vb, valueTag, protowire.BytesType)
			vb = protowire.AppendString(vb, v.Tag)
			vb = protowire.AppendTag(vb, valueSimple, protowire.Fixed32Type)
			vb = protowire.AppendFixed32(vb, math.Float32bits(v.Simple))
			sum = protowire.AppendTag(sum, summaryValue, protowire.BytesType)
			sum = protowire.AppendBytes(sum, vb)
		}
		b = protowire.AppendTag(b, eventSummary, protowire.BytesType)
		b = protowire.AppendBytes(b, sum)
	}
	return b
}

// Unmarshal decodes an event; fields and summary values of other kinds are skipped.
func Unmarshal(b []byte) (Event, error) {
	var e Event
	err := fields(b, func(num protowire.Number, typ protowire.Type, raw []byte, x uint64) error {
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			e.WallTime = math.Float64frombits(x)
		case num == eventStep && typ == protowire.VarintType:
			e.Step = int64(x)
		case num == eventFileVersion && typ == protowire.BytesType:
			e.FileVersion = string(raw)
		case num == eventSessionLog && typ == protowire.BytesType:
			return fields(raw, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if num == sessionStatus && typ == protowire.VarintType && x == sessionStart {
					e.SessionStart = true
				}
				return nil
			})
		case num == eventSummary && typ == protowire.BytesType:
			return fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
				if num != summaryValue || typ != protowire.BytesType {
					return nil
				}
				var v Value
				simple := false
				err := fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, x uint64) error {
					switch {
					case num == valueTag && typ == protowire.BytesType:
						v.Tag = string(raw)
					case num == valueSimple && typ == protowire.Fixed32Type:
						v.Simple, simple = math.Float32frombits(uint32(x)), true
					}
					return nil
				})
				if err == nil && simple {
					e.Values = append(e.Values, v)
				}
				return err
			})
		}
		return nil
	})
	return e, err
}

// fields calls f for each field of the message b: raw holds a length-delimited field's bytes, x a
// varint or fixed-size field's value.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, raw []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("protobuf: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var raw []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			x = uint64(v)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("protobuf field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, typ, raw, x); err != nil {
			return err
		}
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC32C (tensorflow/core/lib/hash/crc32c.h, Mask).
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// AppendRecord appends data framed as one TFRecord.
func AppendRecord(buf, data []byte) []byte {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	buf = append(buf, n[:]...)
	buf = binary.LittleEndian.AppendUint32(buf, maskedCRC(n[:]))
	buf = append(buf, data...)
	return binary.LittleEndian.AppendUint32(buf, maskedCRC(data))
}

// ErrTruncated is returned by ParseRecords when the data ends inside a record (a writer killed
// mid-write); the complete records before it are returned with it.
var ErrTruncated = fmt.Errorf("the last record is cut short")

// ParseRecords splits TFRecord-framed data into the records' data, checking both CRCs. A CRC
// mismatch is an error naming the record's byte offset.
func ParseRecords(data []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(data); {
		if len(data)-off < 12 {
			return out, ErrTruncated
		}
		hdr := data[off : off+8]
		if got, want := binary.LittleEndian.Uint32(data[off+8:]), maskedCRC(hdr); got != want {
			return out, fmt.Errorf("record at byte %d: length CRC %#08x, want %#08x", off, got, want)
		}
		n := binary.LittleEndian.Uint64(hdr)
		if n > uint64(len(data)-off-12) || uint64(len(data)-off-12)-n < 4 {
			return out, ErrTruncated
		}
		body := data[off+12 : off+12+int(n)]
		if got, want := binary.LittleEndian.Uint32(data[off+12+int(n):]), maskedCRC(body); got != want {
			return out, fmt.Errorf("record at byte %d: data CRC %#08x, want %#08x", off, got, want)
		}
		out = append(out, body)
		off += 12 + int(n) + 4
	}
	return out, nil
}
