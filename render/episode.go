package render

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"slices"
	"sort"
	"strconv"

	"golang.org/x/crypto/blake2b"

	"github.com/lrstream/lrstream/schema"
)

// EmittedAtTolerance is the half-window, in seconds, within which
// emitted_at matches a persistent row's timestamp to the frame's
// (LeRobot's EMITTED_AT_TOLERANCE_S). Event rows match exactly: they sit
// on their frame.
const EmittedAtTolerance = 0.1

// Frame is what Render needs to know about one frame.
type Frame struct {
	// Events are the frame's language_events rows.
	Events []schema.Row
	// T is the frame's timestamp (the float32 column value widened).
	T float64
	// SampleIdx is the frame's global index; it keys every deterministic
	// choice (blend draw, VQA camera, task_aug rotation).
	SampleIdx int64
	// Task, when non-nil, is an explicit task: ${task} renders it, with no
	// task_aug rotation. This is what LeRobot's RenderMessagesStep passes
	// (lrstream's --no-task-aug).
	Task *string
	// DatasetTask is the canonical task from meta/tasks.parquet: ${task}
	// falls back to it when Task is nil and the episode has no usable
	// task_aug rephrasing.
	DatasetTask *string
}

// SetCanonicalTask fills Task / DatasetTask for a frame whose canonical
// task is task: with noTaskAug the task is explicit (RenderMessagesStep
// semantics, no task_aug rotation), otherwise it is only the fallback.
func (f *Frame) SetCanonicalTask(task string, noTaskAug bool) {
	if noTaskAug {
		f.Task, f.DatasetTask = &task, nil
	} else {
		f.Task, f.DatasetTask = nil, &task
	}
}

// value is one resolved binding.
type value struct {
	kind uint8
	idx  int32
}

const (
	vNone uint8 = iota
	vTask       // the frame's task string
	vPRow       // persistent row idx
	vERow       // event row idx of the frame
)

// timeline is the persistent rows matching one selector, sorted by
// (timestamp, style, role) like upstream's nth_* ordering.
type timeline struct {
	idx []int32
	ts  []float64
	// orig holds the matching rows in their original order.
	orig []int32
	// slow: some timestamp is NaN; resolve by linear scans instead.
	slow bool
	err  error
}

// recentSize is the number of recent samples an Episode remembers per
// component besides the last one.
const recentSize = 8

type cacheEntry struct {
	ok     bool
	vals   []value
	task   string
	sample *schema.Sample
}

// Episode is a recipe bound to one episode's persistent rows, with a
// sorted timeline per selector the recipe uses, so that resolving a frame
// costs a few binary searches. Build it once per episode with
// Recipe.Episode and call Render / Apply for each of its frames.
//
// An Episode keeps per-frame scratch space and a cache of the last samples
// per component: it is not safe for concurrent use (use one per worker).
// Samples it returns may be shared between frames that render identically
// and must be treated as read-only.
type Episode struct {
	r    *Recipe
	rows []schema.Row
	tls  []timeline
	aug  []int32
	vals [][]value
	// per-frame state
	taskDone bool
	taskVal  value
	task     string
	cache    []cacheEntry
	// recent holds, per component, the last recentSize samples built (a
	// ring; recentNext is the next slot to replace), looked up when cache
	// misses: an episode's frames render the same few samples over and
	// over (task_aug rotates between a handful of rephrasings, the blend
	// alternates components), so most frames reuse one.
	recent     [][]cacheEntry
	recentNext []int
	okRouted   []int
	h          hash.Hash
	hbuf       [48]byte
	sum        [8]byte
	// digits[:ndigits] is the decimal form of sample index digitsOf (both
	// draws of a frame hash the same index behind different prefixes);
	// ndigits is 0 before the first draw.
	digits   [20]byte
	ndigits  int
	digitsOf int64
	fallback struct {
		task   string
		sample *schema.Sample
	}
}

