package tensorboard

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/posttrain/posttrain/internal/runlog"
)

// The CRC32C check value of "123456789" is 0xe3069283 (RFC 3720, B.4); TFRecord masks it.
func TestMaskedCRC(t *testing.T) {
	if c := crc32.Checksum([]byte("123456789"), castagnoli); c != 0xe3069283 {
		t.Fatalf("crc32c = %#x", c)
	}
	c := uint32(0xe3069283)
	if got, want := maskedCRC([]byte("123456789")), ((c>>15)|(c<<17))+0xa282ead8; got != want {
		t.Errorf("masked = %#x, want %#x", got, want)
	}
}

// The encoding of a scalar event, byte by byte as protobuf writes it (field number << 3 | wire
// type), then decoded back.
func TestEventEncoding(t *testing.T) {
	e := Event{WallTime: 1.5, Step: 300, Values: []Value{{Tag: "train/loss", Simple: 0.25}}}
	b := e.Marshal()
	want := []byte{0x09} // wall_time = 1, fixed64
	want = binary.LittleEndian.AppendUint64(want, math.Float64bits(1.5))
	want = append(want, 0x10, 0xac, 0x02) // step = 2, varint 300
	value := append([]byte{0x0a, 10}, "train/loss"...)
	value = binary.LittleEndian.AppendUint32(append(value, 0x15), math.Float32bits(0.25)) // simple_value = 2, fixed32
	summary := append([]byte{0x0a, byte(len(value))}, value...)                           // Summary.value = 1
	want = append(append(want, 0x2a, byte(len(summary))), summary...)                     // Event.summary = 5
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", b, want)
	}
	for _, e := range []Event{e, {WallTime: 2, FileVersion: FileVersion}, {WallTime: 3, Step: 7, SessionStart: true},
		{Step: 1, Values: []Value{{"a", float32(math.NaN())}, {"b", float32(math.Inf(-1))}}}} {
		got, err := Unmarshal(e.Marshal())
		if err != nil {
			t.Fatal(err)
		}
		if !sameEvent(got, e) {
			t.Errorf("round trip: %+v, want %+v", got, e)
		}
	}
	if b := (Event{WallTime: 3, Step: 7, SessionStart: true}).Marshal(); !strings.Contains(string(b), "\x3a\x02\x08\x01") {
		t.Errorf("session_log (7) {status (1): START (1)} not in %x", b)
	}
}

func sameEvent(a, b Event) bool {
	if a.WallTime != b.WallTime || a.Step != b.Step || a.FileVersion != b.FileVersion || a.SessionStart != b.SessionStart || len(a.Values) != len(b.Values) {
		return false
	}
	for i := range a.Values {
		if a.Values[i].Tag != b.Values[i].Tag || math.Float32bits(a.Values[i].Simple) != math.Float32bits(b.Values[i].Simple) {
			return false
		}
	}
	return true
}

