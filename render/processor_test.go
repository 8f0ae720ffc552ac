package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

// processorVector is one RenderMessagesStep vector (processor.jsonl).
type processorVector struct {
	Name             string                     `json:"name"`
	Recipe           json.RawMessage            `json:"recipe"`
	DatasetTask      *string                    `json:"dataset_task"`
	Complementary    map[string]json.RawMessage `json:"complementary_data"`
	ExpectedOutcome  string                     `json:"expected_outcome"`
	ExpectedData     json.RawMessage            `json:"expected_complementary_data"`
	Error            *string                    `json:"error"`
	ExpectedKeptIdxs []int                      `json:"kept_indices"`
}

func isNullish(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func asList(raw json.RawMessage) ([]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false
	}
	var l []json.RawMessage
	if json.Unmarshal(raw, &l) != nil {
		return nil, false
	}
	return l, true
}

// emptyLanguage is Python's `not (value or [])` for a language column.
func emptyLanguage(raw json.RawMessage) bool { return !jsonTruthy(raw) }

func isBatched(raw json.RawMessage) bool {
	l, ok := asList(raw)
	if !ok || len(l) == 0 {
		return false
	}
	_, ok = asList(l[0])
	return ok
}

func optString(raw json.RawMessage) (*string, error) {
	if isNullish(raw) {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("task is not a string: %s", raw)
	}
	return &s, nil
}

// scalar unwraps a number or a one-element list of numbers.
func scalarNumber(raw json.RawMessage) (json.Number, error) {
	if l, ok := asList(raw); ok {
		if len(l) != 1 {
			return "", fmt.Errorf("Expected a scalar, got list of length %d", len(l))
		}
		return scalarNumber(l[0])
	}
	var n json.Number
	err := json.Unmarshal(raw, &n)
	return n, err
}

// stepRender emulates RenderMessagesStep on one sample through Apply: the
// step passes the sample's task explicitly and falls back to it alone, so
// with no task its fallback is ModeDrop.
func stepRender(rec *Recipe, pers, evs json.RawMessage, ts, idx, task json.RawMessage, datasetTask *string) (Result, error) {
	prows, err := RowsFromJSON(pers, true)
	if err != nil {
		return Result{}, err
	}
	erows, err := RowsFromJSON(evs, false)
	if err != nil {
		return Result{}, err
	}
	tn, err := scalarNumber(ts)
	if err != nil {
		return Result{}, err
	}
	t, err := tn.Float64()
	if err != nil {
		return Result{}, err
	}
	var sampleIdx int64
	if !isNullish(idx) {
		in, err := scalarNumber(idx)
		if err != nil {
			return Result{}, err
		}
		if sampleIdx, err = in.Int64(); err != nil {
			return Result{}, err
		}
	}
	tk, err := optString(task)
	if err != nil {
		return Result{}, err
	}
	mode := ModeFallback
	if tk == nil {
		mode = ModeDrop
	}
	ep, err := rec.Episode(prows)
	if err != nil {
		return Result{}, err
	}
	return ep.Apply(mode, Frame{Events: erows, T: t, SampleIdx: sampleIdx, Task: tk, DatasetTask: datasetTask}, true), nil
}

func sampleFields(s any) (msgs, streams, targets json.RawMessage) {
	b, _ := json.Marshal(s)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	return m["messages"], m["message_streams"], m["target_message_indices"]
}

// selectBatch filters every list-valued field (recursively through
// objects) to the kept indices, like upstream's _select_batch_indices.
func selectBatch(v json.RawMessage, keep []int, size int, path string) (json.RawMessage, error) {
	raw := bytes.TrimSpace(v)
	if len(raw) > 0 && raw[0] == '{' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		for k, x := range m {
			y, err := selectBatch(x, keep, size, path+"."+k)
			if err != nil {
				return nil, err
			}
			m[k] = y
		}
		return json.Marshal(m)
	}
	if l, ok := asList(raw); ok {
		if len(l) != size {
			return nil, fmt.Errorf("Cannot filter batched field %s: expected %d values, got %d.", pyRepr(path), size, len(l))
		}
		out := make([]json.RawMessage, 0, len(keep))
		for _, i := range keep {
			out = append(out, l[i])
		}
		return json.Marshal(out)
	}
	return v, nil
}