// Episode compiles the episode's persistent rows (language_persistent of
// any of its frames; the writer stores the same list on every frame) for
// rendering. The rows are referenced, not copied: do not modify them while
// the Episode is in use.
func (r *Recipe) Episode(persistent []schema.Row) (*Episode, error) {
	h, err := blake2b.New(8, nil)
	if err != nil {
		return nil, fmt.Errorf("render: blake2b: %w", err)
	}
	e := &Episode{r: r, rows: persistent, h: h}
	e.tls = make([]timeline, len(r.sels))
	for i, s := range r.sels {
		e.tls[i] = buildTimeline(persistent, s)
	}
	for i := range persistent {
		row := &persistent[i]
		if row.Style != nil && *row.Style == schema.StyleTaskAug && row.Role == "user" {
			e.aug = append(e.aug, int32(i))
		}
	}
	e.vals = make([][]value, len(r.comps))
	e.cache = make([]cacheEntry, len(r.comps))
	e.recent = make([][]cacheEntry, len(r.comps))
	e.recentNext = make([]int, len(r.comps))
	for i, c := range r.comps {
		e.vals[i] = make([]value, len(c.slots))
		e.cache[i].vals = make([]value, len(c.slots))
		e.recent[i] = make([]cacheEntry, recentSize)
		backing := make([]value, recentSize*len(c.slots))
		for k := range e.recent[i] {
			e.recent[i][k].vals = backing[k*len(c.slots) : (k+1)*len(c.slots)]
		}
	}
	e.okRouted = make([]int, 0, len(r.routed))
	return e, nil
}

func strEq(p *string, s *string) bool { return s == nil || p != nil && *p == *s }

// matches is upstream's _matching_rows predicate, evaluated in its order.
func matches(row *schema.Row, s selector) (bool, error) {
	if !strEq(row.Style, s.style) {
		return false, nil
	}
	if s.role != nil && row.Role != *s.role {
		return false, nil
	}
	if s.toolName != nil {
		ok, err := hasToolName(row.ToolCalls, *s.toolName)
		if err != nil || !ok {
			return false, err
		}
	}
	return strEq(row.Camera, s.camera), nil
}

func buildTimeline(rows []schema.Row, s selector) timeline {
	var tl timeline
	for i := range rows {
		ok, err := matches(&rows[i], s)
		if err != nil {
			tl.err = fmt.Errorf("language_persistent row %d: %w", i, err)
			return tl
		}
		if !ok {
			continue
		}
		if !rows[i].HasTimestamp {
			tl.err = fmt.Errorf("language_persistent row %d has no timestamp (KeyError: 'timestamp')", i)
			return tl
		}
		if math.IsNaN(rows[i].Timestamp) {
			tl.slow = true
		}
		tl.orig = append(tl.orig, int32(i))
	}
	tl.idx = append([]int32(nil), tl.orig...)
	key := func(i int32) (float64, string, string) {
		r := &rows[i]
		st := ""
		if r.Style != nil {
			st = *r.Style
		}
		return r.Timestamp, st, r.Role
	}
	sort.SliceStable(tl.idx, func(a, b int) bool {
		ta, sa, ra := key(tl.idx[a])
		tb, sb, rb := key(tl.idx[b])
		if ta != tb {
			return ta < tb
		}
		if sa != sb {
			return sa < sb
		}
		return ra < rb
	})
	tl.ts = make([]float64, len(tl.idx))
	for i, ri := range tl.idx {
		tl.ts[i] = rows[ri].Timestamp
	}
	return tl
}

