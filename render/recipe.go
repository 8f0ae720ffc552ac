package render

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/lrstream/lrstream/schema"
)

// defaultBindings are the bindings every message recipe has without
// declaring them (LeRobot's DEFAULT_BINDINGS), in upstream order. A recipe's
// own bindings override them by name. The special binding "task" is always
// available too.
var defaultBindings = [...][2]string{
	{"subtask", "active_at(t, style=subtask)"},
	{"memory", "active_at(t, style=memory)"},
	{"plan", "active_at(t, style=plan)"},
	{"speech", "emitted_at(t, role=assistant, tool_name=say)"},
	{"interjection", "emitted_at(t, style=interjection)"},
	{"vqa", "emitted_at(t, style=vqa, role=assistant)"},
	{"vqa_query", "emitted_at(t, style=vqa, role=user)"},
}

// DefaultBindings returns the implicit bindings as name → resolver
// expression pairs, in upstream order.
func DefaultBindings() [][2]string {
	out := make([][2]string, len(defaultBindings))
	copy(out, defaultBindings[:])
	return out
}

// Recipe is a loaded, validated and compiled training recipe: either a
// message recipe (one list of turns) or a blend of weighted message
// recipes. A Recipe is immutable and safe for concurrent use.
type Recipe struct {
	name   string
	sha    string
	blend  bool
	comps  []*component
	routed []int // indices of route: vqa components, file order
	// weighted lists the components of the weighted draw, file order, and
	// totalWeight is their Python sum.
	weighted    []int
	totalWeight float64
	// sels are the distinct persistent selectors the recipe's resolvers
	// use; an Episode builds one timeline per selector.
	sels []selector
}

// component is one message recipe (a blend component or the whole
// recipe).
type component struct {
	name   string
	weight float64
	route  string
	turns  []turn
	// slots are the bindings a render resolves, in LeRobot's resolution
	// order; slot 0 is always "task".
	slots    []slot
	usesTask bool
	// err is raised whenever the component's bindings are resolved
	// (upstream fails the same way, e.g. bindings that are not a mapping).
	err error
	// streams/targets of a render that emits every turn.
	allStreams []string
	allTargets []int
	// declared bindings (in file order) for Describe.
	declared []bindingDecl
}

type bindingDecl struct {
	name string
	spec any
}

type slot struct {
	name string
	spec string
	res  *resolver
	// isDefault: the expression comes from DefaultBindings.
	isDefault bool
}

type turn struct {
	role   string
	stream string
	target bool
	// ifPresent / toolCallsFrom are slot indices, -1 when unset.
	ifPresent     int
	toolCallsFrom int
	kind          schema.ContentKind
	text          template
	blocks        []blockTemplate
}

// template is a string with ${name} placeholders compiled to parts.
type template struct {
	parts []tpart
	// static: no placeholders; lit holds the whole string.
	static bool
	lit    string
	// single: exactly one placeholder and no literal text.
	single int
}

type tpart struct {
	lit  string
	slot int // -1 for literal
}

type blockTemplate struct {
	static schema.Map
	// dynamic lists (value index, template) for string values with
	// placeholders; nil when the block never changes.
	dynamic []blockField
}

type blockField struct {
	index int
	tpl   template
}

// Load parses a recipe from YAML or JSON bytes; name identifies it in
// errors. Every rule of LeRobot's TrainingRecipe / MessageTurn is checked
// here, in upstream order, and a failure names the blend component and
// turn. Resolver expressions are compiled here as well; an expression
// upstream would reject is reported by Check and, exactly as upstream,
// by Render whenever a frame needs that binding.
func Load(data []byte, name string) (*Recipe, error) {
	v, err := fromYAML(data)
	if err != nil {
		// JSON is YAML, except that YAML forbids some characters JSON
		// strings may carry raw (DEL, C1 controls, ...): fall back to an
		// order-preserving JSON decoder for such documents.
		jv, jerr := decodeJSONOrdered(data)
		if jerr != nil {
			return nil, fmt.Errorf("recipe %s: parse: %w", name, err)
		}
		v = jv
	}
	top, ok := v.(*dict)
	if !ok {
		return nil, fmt.Errorf("recipe %s: %w", name, fmt.Errorf("Recipe YAML must contain a mapping at the top level: %s", name))
	}
	pr, err := buildRecipe(top, "")
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", name, err)
	}
	sum := sha256.Sum256(data)
	r := &Recipe{name: name, sha: hex.EncodeToString(sum[:])}
	if err := r.compile(pr); err != nil {
		return nil, fmt.Errorf("recipe %s: %w", name, err)
	}
	return r, nil
}

