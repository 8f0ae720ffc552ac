package datagen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestViewCoordinatesInFrame checks that every VQA box and point and every
// trace point lies inside the declared frame size (issue 24 item 17: gen
// wrote points for 480x640 whatever --video-size was).
func TestViewCoordinatesInFrame(t *testing.T) {
	ts := &taskSpec{objects: []string{"red cube"}, target: "tray", distractor: "blue mug"}
	for _, c := range []struct{ w, h int }{{16, 16}, {96, 64}, {640, 480}, {224, 224}, {1920, 1080}} {
		t.Run(fmt.Sprintf("%dx%d", c.h, c.w), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			inside := func(what string, x, y int) {
				if x < 0 || y < 0 || x >= c.w || y >= c.h {
					t.Fatalf("%s (%d, %d) outside a %dx%d frame", what, x, y, c.h, c.w)
				}
			}
			var maxX, maxY int
			for range 2000 {
				_, a := vqaPair(r, ts, c.w, c.h)
				var ans struct {
					BBox  []int `json:"bbox"`
					Point []int `json:"point"`
				}
				if err := json.Unmarshal([]byte(a), &ans); err != nil {
					t.Fatalf("%s: %v", a, err)
				}
				if ans.BBox != nil {
					inside("bbox corner", ans.BBox[0], ans.BBox[1])
					inside("bbox corner", ans.BBox[2], ans.BBox[3])
					if ans.BBox[2] <= ans.BBox[0] || ans.BBox[3] <= ans.BBox[1] {
						t.Fatalf("empty bbox %v", ans.BBox)
					}
				}
				if ans.Point != nil {
					inside("point", ans.Point[0], ans.Point[1])
					maxX, maxY = max(maxX, ans.Point[0]), max(maxY, ans.Point[1])
				}
				var trace [][]int
				if err := json.Unmarshal([]byte(traceText(r, c.w, c.h)), &trace); err != nil {
					t.Fatal(err)
				}
				for _, p := range trace {
					inside("trace point", p[0], p[1])
				}
			}
			// The points spread over the frame, not only a corner of it.
			if maxX < c.w*3/4 || maxY < c.h*3/4 {
				t.Errorf("points reach only (%d, %d) of a %dx%d frame", maxX, maxY, c.h, c.w)
			}
		})
	}
}

// TestViewCoordinatesDefault pins the 640x480 answers to what the
// generator always drew (the demo dataset and seeds stay reproducible).
func TestViewCoordinatesDefault(t *testing.T) {
	ts := &taskSpec{objects: []string{"red cube"}, target: "tray", distractor: "blue mug"}
	r := rand.New(rand.NewPCG(7, 9))
	var got []string
	for range 6 {
		_, a := vqaPair(r, ts, 640, 480)
		got = append(got, a, traceText(r, 640, 480))
	}
	// The draws of the 640x480-only code this replaced, same seed.
	r = rand.New(rand.NewPCG(7, 9))
	var want []string
	for range 6 {
		_, a := oldVQAPair(r, ts)
		want = append(want, a, oldTraceText(r))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("640x480 draws changed:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// oldVQAPair and oldTraceText are the fixed-size code replaced for item
// 17, kept here as the reference of TestViewCoordinatesDefault.
func oldVQAPair(r *rand.Rand, t *taskSpec) (q, a string) {
	o := pick(r, t.objects)
	switch r.IntN(5) {
	case 0:
		x, y := r.IntN(560), r.IntN(400)
		return "", fmt.Sprintf(`{"bbox": [%d, %d, %d, %d]}`, x, y, x+20+r.IntN(60), y+20+r.IntN(60))
	case 1:
		return "", fmt.Sprintf(`{"point": [%d, %d]}`, r.IntN(640), r.IntN(480))
	case 2:
		return "", fmt.Sprintf(`{"count": %d}`, r.IntN(6))
	case 3:
		if r.IntN(2) == 0 {
			return "", fmt.Sprintf(`{"attribute": "gripper", "value": %q}`, pick(r, []string{"open", "closed"}))
		}
		color, _, _ := strings.Cut(t.distractor, " ")
		return "", fmt.Sprintf(`{"attribute": "color", "value": %q}`, color)
	default:
		_ = o
		return "", fmt.Sprintf(`{"spatial": %q}`, pick(r, []string{"left of", "right of", "in front of", "behind", "on top of", "next to"}))
	}
}

func oldTraceText(r *rand.Rand) string {
	var b strings.Builder
	b.WriteByte('[')
	x, y := 100+r.IntN(440), 100+r.IntN(280)
	n := 4 + r.IntN(5)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "[%d, %d]", x, y)
		x = min(639, max(0, x+r.IntN(61)-30))
		y = min(479, max(0, y+r.IntN(41)-25))
	}
	b.WriteByte(']')
	return b.String()
}
