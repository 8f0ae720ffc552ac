package sink

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/schema"
	vmsgpack "github.com/vmihailenco/msgpack/v5"
)

func encodeFixture(t testing.TB, n, bs int, keep bool) []byte {
	var buf bytes.Buffer
	writeFixture(t, NewMsgpack(&buf), n, bs, keep)
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	data := encodeFixture(t, 100, 16, true)
	s, err := Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	h := s.Header
	if !reflect.DeepEqual(h.Strings, []string{"dataset"}) {
		t.Fatalf("strings %v", h.Strings)
	}
	if h.Format != FormatVersion || h.Dataset != "lrstream/fixture" || h.FPS != 30 || h.BatchSize != 16 || !h.KeepLanguage {
		t.Fatalf("header %+v", h)
	}
	if len(h.Features) != 9 || h.Features[5].Name != "observation.state" || !reflect.DeepEqual(h.Features[8].Shape, []int{2, 3}) {
		t.Fatalf("features %+v", h.Features)
	}
	var tools any
	if err := json.Unmarshal(h.Tools, &tools); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(h.Tools), `[{"type":"function","function":{"name":"say","description"`) {
		t.Fatalf("tools order not preserved: %s", h.Tools)
	}
	kept := 100 - 100/7
	if s.End == nil || s.End.Samples != int64(kept) || s.End.Dropped != 100/7 || len(s.End.Components) != 2 || s.End.Components[1].Name != "high" {
		t.Fatalf("end %+v", s.End)
	}
	var want []int
	for i := 0; i < 100; i++ {
		if i%7 != 6 {
			want = append(want, i)
		}
	}
	pos := 0
	for bi, b := range s.Batches {
		if b.Meta.Seq != int64(bi) || b.Meta.Resume == "" {
			t.Fatalf("meta %+v", b.Meta)
		}
		names := []string{}
		for _, c := range b.Columns {
			names = append(names, c.Name)
		}
		wantNames := "index episode_index frame_index timestamp task_index observation.state action observation.flag observation.grid task dataset messages message_streams target_message_indices language_persistent language_events"
		if strings.Join(names, " ") != wantNames {
			t.Fatalf("columns %v", names)
		}
		idx := b.Column("index").(*Array)
		st := b.Column("observation.state").(*Array)
		grid := b.Column("observation.grid").(*Array)
		if idx.DType != "<i8" || !reflect.DeepEqual(st.Shape, []int{b.Size, dim}) || !reflect.DeepEqual(grid.Shape, []int{b.Size, 2, 3}) {
			t.Fatalf("arrays %+v %+v", idx, st.Shape)
		}
		if ds := b.Column("dataset").([]any); len(ds) != b.Size || (ds[0] != "ds_a" && ds[0] != "ds_b") {
			t.Fatalf("dataset column %v", ds)
		}
		msgs := b.Column("messages").([]any)
		for i := 0; i < b.Size; i++ {
			fi := want[pos]
			pos++
			if got := int(binary.LittleEndian.Uint64(idx.Data[8*i:])); got != fi {
				t.Fatalf("index %d want %d", got, fi)
			}
			if got := math.Float32frombits(binary.LittleEndian.Uint32(st.Data[4*(i*dim+3):])); got != float32(fi)+0.03 {
				t.Fatalf("state %v", got)
			}
			ms := msgs[i].([]any)
			exp := fixtureSample(fi)
			if len(ms) != len(exp.Messages) {
				t.Fatalf("messages %v", ms)
			}
			m0 := ms[0].(schema.Map)
			if !reflect.DeepEqual(m0.Keys, []string{"role", "content"}) || m0.Values[1] != exp.Messages[0].Text {
				t.Fatalf("message %v", m0)
			}
			blocks := ms[2].(schema.Map).Values[1].([]any)
			if blocks[2].(schema.Map).Values[1] != int64(-5) {
				t.Fatalf("blocks %v", blocks)
			}
			if fi%3 == 0 {
				tc := ms[4].(schema.Map)
				if !reflect.DeepEqual(tc.Keys, []string{"role", "tool_calls"}) {
					t.Fatalf("tool call message keys %v", tc.Keys)
				}
				js, err := appendJSONValue(nil, tc.Values[1])
				if err != nil {
					t.Fatal(err)
				}
				if string(js) != `[{"type":"function","function":{"name":"say","arguments":{"text":"hello é🤖","z":1,"a":[1.5,-2,"Infinity",null,true]}}}]` {
					t.Fatalf("tool calls %s", js)
				}
			}
		}
	}
	if pos != kept {
		t.Fatalf("decoded %d samples, want %d", pos, kept)
	}
}