// LoadFile reads and loads the recipe at path.
func LoadFile(path string) (*Recipe, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("recipe: %w", err)
	}
	return Load(data, filepath.Base(path))
}

// Name returns the name the recipe was loaded under ("" for a nil
// recipe: no recipe, nothing rendered).
func (r *Recipe) Name() string {
	if r == nil {
		return ""
	}
	return r.name
}

// SHA256 returns the hex SHA-256 of the recipe's source bytes ("" for a
// nil recipe).
func (r *Recipe) SHA256() string {
	if r == nil {
		return ""
	}
	return r.sha
}

// IsBlend reports whether the recipe is a blend (false for a nil recipe).
func (r *Recipe) IsBlend() bool { return r != nil && r.blend }

// Components returns the blend component names in file order, which is
// the order selection walks. A message recipe has exactly one unnamed
// component, reported as "" (Render reports it as index -1). A nil
// recipe has none.
func (r *Recipe) Components() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.comps))
	for i, c := range r.comps {
		out[i] = c.name
	}
	return out
}

// Check reports the problems Load tolerates because upstream only raises
// them when a frame resolves the binding: resolver expressions that can
// never resolve (bad syntax, unknown resolver or style, persistent
// resolvers on event styles, ...) and bindings that are not a mapping of
// strings. Bindings that are declared but never referenced are included.
// A nil result means every binding can resolve.
func (r *Recipe) Check() error {
	var errs []error
	for _, c := range r.comps {
		where := "recipe"
		if r.blend {
			where = "blend component " + schema.PyQuote(c.name)
		}
		if c.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, c.err))
			continue
		}
		for _, d := range c.declared {
			spec, ok := d.spec.(string)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: binding %s: resolver expression must be a string, got %s", where, schema.PyQuote(d.name), pyTypeName(d.spec)))
				continue
			}
			if res := parseResolver(spec); res.err != nil {
				errs = append(errs, fmt.Errorf("%s: binding %s: %w", where, schema.PyQuote(d.name), withSuggestion(res.err, resolverKeywords())))
			}
		}
	}
	return errors.Join(errs...)
}

// ---- Python-shaped intermediate form -------------------------------------

type pyTurn struct {
	role, content, stream, target, ifPresent, toolCallsFrom any
}

type pyRecipe struct {
	messages    []*pyTurn
	hasMessages bool
	bindings    any
	blendNames  []any
	blend       []*pyRecipe
	hasBlend    bool
	weight      any
	route       any
}

var validRoles = map[string]bool{"user": true, "assistant": true, "system": true, "tool": true}

// turnErr names a turn in an error.
func turnErr(i int, err error) error { return fmt.Errorf("turn %d: %w", i+1, err) }

func compErr(name any, err error) error {
	return fmt.Errorf("blend component %s: %w", pyRepr(name), err)
}

// iterPy returns the elements Python's `for x in v` would visit.
func iterPy(v any) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case string:
		var out []any
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	case *dict:
		return x.keys, nil
	}
	return nil, fmt.Errorf("'%s' object is not iterable", pyTypeName(v))
}

// buildRecipe mirrors TrainingRecipe.from_dict followed by __post_init__.
func buildRecipe(d *dict, path string) (*pyRecipe, error) {
	pr := &pyRecipe{}
	if err := pr.buildMessages(d); err != nil {
		return nil, err
	}
	if err := pr.buildBlend(d); err != nil {
		return nil, err
	}
	if err := pr.setKeywords(d); err != nil {
		return nil, err
	}
	if err := pr.postInit(); err != nil {
		return nil, err
	}
	return pr, nil
}

// buildMessages builds the turns of the recipe's messages, if any.
func (pr *pyRecipe) buildMessages(d *dict) error {
	if m, ok := d.get("messages"); ok && m != nil {
		items, err := iterPy(m)
		if err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		pr.hasMessages = true
		pr.messages = []*pyTurn{}
		for i, it := range items {
			t, err := buildTurn(it)
			if err != nil {
				return turnErr(i, err)
			}
			pr.messages = append(pr.messages, t)
		}
	}
	return nil
}