// A file reads back as written; a last record cut short ends it; a flipped byte is an error
// naming the file and the record's offset.
func TestWriterReadFile(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(w.Path()), "events.out.tfevents.1700000000.") {
		t.Errorf("file name %s", w.Path())
	}
	evs := []Event{{WallTime: 1, Step: 1, Values: []Value{{"train/loss", 0.5}}}, {WallTime: 2, Step: 2, Values: []Value{{"train/loss", 0.25}}}}
	if err := w.Write(evs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].FileVersion != FileVersion || got[0].WallTime != 1700000000 || !sameEvent(got[1], evs[0]) || !sameEvent(got[2], evs[1]) {
		t.Fatalf("read %+v", got)
	}
	data, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.Path(), data[:len(data)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(w.Path()); err != nil || len(got) != 2 {
		t.Errorf("cut short: %d events, %v; want 2", len(got), err)
	}
	data[len(data)-6] ^= 1
	if err := os.WriteFile(w.Path(), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(w.Path()); err == nil || !strings.Contains(err.Error(), w.Path()+": record at byte ") || !strings.Contains(err.Error(), "data CRC") {
		t.Errorf("corrupted: %v", err)
	}
	if _, err := ParseRecords(data[:5]); !errors.Is(err, ErrTruncated) {
		t.Errorf("5 bytes: %v", err)
	}
}

// HF's rewrite_logs names.
func TestTag(t *testing.T) {
	for k, want := range map[string]string{"loss": "train/loss", "rewards/chosen": "train/rewards/chosen", "eval_loss": "eval/loss",
		"eval_rewards/margins": "eval/rewards/margins", "test_loss": "test/loss", "learning_rate": "train/learning_rate"} {
		if got := Tag(k); got != want {
			t.Errorf("Tag(%q) = %q, want %q", k, got, want)
		}
	}
}

func rec(step int, epoch float64, kv ...any) runlog.Record {
	r := runlog.Record{Step: step, Epoch: epoch, Metrics: map[string]float64{}}
	for i := 0; i < len(kv); i += 2 {
		r.Metrics[kv[i].(string)] = kv[i+1].(float64)
	}
	return r
}

func writeRun(t *testing.T, out string, resume int, recs ...runlog.Record) string {
	t.Helper()
	r, err := OpenRun(out, resume, time.Date(2026, 12, 1, 15, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range recs {
		if err := r.Write(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return r.Dir()
}

// A run's scalars: every metric at its step with HF's tags, train/epoch once per step. A resume
// keeps the events at steps ≤ the checkpoint's, drops the later ones from the file (a record cut
// short too) and continues in a new file that starts with a SessionLog START at the next step.
func TestRun_WriteAndResume(t *testing.T) {
	out := t.TempDir()
	host, _ := os.Hostname()
	lines := []runlog.Record{
		rec(1, 0.5, "loss", 2.0, "learning_rate", 3e-4), rec(2, 1, "loss", 1.5, "learning_rate", 2e-4),
		rec(2, 1, "eval_loss", 1.75), rec(3, 1.5, "loss", 1.25, "learning_rate", 1e-4),
	}
	dir := writeRun(t, out, 0, lines...)
	if want := filepath.Join(out, "runs", "Dec01_15-04-05_"+host); dir != want {
		t.Errorf("log dir %s, want %s", dir, want)
	}
	evs, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Scalar{{"train/loss", 1, 2}, {"train/learning_rate", 1, 3e-4}, {"train/epoch", 1, 0.5},
		{"train/loss", 2, 1.5}, {"train/learning_rate", 2, 2e-4}, {"train/epoch", 2, 1}, {"eval/loss", 2, 1.75},
		{"train/loss", 3, 1.25}, {"train/learning_rate", 3, 1e-4}, {"train/epoch", 3, 1.5}}
	if got := Scalars(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("scalars\n%v\nwant\n%v", got, want)
	}
	if !evs[1].SessionStart || evs[1].Step != 0 {
		t.Errorf("second event %+v, want SessionLog START at step 0", evs[1])
	}
	files, err := EventFiles(dir)
	if err != nil || len(files) != 1 {
		t.Fatalf("event files %v, %v; want one", files, err)
	}
	f, err := os.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(AppendRecord(nil, Event{Step: 4, Values: []Value{{"train/loss", 1}}}.Marshal())[:9]); err != nil { // killed mid-write
		t.Fatal(err)
	}
	f.Close()

	// Resume from step 2 (the line of step 3 was logged after the checkpoint), then step 3 again.
	if got := writeRun(t, out, 2, rec(3, 1.5, "loss", 1.125)); got != dir {
		t.Errorf("resumed in %s, want %s", got, dir)
	}
	if files, err = EventFiles(dir); err != nil || len(files) != 2 {
		t.Fatalf("event files %v, %v; want two", files, err)
	}
	first, err := ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := Scalars(first); !reflect.DeepEqual(got, want[:7]) {
		t.Errorf("the first file after the resume\n%v\nwant\n%v", got, want[:7])
	}
	second, err := ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 4 || !second[1].SessionStart || second[1].Step != 3 {
		t.Fatalf("the second file %+v; want header, SessionLog START at step 3, 2 scalars", second)
	}
	want = append(want[:7:7], Scalar{"train/loss", 3, 1.125}, Scalar{"train/epoch", 3, 1.5})
	if got := Scalars(append(first, second...)); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the resume\n%v\nwant\n%v", got, want)
	}

	// Resumed again from step 1: both files lose their events after step 1 (the second keeps its
	// header only, the first its START at step 0); a third one starts.
	writeRun(t, out, 1)
	if files, err = EventFiles(dir); err != nil || len(files) != 3 {
		t.Fatalf("event files %v, %v; want three", files, err)
	}
	evs, err = ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := Scalars(evs); !reflect.DeepEqual(got, want[:3]) {
		t.Fatalf("after the second resume\n%v\nwant\n%v", got, want[:3])
	}
	if n := len(evs); n != 8 || !evs[1].SessionStart || evs[1].Step != 0 || !evs[n-1].SessionStart || evs[n-1].Step != 2 {
		t.Errorf("events %+v; want 3 headers, the START at step 0, 3 scalars and a START at step 2", evs)
	}
}

// A resume with no TensorBoard run to continue (report_to none until now) starts one.
func TestRun_ResumeWithoutRun(t *testing.T) {
	out := t.TempDir()
	dir := writeRun(t, out, 5, rec(6, 1, "loss", 1.0))
	evs, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Scalars(evs), []Scalar{{"train/loss", 6, 1}, {"train/epoch", 6, 1}}; !reflect.DeepEqual(got, want) {
		t.Errorf("scalars %v, want %v", got, want)
	}
	if !evs[1].SessionStart || evs[1].Step != 6 {
		t.Errorf("second event %+v, want SessionLog START at step 6", evs[1])
	}
}

// An event kept after a dropped one (a resume's START at step 3, then eval_on_start's line of
// step 2): the file is rewritten without the dropped ones.
func TestRun_ResumeRewritesAroundDroppedEvents(t *testing.T) {
	out := t.TempDir()
	dir := filepath.Join(out, RunsDir, "run")
	w, err := Create(dir, time.Unix(1, 0), Event{Step: 3, SessionStart: true}, Event{Step: 2, Values: []Value{{"eval/loss", 1.5}}},
		Event{Step: 3, Values: []Value{{"train/loss", 1}}})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	writeRun(t, out, 2)
	evs, err := ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].FileVersion != FileVersion || !reflect.DeepEqual(Scalars(evs), []Scalar{{"eval/loss", 2, 1.5}}) {
		t.Errorf("rewritten file %+v; want the header and eval/loss at step 2", evs)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".*")); len(tmp) != 0 {
		t.Errorf("temporaries left: %v", tmp)
	}
}