// TestThirdPartyDecoder checks the bytes with an independent msgpack
// implementation.
func TestThirdPartyDecoder(t *testing.T) {
	data := encodeFixture(t, 40, 8, true)
	dec := vmsgpack.NewDecoder(bytes.NewReader(data))
	types := []string{}
	for {
		v, err := dec.DecodeInterface()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("message is %T", v)
		}
		types = append(types, m["type"].(string))
		if m["type"] == "batch" {
			cols := m["columns"].(map[string]any)
			if len(cols["task"].([]any)) != int(m["size"].(int8)) {
				t.Fatal("task length")
			}
		}
	}
	if types[0] != "header" || types[len(types)-1] != "end" || len(types) != 2+5 {
		t.Fatalf("types %v", types)
	}
}

func TestDeterministic(t *testing.T) {
	a := encodeFixture(t, 77, 10, true)
	b := encodeFixture(t, 77, 10, true)
	if !bytes.Equal(a, b) {
		t.Fatal("encoding is not deterministic")
	}
}

func TestRawRoundTrip(t *testing.T) {
	data := encodeFixture(t, 30, 8, false)
	d := NewDecoder(bytes.NewReader(data))
	var out bytes.Buffer
	for {
		m, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out.Write(m.Raw)
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Fatal("Raw bytes do not reproduce the stream")
	}
}

func TestTruncated(t *testing.T) {
	data := encodeFixture(t, 30, 8, false)
	for _, cut := range []int{1, 10, len(data) / 2, len(data) - 1} {
		_, err := Decode(bytes.NewReader(data[:cut]))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut %d: %v", cut, err)
		}
	}
	// A stream cut exactly between messages lacks its end.
	var prefix []byte
	d := NewDecoder(bytes.NewReader(data))
	for i := 0; i < 3; i++ {
		m, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		prefix = append(prefix, m.Raw...)
	}
	if _, err := Decode(bytes.NewReader(prefix)); !errors.Is(err, ErrNoEnd) {
		t.Fatalf("got %v", err)
	}
}

