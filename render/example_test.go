package render_test

import (
	"encoding/json"
	"fmt"

	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
)

func Example() {
	rec, err := render.Load([]byte(`
messages:
  - {role: user, content: "${task}", stream: high_level}
  - {role: assistant, content: "${subtask}", stream: low_level, target: true, if_present: subtask}
`), "example.yaml")
	if err != nil {
		panic(err)
	}
	ep, err := rec.Episode([]schema.Row{
		{Role: "assistant", Content: schema.Str("reach the cube"), Style: schema.Str("subtask"), Timestamp: 0, HasTimestamp: true},
		{Role: "assistant", Content: schema.Str("grasp it"), Style: schema.Str("subtask"), Timestamp: 1.5, HasTimestamp: true},
	})
	if err != nil {
		panic(err)
	}
	for _, t := range []float64{0.5, 2} {
		f := render.Frame{T: t, SampleIdx: int64(t * 10)}
		f.SetCanonicalTask("pick up the cube", false)
		res := ep.Apply(render.ModeFallback, f, true)
		b, _ := json.Marshal(res.Sample)
		fmt.Println(res.Outcome, string(b))
	}
	// Output:
	// rendered {"messages":[{"role":"user","content":"pick up the cube"},{"role":"assistant","content":"reach the cube"}],"message_streams":["high_level","low_level"],"target_message_indices":[1]}
	// rendered {"messages":[{"role":"user","content":"pick up the cube"},{"role":"assistant","content":"grasp it"}],"message_streams":["high_level","low_level"],"target_message_indices":[1]}
}