// buildBlend builds the recipe's blend components, if any.
func (pr *pyRecipe) buildBlend(d *dict) error {
	if b, ok := d.get("blend"); ok && b != nil {
		bd, ok := b.(*dict)
		if !ok {
			return fmt.Errorf("blend must be a mapping of component names to recipes, got %s", pyTypeName(b))
		}
		pr.hasBlend = true
		for i, k := range bd.keys {
			cd, ok := bd.vals[i].(*dict)
			if !ok {
				return compErr(k, fmt.Errorf("a blend component must be a mapping, got %s", pyTypeName(bd.vals[i])))
			}
			c, err := buildRecipe(cd, pyStr(k))
			if err != nil {
				return compErr(k, err)
			}
			pr.blendNames = append(pr.blendNames, k)
			pr.blend = append(pr.blend, c)
		}
	}
	return nil
}

// setKeywords sets bindings, weight and route, refusing unknown keywords.
func (pr *pyRecipe) setKeywords(d *dict) error {
	for i, k := range d.keys {
		ks, ok := k.(string)
		if !ok {
			return errors.New("TrainingRecipe() keywords must be strings")
		}
		switch ks {
		case "messages", "blend":
		case "bindings":
			pr.bindings = d.vals[i]
		case "weight":
			pr.weight = d.vals[i]
		case "route":
			pr.route = d.vals[i]
		default:
			return withSuggestion(fmt.Errorf("TrainingRecipe.__init__() got an unexpected keyword argument %s", schema.PyQuote(ks)), recipeKeywords())
		}
	}
	return nil
}

// postInit validates the recipe as TrainingRecipe.__post_init__ does.
func (pr *pyRecipe) postInit() error {
	if pr.hasMessages && pr.hasBlend {
		return errors.New("TrainingRecipe must set only one of messages or blend.")
	}
	if !pr.hasMessages && !pr.hasBlend {
		return errors.New("TrainingRecipe must set one of messages or blend.")
	}
	if pr.route != nil {
		if !hashable(pr.route) {
			return fmt.Errorf("unhashable type: '%s'", pyTypeName(pr.route))
		}
		if s, ok := pr.route.(string); !ok || s != "vqa" {
			return fmt.Errorf("Unsupported recipe route: %s", pyRepr(pr.route))
		}
	}
	if pr.hasBlend && pr.route != nil {
		return errors.New("TrainingRecipe.route may only be set on a message recipe inside a blend.")
	}
	if pr.hasMessages {
		if err := validateMessageRecipe(pr); err != nil {
			return err
		}
	}
	if pr.hasBlend {
		return validateBlend(pr)
	}
	return nil
}

// validateBlend checks a blend's components: at least one, each a
// message recipe with a positive weight.
func validateBlend(pr *pyRecipe) error {
	if len(pr.blend) == 0 {
		return errors.New("Blend recipes must contain at least one component.")
	}
	for i, c := range pr.blend {
		name := pr.blendNames[i]
		switch {
		case c.hasBlend:
			return fmt.Errorf("Blend component %s cannot itself define a blend.", pyRepr(name))
		case !c.hasMessages:
			return fmt.Errorf("Blend component %s must define messages.", pyRepr(name))
		case c.weight == nil:
			return fmt.Errorf("Blend component %s must define weight.", pyRepr(name))
		}
		w, ok := numeric(c.weight)
		if !ok {
			return fmt.Errorf("Blend component %s: weight must be a number: '<=' not supported between instances of '%s' and 'int'", pyRepr(name), pyTypeName(c.weight))
		}
		if w <= 0 { // NaN passes, as in Python
			return fmt.Errorf("Blend component %s must have a positive weight.", pyRepr(name))
		}
	}
	return nil
}