func TestFail(t *testing.T) {
	var buf bytes.Buffer
	s := NewMsgpack(&buf)
	if err := s.Header(Header{BatchSize: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Fail(errors.New("render: episode 3: boom")); err != nil {
		t.Fatal(err)
	}
	if err := s.End(End{}); err == nil {
		t.Fatal("End after Fail should fail")
	}
	_, err := Decode(&buf)
	var se *StreamError
	if !errors.As(err, &se) || se.Message != "render: episode 3: boom" {
		t.Fatalf("got %v", err)
	}
	// A stream may be a lone error.
	buf.Reset()
	if err := NewMsgpack(&buf).Fail(errors.New("no dataset")); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(&buf); !errors.As(err, &se) {
		t.Fatalf("got %v", err)
	}
}

func TestOrder(t *testing.T) {
	s := NewMsgpack(io.Discard)
	if err := s.End(End{}); err == nil {
		t.Fatal("End before Header should fail")
	}
}

func TestJSONTranscoder(t *testing.T) {
	for _, src := range []string{
		`null`, `true`, `false`, `0`, `-1`, `-33`, `127`, `128`, `-129`, `65536`, `-2147483649`, `9223372036854775807`,
		`18446744073709551615`, `1.5`, `-0.0`, `1e-7`, `""`, `"a\"b\\c\/\b\f\n\r\t\u0001\u00e9\ud83e\udd16"`,
		`[]`, `{}`, ` [1, [2, [3, {}]], {"b": 1, "a": 2}] `, `{"z": {"y": [1, 2, 3], "x": null}, "a": "s"}`,
		`"` + strings.Repeat("x", 40) + `"`, `"` + strings.Repeat("y", 300) + `"`, `"` + strings.Repeat("y", 70000) + `"`,
		`[` + strings.Repeat("1,", 20) + `1]`, `[` + strings.Repeat("1,", 70000) + `1]`,
	} {
		mp, err := appendJSONAsMsgpack(nil, []byte(src))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		v, err := NewDecoder(bytes.NewReader(mp)).value(0)
		if err != nil {
			t.Fatalf("%.40q: %v", src, err)
		}
		js, err := appendJSONValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal([]byte(src), &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(js, &b); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%.60q -> %.60s", src, js)
		}
		// Cross-check with vmihailenco.
		var w any
		if err := vmsgpack.Unmarshal(mp, &w); err != nil {
			t.Fatalf("%.40q: third-party decode: %v", src, err)
		}
	}
	if v, _ := NewDecoder(bytes.NewReader(must(appendJSONAsMsgpack(nil, []byte(`{"b":1,"a":2}`))))).value(0); !reflect.DeepEqual(v.(schema.Map).Keys, []string{"b", "a"}) {
		t.Fatal("key order lost")
	}
	for _, bad := range []string{``, `[`, `{"a"}`, `{"a":1,}`, `tru`, `"abc`, `1 2`, `[1,]`, `{1:2}`, "\"\x01\"",
		`00`, `01`, `-01`, `+1`, `1.`, `.5`, `-`, `1e`, `1e+`, `[1.e3]`, `-.5`} {
		if _, err := appendJSONAsMsgpack(nil, []byte(bad)); err == nil {
			t.Errorf("%q: want error", bad)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestJSONL(t *testing.T) {
	var buf bytes.Buffer
	writeFixture(t, NewJSONL(&buf), 20, 8, true)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2+3 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %v\n%s", i, err, l)
		}
	}
	if !strings.Contains(lines[1], `"observation.grid":[[[0,-1,-2],[-3,-4,-5]],`) || !strings.Contains(lines[1], `"observation.flag":[false,true,`) {
		t.Fatalf("batch line: %.2000s", lines[1])
	}
	if !strings.Contains(lines[1], `"timestamp":[0.0,0.033333335,`) {
		t.Fatalf("timestamps: %.3000s", lines[1])
	}
}

func TestHello(t *testing.T) {
	for _, h := range []Hello{{NumWorkers: 1, WorldSize: 1}, {Worker: 2, NumWorkers: 3, Rank: 1, WorldSize: 4, Resume: "e1:p42"}} {
		b := AppendHello(nil, h)
		r := bytes.NewReader(append(b, 0xff)) // trailing byte must stay unread
		got, err := ReadHello(r)
		if err != nil || got != h {
			t.Fatalf("got %+v, %v; want %+v", got, err, h)
		}
		if r.Len() != 1 {
			t.Fatalf("ReadHello read ahead: %d bytes left", r.Len())
		}
	}
	// Defaults, unknown keys, and what Python's msgpack.packb sends.
	got, err := ReadHello(bytes.NewReader(must(appendJSONAsMsgpack(nil, []byte(`{"worker": 1, "num_workers": 2, "extra": [1]}`)))))
	if err != nil || got != (Hello{Worker: 1, NumWorkers: 2, WorldSize: 1}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, bad := range []string{`[]`, `{"worker": 2, "num_workers": 2}`, `{"rank": -1}`, `{"world_size": 0}`, `{"worker": "0"}`, `{"resume": 5}`} {
		if _, err := ReadHello(bytes.NewReader(must(appendJSONAsMsgpack(nil, []byte(bad))))); err == nil {
			t.Errorf("%s: want error", bad)
		}
	}
	if _, err := ReadHello(bytes.NewReader([]byte{0x84})); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated hello: %v", err)
	}
}

func TestPreview(t *testing.T) {
	var buf bytes.Buffer
	writeFixture(t, NewPreview(&buf, 2), 20, 8, false)
	out := buf.String()
	for _, want := range []string{"lrstream/1 stream: dataset lrstream/fixture @ 0123abcd, 30 fps", "columns: index <i8[], ",
		"batch 0 (epoch 0): 8 rendered samples, index 0..8", `[1] index 1, episode 0, frame 1, t=0.033s, task "task 1"`,
		"     *assistant [high_level]: Plan: 1. reach\\n2. grasp", `tool_calls=[{"type":"function"`, "… 6 more", "end: 20 frames read"} {
		if !strings.Contains(out, want) {
			t.Errorf("preview lacks %q:\n%s", want, out)
		}
	}
}

// TestPreviewShowsFirstBatchesOnly: a long stream previews PreviewBatches
// batches and counts the rest.
func TestPreviewShowsFirstBatchesOnly(t *testing.T) {
	var buf bytes.Buffer
	writeFixture(t, NewPreview(&buf, 1), 100, 8, false)
	out := buf.String()
	if n := strings.Count(out, "\nbatch "); n != PreviewBatches {
		t.Fatalf("%d batches shown, want %d:\n%s", n, PreviewBatches, out)
	}
	if !strings.Contains(out, "… 8 more batches not shown") || !strings.Contains(out, "end: 100 frames read") {
		t.Fatalf("preview of 11 batches:\n%s", out)
	}
}

func TestNextRaw(t *testing.T) {
	data := encodeFixture(t, 50, 8, true)
	d := NewDecoder(bytes.NewReader(data))
	var out bytes.Buffer
	var types []string
	for {
		typ, raw, err := d.NextRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, typ)
		out.Write(raw)
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Fatal("NextRaw bytes do not reproduce the stream")
	}
	if len(types) != 2+6 || types[0] != TypeHeader || types[1] != TypeBatch || types[7] != TypeEnd {
		t.Fatalf("types %v", types)
	}
	if _, _, err := NewDecoder(bytes.NewReader(data[:len(data)-2])).NextRaw(); err != nil {
		t.Fatal(err) // the header is complete
	}
	d = NewDecoder(bytes.NewReader(data[:100]))
	if _, _, err := d.NextRaw(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v", err)
	}
}

func BenchmarkNextRaw(b *testing.B) {
	data := encodeFixture(b, 256*8, 256, false)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d := NewDecoder(bytes.NewReader(data))
		for {
			if _, _, err := d.NextRaw(); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				b.Fatal(err)
			}
		}
	}
}

