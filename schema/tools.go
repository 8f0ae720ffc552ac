package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// SayToolName is the name of LeRobot's canonical speech tool.
const SayToolName = "say"

// Tool is one OpenAI-style function schema from a dataset's tool catalog
// (meta/info.json["tools"]).
type Tool struct {
	// Type is the schema type, "function" for every tool LeRobot knows.
	Type string
	// Name, Description and Parameters come from the "function" object.
	Name        string
	Description string
	// Parameters is the JSON-schema object describing the arguments.
	Parameters json.RawMessage
	// Raw is the catalog entry exactly as declared, for passing through to
	// chat templates unchanged.
	Raw json.RawMessage
}

// sayToolJSON is LeRobot's SAY_TOOL_SCHEMA.
const sayToolJSON = `{"type":"function","function":{"name":"say","description":"Speak a short utterance to the user via the TTS executor.","parameters":{"type":"object","properties":{"text":{"type":"string","description":"The verbatim text to speak."}},"required":["text"]}}}`

// DefaultTools returns LeRobot's DEFAULT_TOOLS: a single-entry catalog
// holding the canonical say schema. It is what a dataset whose info.json
// declares no tools exposes. The slice is a fresh copy.
func DefaultTools() []Tool {
	t, err := parseTool(json.RawMessage(sayToolJSON))
	if err != nil {
		panic(err) // constant input
	}
	return []Tool{t}
}

// ParseTools reads the tool catalog from the bytes of meta/info.json. A
// missing, null or empty "tools" entry yields DefaultTools(); a malformed
// one is an error naming the offending entry.
func ParseTools(infoJSON []byte) ([]Tool, error) {
	var info struct {
		Tools json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(infoJSON, &info); err != nil {
		return nil, fmt.Errorf("schema: info.json: %w", err)
	}
	return ParseToolList(info.Tools)
}

// ParseToolList parses the JSON value of info.json["tools"]: a list of
// OpenAI-style function schemas. Absent (empty input), null or [] yields
// DefaultTools().
func ParseToolList(raw json.RawMessage) ([]Tool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return DefaultTools(), nil
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("schema: info.json tools must be a list of tool schemas: %w", err)
	}
	if len(entries) == 0 {
		return DefaultTools(), nil
	}
	tools := make([]Tool, 0, len(entries))
	seen := make(map[string]int, len(entries))
	for i, e := range entries {
		t, err := parseTool(e)
		if err != nil {
			return nil, fmt.Errorf("schema: info.json tools[%d]: %w", i, err)
		}
		if j, dup := seen[t.Name]; dup {
			return nil, fmt.Errorf("schema: info.json tools[%d]: duplicate tool name %q (also tools[%d])", i, t.Name, j)
		}
		seen[t.Name] = i
		tools = append(tools, t)
	}
	return tools, nil
}

func parseTool(raw json.RawMessage) (Tool, error) {
	var v struct {
		Type     *string `json:"type"`
		Function *struct {
			Name        *string         `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return Tool{}, fmt.Errorf("not a tool schema object: %w", err)
	}
	if v.Type == nil {
		return Tool{}, fmt.Errorf("missing \"type\"")
	}
	if *v.Type != "function" {
		return Tool{}, fmt.Errorf("unsupported tool type %q (want \"function\")", *v.Type)
	}
	if v.Function == nil || v.Function.Name == nil || *v.Function.Name == "" {
		return Tool{}, fmt.Errorf("missing function.name")
	}
	return Tool{
		Type:        *v.Type,
		Name:        *v.Function.Name,
		Description: v.Function.Description,
		Parameters:  v.Function.Parameters,
		Raw:         append(json.RawMessage(nil), raw...),
	}, nil
}

// LookupTool returns the catalog entry named name.
func LookupTool(tools []Tool, name string) (Tool, bool) {
	for _, t := range tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// MarshalJSON writes the catalog entry as declared.
func (t Tool) MarshalJSON() ([]byte, error) {
	if len(t.Raw) > 0 {
		return t.Raw, nil
	}
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	return json.Marshal(struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}{t.Type, fn{t.Name, t.Description, t.Parameters}})
}