// upper returns how many sorted timestamps are <= t.
func (tl *timeline) upper(t float64) int {
	lo, hi := 0, len(tl.ts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if tl.ts[m] <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func ambiguous(s selector, n int) error {
	q := func(p *string) string {
		if p == nil {
			return "None"
		}
		return schema.PyQuote(*p)
	}
	return fmt.Errorf("Ambiguous resolver for style=%s role=%s tool_name=%s camera=%s: %d matching rows. Add a selector that distinguishes them.",
		q(s.style), q(s.role), q(s.toolName), q(s.camera), n)
}

// resolve evaluates one resolver at frame f.
func (e *Episode) resolve(res *resolver, f *Frame) (value, error) {
	if res.err != nil {
		return value{}, res.err
	}
	t := f.T
	if res.events {
		return resolveEvent(res, f)
	}
	tl := &e.tls[res.tl]
	if tl.err != nil {
		return value{}, tl.err
	}
	if tl.slow {
		return e.resolveSlow(res, tl, t)
	}
	switch res.kind {
	case kindActiveAt:
		return tl.activeAt(res, t)
	case kindEmittedAt:
		return tl.emittedAt(res, t)
	default: // nth_prev / nth_next
		return tl.nth(res, t), nil
	}
}

// resolveEvent resolves res against frame f's language_events rows: the
// one matching row, none, or an ambiguity error.
func resolveEvent(res *resolver, f *Frame) (value, error) {
	found, n := -1, 0
	for i := range f.Events {
		ok, err := matches(&f.Events[i], res.sel)
		if err != nil {
			return value{}, fmt.Errorf("language_events row %d: %w", i, err)
		}
		if ok {
			if n == 0 {
				found = i
			}
			n++
		}
	}
	switch n {
	case 0:
		return value{}, nil
	case 1:
		return value{vERow, int32(found)}, nil
	}
	return value{}, ambiguous(res.sel, n)
}

// activeAt resolves active_at(t): the last row at or before t, an
// ambiguity error when several rows share its timestamp.
func (tl *timeline) activeAt(res *resolver, t float64) (value, error) {
	n := tl.upper(t)
	if n == 0 || t != t {
		return value{}, nil
	}
	last := tl.ts[n-1]
	k := 1
	for n-1-k >= 0 && tl.ts[n-1-k] == last {
		k++
	}
	if k > 1 {
		return value{}, ambiguous(res.sel, k)
	}
	return value{vPRow, tl.idx[n-1]}, nil
}

// emittedAt resolves emitted_at(t): the row within EmittedAtTolerance of
// t, an ambiguity error when several are.
func (tl *timeline) emittedAt(res *resolver, t float64) (value, error) {
	if math.IsNaN(t) || math.IsInf(t, 0) {
		return value{}, nil
	}
	// ts - t is monotone in ts, so the window is a contiguous range.
	lo := sort.Search(len(tl.ts), func(i int) bool { return tl.ts[i]-t >= -EmittedAtTolerance })
	hi := lo
	for hi < len(tl.ts) && math.Abs(tl.ts[hi]-t) <= EmittedAtTolerance {
		hi++
	}
	switch hi - lo {
	case 0:
		return value{}, nil
	case 1:
		return value{vPRow, tl.idx[lo]}, nil
	}
	return value{}, ambiguous(res.sel, hi-lo)
}

// nth resolves nth_prev / nth_next: the row res.offset rows from the
// last one at or before t.
func (tl *timeline) nth(res *resolver, t float64) value {
	if len(tl.idx) == 0 {
		return value{}
	}
	n := tl.upper(t)
	if t != t {
		n = 0
	}
	var target int
	if n == 0 {
		if res.offset <= 0 {
			return value{}
		}
		target = res.offset - 1
	} else {
		target = n - 1 + res.offset
	}
	if target < 0 || target >= len(tl.idx) {
		return value{}
	}
	return value{vPRow, tl.idx[target]}
}

// resolveSlow follows upstream literally; used when a timestamp is NaN.
func (e *Episode) resolveSlow(res *resolver, tl *timeline, t float64) (value, error) {
	ts := func(i int32) float64 { return e.rows[i].Timestamp }
	switch res.kind {
	case kindActiveAt:
		var m []int32
		for _, i := range tl.orig {
			if ts(i) <= t {
				m = append(m, i)
			}
		}
		if len(m) == 0 {
			return value{}, nil
		}
		latest := ts(m[0])
		for _, i := range m[1:] {
			if ts(i) > latest {
				latest = ts(i)
			}
		}
		var sel []int32
		for _, i := range m {
			if ts(i) == latest {
				sel = append(sel, i)
			}
		}
		if len(sel) > 1 {
			return value{}, ambiguous(res.sel, len(sel))
		}
		return value{vPRow, sel[0]}, nil
	case kindEmittedAt:
		var sel []int32
		for _, i := range tl.orig {
			if math.Abs(ts(i)-t) <= EmittedAtTolerance {
				sel = append(sel, i)
			}
		}
		switch len(sel) {
		case 0:
			return value{}, nil
		case 1:
			return value{vPRow, sel[0]}, nil
		}
		return value{}, ambiguous(res.sel, len(sel))
	default:
		if len(tl.idx) == 0 {
			return value{}, nil
		}
		anchor := -1
		for k, i := range tl.idx {
			if ts(i) <= t {
				anchor = k
			} else {
				break
			}
		}
		var target int
		if anchor < 0 {
			if res.offset <= 0 {
				return value{}, nil
			}
			target = res.offset - 1
		} else {
			target = anchor + res.offset
		}
		if target < 0 || target >= len(tl.idx) {
			return value{}, nil
		}
		return value{vPRow, tl.idx[target]}, nil
	}
}

// digest is blake2b (8-byte digest size) of prefix + decimal idx, read as
// a big-endian integer.
func (e *Episode) digest(prefix string, idx int64) uint64 {
	if e.ndigits == 0 || e.digitsOf != idx {
		e.ndigits, e.digitsOf = len(strconv.AppendInt(e.digits[:0], idx, 10)), idx
	}
	b := append(append(e.hbuf[:0], prefix...), e.digits[:e.ndigits]...)
	if len(b) <= maxShortDigest {
		return digestShort(b)
	}
	e.h.Reset()
	e.h.Write(b)
	return binary.BigEndian.Uint64(e.h.Sum(e.sum[:0]))
}

// draw maps a digest onto [0, total) like upstream:
// int.from_bytes(digest, "big") / 2**64 * total.
func draw(d uint64, total float64) float64 {
	return float64(float64(d)/18446744073709551616.0) * total
}

// taskValue resolves ${task} for the frame (once per frame).
func (e *Episode) taskValue(f *Frame) value {
	if e.taskDone {
		return e.taskVal
	}
	e.taskDone = true
	e.taskVal = value{}
	switch {
	case f.Task != nil:
		e.task, e.taskVal = *f.Task, value{kind: vTask}
		return e.taskVal
	case len(e.aug) > 0:
		i := e.digest("task_aug:", f.SampleIdx) % uint64(len(e.aug))
		if c := e.rows[e.aug[i]].Content; !isFalsyContent(c) {
			e.task, e.taskVal = *c, value{kind: vTask}
			return e.taskVal
		}
	}
	if f.DatasetTask != nil {
		e.task, e.taskVal = *f.DatasetTask, value{kind: vTask}
	}
	return e.taskVal
}

// resolveComp resolves every binding component ci needs.
func (e *Episode) resolveComp(ci int, f *Frame) error {
	c := e.r.comps[ci]
	if c.err != nil {
		return e.compError(ci, "", c.err)
	}
	vals := e.vals[ci]
	if c.usesTask {
		vals[0] = e.taskValue(f)
	}
	for s := 1; s < len(c.slots); s++ {
		v, err := e.resolve(c.slots[s].res, f)
		if err != nil {
			return e.compError(ci, c.slots[s].name, err)
		}
		vals[s] = v
	}
	return nil
}

func (e *Episode) compError(ci int, binding string, err error) error {
	where := "render"
	if e.r.blend {
		where = "render: blend component " + schema.PyQuote(e.r.comps[ci].name)
	}
	if binding != "" {
		return fmt.Errorf("%s: binding %s: %w", where, schema.PyQuote(binding), err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// renderable reports whether component ci, with its resolved bindings,
// renders (has a target or a low_level turn among the emitted turns).
func (e *Episode) renderable(ci int) bool {
	c := e.r.comps[ci]
	vals := e.vals[ci]
	for i := range c.turns {
		t := &c.turns[i]
		if t.ifPresent >= 0 && vals[t.ifPresent].kind == vNone {
			continue
		}
		if t.target || t.stream == "low_level" {
			return true
		}
	}
	return false
}

func (e *Episode) str(v value, f *Frame) string {
	switch v.kind {
	case vTask:
		return e.task
	case vPRow:
		if c := e.rows[v.idx].Content; c != nil {
			return *c
		}
	case vERow:
		if c := f.Events[v.idx].Content; c != nil {
			return *c
		}
	}
	return ""
}

func (e *Episode) expand(t *template, vals []value, f *Frame) string {
	if t.static {
		return t.lit
	}
	if t.single >= 0 {
		return e.str(vals[t.single], f)
	}
	n := 0
	for _, p := range t.parts {
		if p.slot < 0 {
			n += len(p.lit)
		} else {
			n += len(e.str(vals[p.slot], f))
		}
	}
	b := make([]byte, 0, n)
	for _, p := range t.parts {
		if p.slot < 0 {
			b = append(b, p.lit...)
		} else {
			b = append(b, e.str(vals[p.slot], f)...)
		}
	}
	return string(b)
}

// build renders component ci from its resolved bindings.
func (e *Episode) build(ci int, f *Frame) *schema.Sample {
	c := e.r.comps[ci]
	vals := e.vals[ci]
	cacheable := true
	for _, v := range vals {
		if v.kind == vERow {
			cacheable = false
			break
		}
	}
	if cacheable {
		if s := e.cachedSample(ci, vals); s != nil {
			return s
		}
	}
	emitted := 0
	for i := range c.turns {
		t := &c.turns[i]
		if t.ifPresent >= 0 && vals[t.ifPresent].kind == vNone {
			continue
		}
		emitted++
	}
	s := &schema.Sample{Messages: make([]schema.Message, 0, emitted)}
	all := emitted == len(c.turns)
	if all {
		s.Streams, s.Targets = c.allStreams, c.allTargets
	} else {
		s.Streams = make([]string, 0, emitted)
		s.Targets = []int{}
	}
	for i := range c.turns {
		t := &c.turns[i]
		if t.ifPresent >= 0 && vals[t.ifPresent].kind == vNone {
			continue
		}
		if !all {
			if t.target {
				s.Targets = append(s.Targets, len(s.Messages))
			}
			s.Streams = append(s.Streams, t.stream)
		}
		s.Messages = append(s.Messages, e.message(t, vals, f))
	}
	if cacheable {
		e.remember(ci, vals, s)
	}
	return s
}

// cachedSample returns the sample built last, or recently, for component
// ci with the same binding values (and task, when the first slot is the
// task); nil when there is none.
func (e *Episode) cachedSample(ci int, vals []value) *schema.Sample {
	ce := &e.cache[ci]
	if ce.ok && (vals[0].kind != vTask || ce.task == e.task) {
		same := true
		for i, v := range vals {
			if ce.vals[i] != v {
				same = false
				break
			}
		}
		if same {
			return ce.sample
		}
	}
	for k := range e.recent[ci] {
		re := &e.recent[ci][k]
		if re.ok && (vals[0].kind != vTask || re.task == e.task) && slices.Equal(re.vals, vals) {
			return re.sample
		}
	}
	return nil
}

// remember keeps s as component ci's last sample and in its recent ring.
func (e *Episode) remember(ci int, vals []value, s *schema.Sample) {
	ce := &e.cache[ci]
	ce.ok = true
	copy(ce.vals, vals)
	ce.task = e.task
	ce.sample = s
	re := &e.recent[ci][e.recentNext[ci]]
	e.recentNext[ci] = (e.recentNext[ci] + 1) % len(e.recent[ci])
	re.ok = true
	copy(re.vals, vals)
	re.task = e.task
	re.sample = s
}

// message renders turn t for frame f: its text or blocks with the
// bindings' values, and its tool calls.
func (e *Episode) message(t *turn, vals []value, f *Frame) schema.Message {
	m := schema.Message{Role: t.role, Kind: t.kind}
	switch t.kind {
	case schema.TextContent:
		m.Text = e.expand(&t.text, vals, f)
	case schema.BlockContent:
		m.Blocks = make([]schema.Map, len(t.blocks))
		for j := range t.blocks {
			bt := &t.blocks[j]
			if bt.dynamic == nil {
				m.Blocks[j] = bt.static
				continue
			}
			vs := make([]any, len(bt.static.Values))
			copy(vs, bt.static.Values)
			for _, df := range bt.dynamic {
				vs[df.index] = e.expand(&df.tpl, vals, f)
			}
			m.Blocks[j] = schema.Map{Keys: bt.static.Keys, Values: vs}
		}
	}
	if t.toolCallsFrom >= 0 {
		var raw json.RawMessage
		switch v := vals[t.toolCallsFrom]; v.kind {
		case vPRow:
			raw = e.rows[v.idx].ToolCalls
		case vERow:
			raw = f.Events[v.idx].ToolCalls
		}
		if jsonTruthy(raw) {
			m.ToolCalls = raw
		}
	}
	return m
}

// Render renders frame f like LeRobot's render_sample. It returns the
// sample (nil when upstream returns None: no turn with a target or a
// low_level stream survives), the index of the blend component that was
// chosen (-1 for a message recipe), or an error naming the component and
// binding (ambiguous resolver, invalid resolver expression, ...).
//
// Selection: in a blend, components with route: vqa are resolved first;
// if exactly one renders it wins, if several render one is drawn by
// weight from blake2b("vqa:<idx>"). Otherwise one component is drawn by
// weight from blake2b("<idx>"), walking components in file order; only
// the chosen component's bindings are resolved.
func (e *Episode) Render(f Frame) (*schema.Sample, int, error) {
	e.taskDone = false
	r := e.r
	if !r.blend {
		if err := e.resolveComp(0, &f); err != nil {
			return nil, -1, err
		}
		if !e.renderable(0) {
			return nil, -1, nil
		}
		return e.build(0, &f), -1, nil
	}
	if len(r.routed) > 0 {
		ok := e.okRouted[:0]
		for _, ci := range r.routed {
			if err := e.resolveComp(ci, &f); err != nil {
				return nil, ci, err
			}
			if e.renderable(ci) {
				ok = append(ok, ci)
			}
		}
		e.okRouted = ok
		switch len(ok) {
		case 0:
		case 1:
			return e.build(ok[0], &f), ok[0], nil
		default:
			total := 0.0
			for _, ci := range ok {
				total += r.comps[ci].weight
			}
			d := draw(e.digest("vqa:", f.SampleIdx), total)
			pick := ok[len(ok)-1]
			cum := 0.0
			for _, ci := range ok {
				cum += r.comps[ci].weight
				if d < cum {
					pick = ci
					break
				}
			}
			return e.build(pick, &f), pick, nil
		}
	}
	if len(r.weighted) == 0 || r.totalWeight <= 0 {
		return nil, -1, nil
	}
	d := draw(e.digest("", f.SampleIdx), r.totalWeight)
	ci := r.weighted[len(r.weighted)-1]
	cum := 0.0
	for _, k := range r.weighted {
		cum += r.comps[k].weight
		if d < cum {
			ci = k
			break
		}
	}
	if err := e.resolveComp(ci, &f); err != nil {
		return nil, ci, err
	}
	if !e.renderable(ci) {
		return nil, ci, nil
	}
	return e.build(ci, &f), ci, nil
}

// jsonTruthy is Python truthiness of a JSON value (absent = None).
func jsonTruthy(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case 'n', 'f':
		return false
	case 't':
		return true
	case '"':
		return len(raw) > 2
	case '[', '{':
		rest := bytes.TrimSpace(raw[1:])
		return len(rest) > 0 && rest[0] != ']' && rest[0] != '}'
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return err != nil || f != 0
}

// hasToolName is upstream's _row_has_tool_name over the row's tool_calls
// JSON: true when some element is an object whose "function" object has
// that "name".
func hasToolName(raw json.RawMessage, name string) (bool, error) {
	raw = bytes.TrimSpace(raw)
	if !jsonTruthy(raw) {
		return false, nil
	}
	switch raw[0] {
	case '"', '{':
		return false, nil // iterating a str / dict yields strings: skipped
	case 't':
		return false, fmt.Errorf("'bool' object is not iterable (tool_calls)")
	case '[':
	default:
		kind := "int"
		if bytes.ContainsAny(raw, ".eE") {
			kind = "float"
		}
		return false, fmt.Errorf("'%s' object is not iterable (tool_calls)", kind)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return false, fmt.Errorf("tool_calls: %w", err)
	}
	for _, el := range elems {
		el = bytes.TrimSpace(el)
		if len(el) == 0 || el[0] != '{' {
			continue
		}
		var call map[string]json.RawMessage
		if json.Unmarshal(el, &call) != nil {
			continue
		}
		fn := bytes.TrimSpace(call["function"])
		if len(fn) == 0 || fn[0] != '{' {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(fn, &fields) != nil {
			continue
		}
		nm := bytes.TrimSpace(fields["name"])
		if len(nm) == 0 || nm[0] != '"' {
			continue
		}
		var s string
		if json.Unmarshal(nm, &s) == nil && s == name {
			return true, nil
		}
	}
	return false, nil
}