func TestSplitMessage(t *testing.T) {
	data := encodeFixture(t, 50, 8, true)
	var types []string
	rest := data
	for {
		typ, n, err := SplitMessage(rest)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, typ)
		d := NewDecoder(bytes.NewReader(rest[:n]))
		if m, err := d.Next(); err != nil || m.Type != typ || len(m.Raw) != n {
			t.Fatalf("message %d: %v", len(types), err)
		}
		rest = rest[n:]
	}
	if len(types) != 8 || types[0] != TypeHeader || types[7] != TypeEnd {
		t.Fatalf("types %v", types)
	}
	_, n, _ := SplitMessage(data)
	for _, cut := range []int{1, n / 2, n - 1} {
		if _, _, err := SplitMessage(data[:cut]); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut %d: %v", cut, err)
		}
	}
}

func BenchmarkSplitMessage(b *testing.B) {
	data := encodeFixture(b, 256*8, 256, false)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for rest := data; len(rest) > 0; {
			_, n, err := SplitMessage(rest)
			if err != nil {
				b.Fatal(err)
			}
			rest = rest[n:]
		}
	}
}

func TestHelloPosition(t *testing.T) {
	h := Hello{Worker: 1, NumWorkers: 2, WorldSize: 1, Position: &Position{Epoch: 3, Next: 7, Fingerprint: "fp"}}
	got, err := ReadHello(bytes.NewReader(AppendHello(nil, h)))
	if err != nil || got.Position == nil || *got.Position != *h.Position {
		t.Fatalf("got %+v (%+v), %v", got, got.Position, err)
	}
	// Without "next" a worker starts at its first batch of the epoch.
	got, err = ReadHello(bytes.NewReader(must(appendJSONAsMsgpack(nil, []byte(`{"worker": 1, "num_workers": 2, "epoch": 4}`)))))
	if err != nil || got.Position == nil || *got.Position != (Position{Epoch: 4, Next: 1}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, bad := range []string{`{"next": 1}`, `{"epoch": -1}`, `{"epoch": "1"}`, `{"epoch": 0, "next": -2}`,
		`{"epoch": 0, "resume": "x"}`, `{"fingerprint": "fp"}`, `{"epoch": 0, "fingerprint": 3}`} {
		if _, err := ReadHello(bytes.NewReader(must(appendJSONAsMsgpack(nil, []byte(bad))))); err == nil {
			t.Errorf("%s: want error", bad)
		}
	}
}

// TestHeaderTraining: the training key is written only when set, and
// decodes back.
func TestHeaderTraining(t *testing.T) {
	for _, tr := range []*Training{nil, {Fingerprint: "fp", Epoch: 2, EpochBatches: 147, Consumers: 4}} {
		b, err := AppendHeader(nil, Header{Dataset: "d", Training: tr})
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewDecoder(bytes.NewReader(b)).Next()
		if err != nil {
			t.Fatal(err)
		}
		got := m.Header.Training
		if (got == nil) != (tr == nil) || (got != nil && *got != *tr) {
			t.Fatalf("training %+v, want %+v", got, tr)
		}
		if tr == nil && bytes.Contains(b, []byte("training")) {
			t.Fatal("training key written without training")
		}
	}
}

// FuzzJSONAsMsgpack: the JSON transcoder never panics, accepts only valid JSON, and
// what it accepts decodes back (through msgpack and the JSON writer) to the same value
// encoding/json reads.
func FuzzJSONAsMsgpack(f *testing.F) {
	for _, s := range []string{`null`, `[1, [2, {"b": 1, "a": 2}]]`, `"\ud83e\udd16"`, `{"a":1,}`, `1e400`, `-0.0`, `[` + strings.Repeat("[", 300)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		mp, err := appendJSONAsMsgpack(nil, src)
		if err != nil {
			return
		}
		if !json.Valid(src) {
			t.Fatalf("accepted invalid JSON %q", src)
		}
		v, err := NewDecoder(bytes.NewReader(mp)).value(0)
		if err != nil {
			t.Fatalf("%q: decoding the msgpack: %v", src, err)
		}
		js, err := appendJSONValue(nil, v)
		if err != nil {
			return // a value the JSON writer refuses (e.g. a float out of range)
		}
		var a, b any
		if json.Unmarshal(src, &a) != nil || json.Unmarshal(js, &b) != nil {
			return // out of encoding/json's range (huge numbers)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%q -> %s", src, js)
		}
	})
}