// buildTurn mirrors MessageTurn.from_dict and MessageTurn.__post_init__.
func buildTurn(v any) (*pyTurn, error) {
	d, ok := v.(*dict)
	if !ok {
		return nil, fmt.Errorf("MessageTurn.from_dict() argument after ** must be a mapping, not %s", pyTypeName(v))
	}
	t := &pyTurn{}
	hasRole := false
	for i, k := range d.keys {
		ks, ok := k.(string)
		if !ok {
			return nil, errors.New("MessageTurn() keywords must be strings")
		}
		val := d.vals[i]
		switch ks {
		case "role":
			t.role, hasRole = val, true
		case "content":
			t.content = val
		case "stream":
			t.stream = val
		case "target":
			t.target = val
		case "if_present":
			t.ifPresent = val
		case "tool_calls_from":
			t.toolCallsFrom = val
		default:
			return nil, withSuggestion(fmt.Errorf("MessageTurn.__init__() got an unexpected keyword argument %s", schema.PyQuote(ks)), turnKeywords())
		}
	}
	if !hasRole {
		return nil, errors.New("MessageTurn.__init__() missing 1 required positional argument: 'role'")
	}
	if !hashable(t.role) {
		return nil, fmt.Errorf("unhashable type: '%s'", pyTypeName(t.role))
	}
	if s, ok := t.role.(string); !ok || !validRoles[s] {
		return nil, fmt.Errorf("Unsupported message role: %s", pyRepr(t.role))
	}
	if t.stream == nil {
		return nil, fmt.Errorf("MessageTurn(role=%s) is missing a stream — every turn must declare one of ['high_level', 'low_level'].", pyRepr(t.role))
	}
	if !hashable(t.stream) {
		return nil, fmt.Errorf("unhashable type: '%s'", pyTypeName(t.stream))
	}
	if s, ok := t.stream.(string); !ok || s != "high_level" && s != "low_level" {
		return nil, fmt.Errorf("Unsupported message stream: %s", pyRepr(t.stream))
	}
	if t.content == nil && t.toolCallsFrom == nil {
		return nil, errors.New("MessageTurn.content is required unless tool_calls_from is set.")
	}
	switch c := t.content.(type) {
	case nil, string:
	case []any:
		for _, b := range c {
			bd, ok := b.(*dict)
			if !ok {
				return nil, errors.New("Multimodal content blocks must be HF-style dictionaries with a type key.")
			}
			if _, ok := bd.get("type"); !ok {
				return nil, errors.New("Multimodal content blocks must be HF-style dictionaries with a type key.")
			}
		}
	default:
		return nil, errors.New("MessageTurn.content must be a string, a list of HF-style blocks, or None.")
	}
	return t, nil
}

// placeholders returns the ${name} references in s, in order.
func placeholders(s string) []string {
	var out []string
	scanPlaceholders(s, func(lit string) {}, func(name string) { out = append(out, name) })
	return out
}

// scanPlaceholders walks s like re.sub with \$\{([A-Za-z_][A-Za-z0-9_]*)\}.
func scanPlaceholders(s string, lit func(string), ref func(string)) {
	start := 0
	for i := 0; i+2 < len(s); {
		if s[i] == '$' && s[i+1] == '{' && isIdentStart(s[i+2]) {
			j := i + 3
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			if j < len(s) && s[j] == '}' {
				if start < i {
					lit(s[start:i])
				}
				ref(s[i+2 : j])
				i = j + 1
				start = i
				continue
			}
		}
		i++
	}
	if start < len(s) {
		lit(s[start:])
	}
}

// referenced lists a turn's binding references (if_present,
// tool_calls_from, placeholders), as Python values.
func (t *pyTurn) referenced() []any {
	var names []any
	if t.ifPresent != nil {
		names = append(names, t.ifPresent)
	}
	if t.toolCallsFrom != nil {
		names = append(names, t.toolCallsFrom)
	}
	switch c := t.content.(type) {
	case string:
		for _, n := range placeholders(c) {
			names = append(names, n)
		}
	case []any:
		for _, b := range c {
			bd := b.(*dict)
			for _, v := range bd.vals {
				if s, ok := v.(string); ok {
					for _, n := range placeholders(s) {
						names = append(names, n)
					}
				}
			}
		}
	}
	return names
}

// declaredNames is set(self.bindings or {}).
func declaredNames(b any) ([]any, error) {
	if !truthy(b) {
		return nil, nil
	}
	items, err := iterPy(b)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if !hashable(it) {
			return nil, fmt.Errorf("unhashable type: '%s'", pyTypeName(it))
		}
	}
	return items, nil
}

func isDefaultBinding(name string) bool {
	for _, d := range defaultBindings {
		if d[0] == name {
			return true
		}
	}
	return false
}

