package sink

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/schema"
)

// TestBatchMatchesCollateJSON checks that a Batcher batch, once encoded and
// decoded, is what collate.CollateJSON (lerobot_collate_fn semantics) makes
// of the same samples given as JSON objects.
func TestBatchMatchesCollateJSON(t *testing.T) {
	const n = 6
	var buf bytes.Buffer
	writeFixture(t, NewMsgpack(&buf), n, 16, true)
	s, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// The batch as JSON.
	var got []byte
	got, err = appendJSONValue(nil, columnsMap(s.Batches[0]))
	if err != nil {
		t.Fatal(err)
	}
	// The same samples as lerobot would see them.
	var samples []any
	for i := 0; i < n; i++ {
		if i%7 == 6 {
			samples = append(samples, nil)
			continue
		}
		f := fixtureFrame(i)
		m := map[string]any{
			"index": f.Index, "episode_index": f.EpisodeIndex, "frame_index": f.FrameIndex,
			"timestamp": f.Timestamp, "task_index": f.TaskIndex, "task": f.Task, "dataset": f.Strings[0],
			"observation.flag": f.Features[2][0] != 0,
		}
		var st, ac []any
		for d := 0; d < dim; d++ {
			st = append(st, math.Float32frombits(binary.LittleEndian.Uint32(f.Features[0][4*d:])))
			ac = append(ac, math.Float32frombits(binary.LittleEndian.Uint32(f.Features[1][4*d:])))
		}
		m["observation.state"], m["action"] = st, ac
		grid := []any{[]any{}, []any{}}
		for d := 0; d < 6; d++ {
			grid[d/3] = append(grid[d/3].([]any), int64(int32(binary.LittleEndian.Uint32(f.Features[3][4*d:]))))
		}
		m["observation.grid"] = grid
		var msgs []any
		for j := range f.Sample.Messages {
			b, err := appendMessage(nil, &f.Sample.Messages[j])
			if err != nil {
				t.Fatal(err)
			}
			v, err := NewDecoder(bytes.NewReader(b)).value(0)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, v)
		}
		m["messages"] = msgs
		m["message_streams"] = f.Sample.Streams
		m["target_message_indices"] = f.Sample.Targets
		var pers, evs []any
		for j := range f.Persistent {
			b, _ := appendRow(nil, &f.Persistent[j])
			v, _ := NewDecoder(bytes.NewReader(b)).value(0)
			pers = append(pers, v)
		}
		for j := range f.Events {
			b, _ := appendRow(nil, &f.Events[j])
			v, _ := NewDecoder(bytes.NewReader(b)).value(0)
			evs = append(evs, v)
		}
		if evs == nil {
			evs = []any{}
		}
		m["language_persistent"], m["language_events"] = pers, evs
		samples = append(samples, m)
	}
	// Round-trip the samples through JSON text (ordered maps become plain
	// objects), as the conformance vectors are given.
	var js []any
	raw, err := appendJSONValueLoose(samples)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&js); err != nil {
		t.Fatal(err)
	}
	want, err := collate.CollateJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	wb, _ := json.Marshal(want)
	if err := json.Unmarshal(wb, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("batch differs from CollateJSON:\n got %s\nwant %s", got, wb)
	}
}

// columnsMap returns a decoded batch's columns as an ordered map.
func columnsMap(b *DecodedBatch) any {
	m := map[string]any{}
	for _, f := range b.Columns {
		m[f.Name] = f.Value
	}
	return mapToOrdered(m)
}

// appendJSONValueLoose encodes plain Go values (maps, typed slices) and
// decoded msgpack values as JSON.
func appendJSONValueLoose(v any) ([]byte, error) {
	return appendJSONValue(nil, toGeneric(v))
}

func toGeneric(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return mapToOrdered(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toGeneric(e)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	case []int:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = int64(e)
		}
		return out
	}
	return v
}

func mapToOrdered(m map[string]any) any {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	om := schema.Map{}
	for _, k := range keys {
		om.Keys = append(om.Keys, k)
		om.Values = append(om.Values, toGeneric(m[k]))
	}
	return om
}