// runStep returns (outcome, complementary data) for a processor vector.
func runStep(v *processorVector) (string, map[string]json.RawMessage, error) {
	rec, err := Load(v.Recipe, "<vector>")
	if err != nil {
		return "", nil, err
	}
	cd := map[string]json.RawMessage{}
	for k, x := range v.Complementary {
		cd[k] = x
	}
	pers, evs := cd["language_persistent"], cd["language_events"]
	if emptyLanguage(pers) && emptyLanguage(evs) {
		task := cd["task"]
		if tl, ok := asList(task); ok {
			if len(tl) == 0 {
				return "passthrough", cd, nil
			}
			var missing []int
			var msgs, streams, targets []json.RawMessage
			for i, x := range tl {
				s, err := optString(x)
				if err != nil || s == nil || *s == "" {
					missing = append(missing, i)
					continue
				}
				m, st, tg := sampleFields(FallbackSample(*s))
				msgs, streams, targets = append(msgs, m), append(streams, st), append(targets, tg)
			}
			if len(missing) == len(tl) {
				return "passthrough", cd, nil
			}
			if len(missing) > 0 {
				return "", nil, fmt.Errorf("Batched low-level fallback requires a non-empty task for every sample; missing task at indices %v.", missing)
			}
			cd["messages"], _ = json.Marshal(msgs)
			cd["message_streams"], _ = json.Marshal(streams)
			cd["target_message_indices"], _ = json.Marshal(targets)
			return "rendered", cd, nil
		}
		s, err := optString(task)
		if err != nil || s == nil || *s == "" {
			return "passthrough", cd, nil
		}
		// Apply without language: ModeFallback renders the explicit task.
		ep, err := rec.Episode(nil)
		if err != nil {
			return "", nil, err
		}
		res := ep.Apply(ModeFallback, Frame{Task: s}, false)
		if res.Outcome != Rendered {
			return res.Outcome.String(), cd, res.Err
		}
		cd["messages"], cd["message_streams"], cd["target_message_indices"] = sampleFields(res.Sample)
		return "rendered", cd, nil
	}
	if isNullish(cd["timestamp"]) {
		return "", nil, errors.New("RenderMessagesStep requires sample timestamp in complementary data.")
	}
	if !isBatched(pers) && !isBatched(evs) {
		res, err := stepRender(rec, pers, evs, cd["timestamp"], cd["index"], cd["task"], v.DatasetTask)
		if err != nil {
			return "", nil, err
		}
		switch res.Outcome {
		case Failed:
			return "", nil, res.Err
		case Dropped:
			return "dropped", nil, nil
		}
		delete(cd, "language_persistent")
		delete(cd, "language_events")
		cd["messages"], cd["message_streams"], cd["target_message_indices"] = sampleFields(res.Sample)
		return "rendered", cd, nil
	}
	pl, _ := asList(pers)
	el, _ := asList(evs)
	size := 0
	if len(pl) > 0 && len(el) > 0 && len(pl) != len(el) {
		return "", nil, fmt.Errorf("Batched language columns must have equal lengths when both are non-empty, got persistent=%d and events=%d.", len(pl), len(el))
	}
	size = max(len(pl), len(el))
	at := func(raw json.RawMessage, i int) json.RawMessage {
		if l, ok := asList(raw); ok {
			if i < len(l) {
				return l[i]
			}
			return nil
		}
		return raw
	}
	var keep []int
	var msgs, streams, targets []json.RawMessage
	for i := 0; i < size; i++ {
		var p, e json.RawMessage = []byte("[]"), []byte("[]")
		if i < len(pl) {
			p = pl[i]
		}
		if i < len(el) {
			e = el[i]
		}
		res, err := stepRender(rec, p, e, at(cd["timestamp"], i), at(cd["index"], i), at(cd["task"], i), v.DatasetTask)
		if err != nil {
			return "", nil, err
		}
		switch res.Outcome {
		case Failed:
			return "", nil, res.Err
		case Dropped:
			continue
		}
		keep = append(keep, i)
		m, st, tg := sampleFields(res.Sample)
		msgs, streams, targets = append(msgs, m), append(streams, st), append(targets, tg)
	}
	if len(keep) == 0 {
		return "dropped", nil, nil
	}
	if len(keep) != size {
		for k, x := range cd {
			y, err := selectBatch(x, keep, size, "complementary_data."+k)
			if err != nil {
				return "", nil, err
			}
			cd[k] = y
		}
	}
	delete(cd, "language_persistent")
	delete(cd, "language_events")
	cd["messages"], _ = json.Marshal(msgs)
	cd["message_streams"], _ = json.Marshal(streams)
	cd["target_message_indices"], _ = json.Marshal(targets)
	return "rendered", cd, nil
}

// TestConformanceProcessor runs RenderMessagesStep vectors through Apply.
func TestConformanceProcessor(t *testing.T) {
	path := filepath.Join(conformanceDir(t), "processor.jsonl")
	vs := readJSONL[processorVector](t, path)
	if vs == nil {
		t.Fatalf("no %s: the conformance kit is missing", path)
	}
	pass, fail := 0, 0
	for _, v := range vs {
		v := v
		outcome, cd, err := runStep(&v)
		msg := ""
		switch {
		case v.ExpectedOutcome == "error":
			if err == nil {
				msg = fmt.Sprintf("want error %q, got %s", deref(v.Error), outcome)
			} else if v.Error != nil && !bytes.Contains([]byte(err.Error()), []byte(*v.Error)) {
				msg = fmt.Sprintf("want error containing %q, got %v", *v.Error, err)
			}
		case err != nil:
			msg = fmt.Sprintf("unexpected error %v", err)
		case outcome != v.ExpectedOutcome:
			msg = fmt.Sprintf("outcome %s, want %s", outcome, v.ExpectedOutcome)
		case outcome != "dropped":
			got, _ := json.Marshal(cd)
			if !jsonEqual(got, v.ExpectedData) {
				msg = fmt.Sprintf("complementary data\n got: %s\nwant: %s", got, v.ExpectedData)
			}
		}
		if msg != "" {
			fail++
			t.Errorf("%s: %s", v.Name, msg)
			continue
		}
		pass++
	}
	t.Logf("processor                %5d passed, %d failed", pass, fail)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