func validateMessageRecipe(pr *pyRecipe) error {
	declared, err := declaredNames(pr.bindings)
	if err != nil {
		return err
	}
	known := func(n any) bool {
		if s, ok := n.(string); ok && (s == "task" || isDefaultBinding(s)) {
			return true
		}
		for _, d := range declared {
			if keyEqual(d, n) {
				return true
			}
		}
		return false
	}
	for i, t := range pr.messages {
		var missing []any
		for _, n := range t.referenced() {
			if !hashable(n) {
				return turnErr(i, fmt.Errorf("unhashable type: '%s'", pyTypeName(n)))
			}
			if known(n) {
				continue
			}
			dup := false
			for _, m := range missing {
				if keyEqual(m, n) {
					dup = true
				}
			}
			if !dup {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			sortPy(missing)
			return turnErr(i, fmt.Errorf("MessageTurn references unknown binding(s): %s", pyRepr(missing)))
		}
	}
	for _, t := range pr.messages {
		if truthy(t.target) || t.stream == "low_level" {
			return nil
		}
	}
	return errors.New("Message recipes must contain at least one supervised turn — either ``target: true`` (text CE) or ``stream: low_level`` (flow/action loss).")
}

// sortPy sorts strings by code point (numbers before strings; Python
// would refuse to compare them, which only changes the message).
func sortPy(v []any) {
	sort.SliceStable(v, func(i, j int) bool {
		a, aok := v[i].(string)
		b, bok := v[j].(string)
		switch {
		case aok && bok:
			return a < b
		case aok != bok:
			return bok
		}
		fa, _ := numeric(v[i])
		fb, _ := numeric(v[j])
		return fa < fb
	})
}

// ---- compile --------------------------------------------------------------

func (r *Recipe) compile(pr *pyRecipe) error {
	selIdx := map[string]int{}
	if pr.hasBlend {
		r.blend = true
		for i, c := range pr.blend {
			comp, err := r.compileComponent(c, pyStr(pr.blendNames[i]), selIdx)
			if err != nil {
				return compErr(pr.blendNames[i], err)
			}
			r.comps = append(r.comps, comp)
		}
	} else {
		comp, err := r.compileComponent(pr, "", selIdx)
		if err != nil {
			return err
		}
		r.comps = []*component{comp}
	}
	for i, c := range r.comps {
		if c.route == "vqa" {
			r.routed = append(r.routed, i)
		}
		if weightedIncludesRouted || c.route == "" {
			r.weighted = append(r.weighted, i)
			r.totalWeight += c.weight
		}
	}
	return nil
}

// weightedIncludesRouted: at upstream 7427f318 the weighted draw walks
// every blend component, route: vqa ones included.
const weightedIncludesRouted = true

// resolveDeclared: whether declared-but-unreferenced bindings are resolved.
const resolveDeclared = true

func (r *Recipe) compileComponent(pr *pyRecipe, name string, selIdx map[string]int) (*component, error) {
	c := &component{name: name}
	if w, ok := numeric(pr.weight); ok {
		c.weight = w
	}
	if s, ok := pr.route.(string); ok {
		c.route = s
	}
	// The lists and the map are the caller's so that they stay on its
	// stack.
	var specBuf [8]bindingSpec
	var keyBuf [8]string
	specs, declaredKeys := c.bindingSpecs(pr.bindings, specBuf[:0], keyBuf[:0])
	needed := map[string]bool{}
	addNeededBindings(needed, pr.messages, declaredKeys)
	c.usesTask = needed["task"]
	slotOf := r.compileSlots(c, specs, needed, selIdx)
	for _, pt := range pr.messages {
		t, err := c.compileTurn(pt, slotOf)
		if err != nil {
			return nil, err
		}
		c.turns = append(c.turns, t)
		c.allStreams = append(c.allStreams, t.stream)
		if t.target {
			c.allTargets = append(c.allTargets, len(c.turns)-1)
		}
	}
	if c.allTargets == nil {
		c.allTargets = []int{}
	}
	return c, nil
}

// bindingSpec is one binding of a component: its name, its resolver
// spec, and whether it is one of defaultBindings not overridden.
type bindingSpec struct {
	name      string
	spec      any
	isDefault bool
}

// bindingSpecs appends to specs the component's binding specs: defaults,
// overridden in place, then new declared names; and to declaredKeys the
// declared names. It sets c.declared, and c.err when bindings are not a
// mapping of strings.
func (c *component) bindingSpecs(bindings any, specs []bindingSpec, declaredKeys []string) ([]bindingSpec, []string) {
	for _, d := range defaultBindings {
		specs = append(specs, bindingSpec{d[0], d[1], true})
	}
	if bindings == nil {
		return specs, declaredKeys
	}
	bd, ok := bindings.(*dict)
	if !ok {
		if truthy(bindings) {
			c.err = fmt.Errorf("TypeError: bindings must be a mapping of names to resolver expressions, got %s ('%s' object is not a mapping)", pyTypeName(bindings), pyTypeName(bindings))
		}
		return specs, declaredKeys
	}
	for i, k := range bd.keys {
		ks, ok := k.(string)
		if !ok {
			c.err = fmt.Errorf("binding names must be strings, got %s", pyRepr(k))
			break
		}
		c.declared = append(c.declared, bindingDecl{ks, bd.vals[i]})
		declaredKeys = append(declaredKeys, ks)
		found := false
		for j := range specs {
			if specs[j].name == ks {
				specs[j].spec, specs[j].isDefault = bd.vals[i], false
				found = true
			}
		}
		if !found {
			specs = append(specs, bindingSpec{ks, bd.vals[i], false})
		}
	}
	return specs, declaredKeys
}

// addNeededBindings adds to needed the binding names the messages
// reference, and the declared ones when resolveDeclared.
func addNeededBindings(needed map[string]bool, messages []*pyTurn, declaredKeys []string) {
	for _, t := range messages {
		for _, n := range t.referenced() {
			if s, ok := n.(string); ok {
				needed[s] = true
			}
		}
	}
	if resolveDeclared {
		for _, k := range declaredKeys {
			needed[k] = true
		}
	}
}

// compileSlots sets c.slots: the task, then each needed binding with its
// parsed resolver (its selection registered in r.sels through selIdx).
// It returns the slot of each name.
func (r *Recipe) compileSlots(c *component, specs []bindingSpec, needed map[string]bool, selIdx map[string]int) map[string]int {
	c.slots = []slot{{name: "task"}}
	slotOf := map[string]int{"task": 0}
	for _, s := range specs {
		if !needed[s.name] {
			continue
		}
		sl := slot{name: s.name, isDefault: s.isDefault}
		if str, ok := s.spec.(string); ok {
			sl.spec = str
			sl.res = parseResolver(str)
			if sl.res.err == nil && !sl.res.events {
				k := sl.res.sel.key()
				idx, ok := selIdx[k]
				if !ok {
					idx = len(r.sels)
					selIdx[k] = idx
					r.sels = append(r.sels, sl.res.sel)
				}
				sl.res.tl = idx
			}
		} else {
			sl.res = &resolver{err: fmt.Errorf("binding %s: %w: got %s ('%s' object has no attribute 'strip')", schema.PyQuote(s.name), errNotString, pyTypeName(s.spec), pyTypeName(s.spec))}
		}
		if s.name == "task" {
			// A declared binding named task replaces the task string:
			// upstream resolves specs into the same dict after task.
			slotOf["task"] = len(c.slots)
		} else {
			slotOf[s.name] = len(c.slots)
		}
		c.slots = append(c.slots, sl)
	}
	return slotOf
}

// slotIndex returns the slot of binding name n, -1 when n is nil or not
// a binding.
func slotIndex(slotOf map[string]int, n any) int {
	if n == nil {
		return -1
	}
	s, _ := n.(string)
	if i, ok := slotOf[s]; ok {
		return i
	}
	return -1
}

// compileTurn compiles one message turn: its binding references and its
// content templates.
func (c *component) compileTurn(pt *pyTurn, slotOf map[string]int) (turn, error) {
	t := turn{
		role:          pt.role.(string),
		stream:        pt.stream.(string),
		target:        truthy(pt.target),
		ifPresent:     slotIndex(slotOf, pt.ifPresent),
		toolCallsFrom: slotIndex(slotOf, pt.toolCallsFrom),
	}
	// With c.err set the component never renders (resolution fails
	// first), so unresolvable names only matter otherwise.
	if c.err == nil && pt.ifPresent != nil && t.ifPresent < 0 {
		return t, fmt.Errorf("if_present %s does not name a binding", pyRepr(pt.ifPresent))
	}
	if c.err == nil && pt.toolCallsFrom != nil && t.toolCallsFrom < 0 {
		return t, fmt.Errorf("tool_calls_from %s does not name a binding", pyRepr(pt.toolCallsFrom))
	}
	switch ct := pt.content.(type) {
	case string:
		t.kind = schema.TextContent
		t.text = compileTemplate(ct, slotOf)
	case []any:
		t.kind = schema.BlockContent
		for _, b := range ct {
			t.blocks = append(t.blocks, compileBlock(b.(*dict), slotOf))
		}
	default:
		t.kind = schema.NoContent
	}
	return t, nil
}

// compileBlock compiles one content block: its static value and the
// templates of its string fields that use bindings.
func compileBlock(bd *dict, slotOf map[string]int) blockTemplate {
	m := toSchemaValue(bd).(schema.Map)
	bt := blockTemplate{static: m}
	for i, v := range bd.vals {
		if s, ok := v.(string); ok {
			tpl := compileTemplate(s, slotOf)
			if !tpl.static {
				bt.dynamic = append(bt.dynamic, blockField{i, tpl})
			}
		}
	}
	return bt
}

func compileTemplate(s string, slotOf map[string]int) template {
	var t template
	scanPlaceholders(s,
		func(lit string) { t.parts = append(t.parts, tpart{lit: lit, slot: -1}) },
		func(name string) {
			i, ok := slotOf[name]
			if !ok {
				i = 0 // unreachable: validation rejects unknown names
			}
			t.parts = append(t.parts, tpart{slot: i})
		})
	t.single = -1
	switch {
	case len(t.parts) == 0:
		t.static = true
	case len(t.parts) == 1 && t.parts[0].slot < 0:
		t.static, t.lit = true, t.parts[0].lit
	case len(t.parts) == 1:
		t.single = t.parts[0].slot
	}
	return t
}

// ---- description ----------------------------------------------------------

// ComponentInfo describes one component for `lrstream recipe check` and
// stats.
type ComponentInfo struct {
	// Name is the blend component name ("" for a message recipe).
	Name string
	// Weight is the declared weight (0 for a message recipe) and
	// Probability its share of the weighted draw.
	Weight      float64
	Probability float64
	// Route is "vqa" for components routed ahead of the weighted draw.
	Route string
	// Turns is the number of message turns.
	Turns int
	// Bindings lists the bindings a render resolves, "task" first, then in
	// resolution order.
	Bindings []BindingInfo
}

// BindingInfo describes one binding a component resolves.
type BindingInfo struct {
	Name string
	// Expr is the resolver expression ("" for task).
	Expr string
	// Resolver is active_at, emitted_at, nth_prev, nth_next, or "task".
	Resolver string
	// Column is the column the resolver reads (persistent or events); empty
	// for task and invalid expressions.
	Column schema.Column
	// Default reports a binding taken from DefaultBindings.
	Default bool
	// Err is the error any frame resolving the binding fails with.
	Err error
}

// Describe returns one ComponentInfo per component, in file order.
func (r *Recipe) Describe() []ComponentInfo {
	out := make([]ComponentInfo, len(r.comps))
	for i, c := range r.comps {
		ci := ComponentInfo{Name: c.name, Route: c.route, Turns: len(c.turns)}
		if r.blend {
			ci.Weight = c.weight
			for _, w := range r.weighted {
				if w == i && r.totalWeight > 0 {
					ci.Probability = c.weight / r.totalWeight
				}
			}
		} else {
			ci.Probability = 1
		}
		for j, s := range c.slots {
			if j == 0 {
				if c.usesTask {
					ci.Bindings = append(ci.Bindings, BindingInfo{Name: "task", Resolver: "task"})
				}
				continue
			}
			bi := BindingInfo{Name: s.name, Expr: s.spec, Default: s.isDefault, Err: s.res.err}
			if s.res.err == nil {
				bi.Resolver = s.res.kind.String()
				bi.Column = schema.PersistentColumn
				if s.res.events {
					bi.Column = schema.EventsColumn
				}
			}
			if c.err != nil {
				bi.Err = c.err
			}
			ci.Bindings = append(ci.Bindings, bi)
		}
		out[i] = ci
	}
	return out
}
