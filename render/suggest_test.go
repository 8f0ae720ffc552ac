package render

import (
	"strings"
	"testing"
)

// TestRecipeSuggestions: a misspelt recipe keyword, turn keyword,
// resolver, resolver argument or style keeps LeRobot's error text and gets
// a "did you mean" (issue 24 item 9); a name close to nothing gets none.
func TestRecipeSuggestions(t *testing.T) {
	turn := `{role: user, content: "${task}", stream: high_level}`
	target := `{role: assistant, content: "${x}", stream: high_level, target: true, if_present: x}`
	for _, tc := range []struct {
		name, yaml, lerobot, suggest string
	}{
		{"weight", "blend:\n  a:\n    weigth: 1.0\n    messages:\n      - " + turn + "\n", "TrainingRecipe.__init__() got an unexpected keyword argument 'weigth'", " (did you mean 'weight'?)"},
		{"bindings", "messages:\n  - " + turn + "\nbinding:\n  x: \"active_at(t, style=plan)\"\n", "unexpected keyword argument 'binding'", " (did you mean 'bindings'?)"},
		{"turn keyword", "messages:\n  - {role: user, content: \"${task}\", strem: high_level}\n", "MessageTurn.__init__() got an unexpected keyword argument 'strem'", " (did you mean 'stream'?)"},
		{"if_present", "messages:\n  - {role: user, content: \"${task}\", stream: high_level, if_presnt: x}\n", "unexpected keyword argument 'if_presnt'", " (did you mean 'if_present'?)"},
		{"resolver", "messages:\n  - " + turn + "\n  - " + target + "\nbindings:\n  x: \"activ_at(t, style=subtask)\"\n", "Unknown language resolver: 'activ_at'", " (did you mean 'active_at'?)"},
		{"resolver argument", "messages:\n  - " + turn + "\n  - " + target + "\nbindings:\n  x: \"active_at(t, styl=subtask)\"\n", "unexpected keyword argument 'styl'", " (did you mean 'style'?)"},
		{"style", "messages:\n  - " + turn + "\n  - " + target + "\nbindings:\n  x: \"active_at(t, style=subtsk)\"\n", "Unknown language style: 'subtsk'", " (did you mean 'subtask'?)"},
		{"far from everything", "messages:\n  - {role: user, content: \"${task}\", zzzzzzzz: 1}\n", "unexpected keyword argument 'zzzzzzzz'", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Load([]byte(tc.yaml), "r.yaml")
			if err == nil {
				err = r.Check()
			}
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.lerobot) {
				t.Fatalf("%q lacks LeRobot's %q", msg, tc.lerobot)
			}
			if tc.suggest == "" && strings.Contains(msg, "did you mean") || !strings.HasSuffix(msg, tc.lerobot+tc.suggest) {
				t.Fatalf("%q: want it to end %q", msg, tc.lerobot+tc.suggest)
			}
		})
	}
}
