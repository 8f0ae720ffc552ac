package datagen

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// step is one candidate subtask of a task: what to do ("how, not what"
// phrasing) and the outcome a MEM-style memory keeps once it is done.
type step struct {
	do, done string
}

// taskSpec is one task string with everything needed to annotate episodes
// of it.
type taskSpec struct {
	text        string
	steps       []step
	rephrasings []string
	// objects are noun phrases the annotations may ask about.
	objects []string
	// target is where things go (a container or surface).
	target string
	// distractor is an object in the scene that is not part of the task.
	distractor string
}

var (
	colors      = []string{"red", "blue", "green", "yellow", "orange", "white", "black", "purple", "pink", "gray"}
	smallThings = []string{"cube", "block", "cup", "apple", "banana", "marker", "spoon", "lemon", "toy car", "screwdriver", "tape roll", "ball"}
	containers  = []string{"box", "bowl", "basket", "tray", "bin", "plate", "drawer organizer", "paper bag"}
	liquids     = []string{"water", "beans", "rice", "marbles", "coffee beans", "lentils"}
	vessels     = []string{"cup", "mug", "bottle", "measuring jug"}
	receivers   = []string{"bowl", "glass", "pot", "jar"}
	surfaces    = []string{"table", "tray", "counter", "cutting board", "shelf"}
	stackables  = []string{"cube", "block", "cup", "bowl", "box"}
	details     = []string{
		"slowly", "from the left side", "from the right side", "keeping the wrist level",
		"with a firm grip", "with the gripper fully open", "along a straight path",
		"while avoiding the %s", "without tilting it", "using the fingertips",
	}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// pickOther picks an element different from not (if possible).
func pickOther(r *rand.Rand, xs []string, not string) string {
	for range 8 {
		if x := pick(r, xs); x != not {
			return x
		}
	}
	return xs[0]
}

func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// makeTask builds a random task of one of several families.
func makeTask(r *rand.Rand) taskSpec {
	c := pick(r, colors)
	c2 := pickOther(r, colors, c)
	dis := pick(r, colors) + " " + pick(r, smallThings)
	switch r.IntN(7) {
	case 0, 1: // pick and place
		return pickPlaceTask(r, c, dis)
	case 2: // stack
		return stackTask(r, c, c2, dis)
	case 3: // pour
		return pourTask(r, c, c2, dis)
	case 4: // wipe
		return wipeTask(r, c, dis)
	case 5: // drawer
		return drawerTask(r, c, dis)
	default: // fold
		return foldTask(c, dis)
	}
}

// pickPlaceTask returns a pick and place: an object into a container task.
func pickPlaceTask(r *rand.Rand, c, dis string) taskSpec {
	o := pick(r, smallThings)
	k := pick(r, containers)
	co := c + " " + o
	in := "in"
	if k == "plate" || k == "tray" {
		in = "on"
	}
	return taskSpec{
		text: fmt.Sprintf("Pick up the %s and place it %s the %s", co, in, k),
		steps: []step{
			{"move the gripper above the " + co, "gripper above the " + co},
			{"open the gripper and lower it around the " + o, "gripper around the " + o},
			{"close the gripper to grasp the " + co, co + " grasped"},
			{"lift the " + o + " a few centimeters off the table", o + " lifted"},
			{"carry the " + o + " over the " + k, o + " held over the " + k},
			{"lower the " + o + " into the " + k, o + " inside the " + k},
			{"open the gripper to release the " + o, co + " released in the " + k},
			{"retract the arm to the home pose", "arm back at home, " + co + " in the " + k},
		},
		rephrasings: []string{
			"put the " + co + " into the " + k, "place the " + co + " in the " + k,
			"move the " + co + " to the " + k, "could you put the " + co + " in the " + k + "?",
			"grab the " + co + " and drop it in the " + k, "pick the " + co + " up and put it in the " + k,
			"the " + co + " goes in the " + k, "please place the " + co + " inside the " + k,
			"get the " + co + " into the " + k, "transfer the " + co + " to the " + k,
		},
		objects: []string{co, k}, target: k, distractor: dis,
	}
}

// stackTask returns a stack: one object on another task.
func stackTask(r *rand.Rand, c, c2, dis string) taskSpec {
	o := pick(r, stackables)
	o2 := pick(r, stackables)
	a, b := c+" "+o, c2+" "+o2
	return taskSpec{
		text: fmt.Sprintf("Stack the %s on top of the %s", a, b),
		steps: []step{
			{"reach toward the " + a, "arm next to the " + a},
			{"align the gripper with the sides of the " + a, "gripper aligned with the " + a},
			{"grasp the " + a + " firmly", a + " grasped"},
			{"raise the " + a + " above the " + b, a + " above the " + b},
			{"center the " + a + " over the " + b, a + " centered over the " + b},
			{"lower the " + a + " gently onto the " + b, a + " resting on the " + b},
			{"release the " + a + " and back away", a + " stacked on the " + b},
		},
		rephrasings: []string{
			"put the " + a + " on the " + b, "place the " + a + " on top of the " + b,
			"stack " + article(a) + " onto the " + b, "set the " + a + " onto the " + b,
			"could you stack the " + a + " on the " + b + "?", "build a stack with the " + a + " on the " + b,
			"the " + a + " goes on top of the " + b, "move the " + a + " onto the " + b,
		},
		objects: []string{a, b}, target: b, distractor: dis,
	}
}

// pourTask returns a pour: a liquid from a vessel into a receiver task.
func pourTask(r *rand.Rand, c, c2, dis string) taskSpec {
	l := pick(r, liquids)
	v := c + " " + pick(r, vessels)
	k := c2 + " " + pick(r, receivers)
	return taskSpec{
		text: fmt.Sprintf("Pour the %s from the %s into the %s", l, v, k),
		steps: []step{
			{"grasp the " + v + " by its handle", v + " grasped"},
			{"lift the " + v + " without spilling the " + l, v + " lifted"},
			{"bring the " + v + " next to the " + k, v + " next to the " + k},
			{"tilt the " + v + " slowly over the " + k, "pouring " + l + " into the " + k},
			{"hold the tilt until the " + v + " is empty", l + " poured into the " + k},
			{"return the " + v + " upright", v + " upright and empty"},
			{"set the " + v + " back on the table", v + " back on the table"},
		},
		rephrasings: []string{
			"pour the " + l + " into the " + k, "empty the " + v + " into the " + k,
			"transfer the " + l + " to the " + k, "fill the " + k + " with the " + l + " from the " + v,
			"could you pour the " + l + " into the " + k + "?", "tip the " + l + " from the " + v + " into the " + k,
			"put the " + l + " in the " + k,
		},
		objects: []string{v, k}, target: k, distractor: dis,
	}
}

// wipeTask returns a wipe: a surface with a sponge task.
func wipeTask(r *rand.Rand, c, dis string) taskSpec {
	s := pick(r, surfaces)
	sp := c + " sponge"
	return taskSpec{
		text: fmt.Sprintf("Wipe the %s with the %s", s, sp),
		steps: []step{
			{"reach for the " + sp, "arm at the " + sp},
			{"pinch the " + sp + " between the fingers", sp + " grasped"},
			{"press the " + sp + " onto the far edge of the " + s, sp + " on the " + s},
			{"wipe the left half of the " + s + " in overlapping strokes", "left half of the " + s + " wiped"},
			{"wipe the right half of the " + s + " in overlapping strokes", "whole " + s + " wiped"},
			{"lift the " + sp + " off the " + s, sp + " lifted"},
			{"put the " + sp + " back next to the " + s, sp + " put back, " + s + " clean"},
		},
		rephrasings: []string{
			"clean the " + s + " with the " + sp, "wipe down the " + s, "use the " + sp + " to wipe the " + s,
			"could you clean the " + s + "?", "scrub the " + s + " with the " + sp, "give the " + s + " a wipe",
		},
		objects: []string{sp, s}, target: s, distractor: dis,
	}
}

// drawerTask returns a drawer: an object put away in a drawer task.
func drawerTask(r *rand.Rand, c, dis string) taskSpec {
	o := c + " " + pick(r, smallThings)
	return taskSpec{
		text: fmt.Sprintf("Open the drawer, put the %s inside, and close it", o),
		steps: []step{
			{"hook the fingers under the drawer handle", "gripper on the drawer handle"},
			{"pull the drawer open halfway", "drawer open"},
			{"grasp the " + o + " from the table", o + " grasped"},
			{"move the " + o + " over the open drawer", o + " over the drawer"},
			{"drop the " + o + " into the drawer", o + " in the drawer"},
			{"push the drawer closed with the back of the gripper", "drawer closed with the " + o + " inside"},
		},
		rephrasings: []string{
			"put the " + o + " away in the drawer", "store the " + o + " in the drawer",
			"open the drawer and put the " + o + " in it", "could you put the " + o + " in the drawer and close it?",
			"place the " + o + " inside the drawer", "tidy the " + o + " into the drawer",
		},
		objects: []string{o, "drawer"}, target: "drawer", distractor: dis,
	}
}

// foldTask returns a fold: a towel in half task.
func foldTask(c, dis string) taskSpec {
	t := c + " towel"
	return taskSpec{
		text: fmt.Sprintf("Fold the %s in half", t),
		steps: []step{
			{"grasp the near left corner of the " + t, "left corner grasped"},
			{"grasp the near right corner of the " + t, "both corners grasped"},
			{"lift the near edge of the " + t, "near edge lifted"},
			{"pull the edge over to the far side", "towel folded over"},
			{"align the edges of the " + t, "edges aligned"},
			{"release the corners and flatten the fold", t + " folded in half"},
		},
		rephrasings: []string{
			"fold the " + t, "fold the " + t + " into two", "could you fold the " + t + " in half?",
			"make a half fold with the " + t, "fold the " + t + " once", "double the " + t + " over",
		},
		objects: []string{t, "table"}, target: "table", distractor: dis,
	}
}

// subtaskText returns a step's subtask text, sometimes with an extra
// "how" detail.
func subtaskText(r *rand.Rand, t *taskSpec, s step) string {
	if r.IntN(3) != 0 {
		return s.do
	}
	d := pick(r, details)
	if strings.Contains(d, "%s") {
		d = fmt.Sprintf(d, t.distractor)
	}
	return s.do + " " + d
}

// interjection is a user interruption, the robot's spoken answer and the
// line the refreshed plan gains.
type interjection struct {
	user, say, note string
}

func makeInterjection(r *rand.Rand, t *taskSpec) interjection {
	o := t.objects[0]
	switch r.IntN(8) {
	case 0:
		return interjection{"don't touch the " + t.distractor, "Okay, I'll stay away from the " + t.distractor + ".", "avoid the " + t.distractor}
	case 1:
		c := pick(r, colors)
		return interjection{"not that one, use the " + c + " one instead", "Got it, switching to the " + c + " one.", "use the " + c + " one"}
	case 2:
		return interjection{"go slower near the edge", "Sure, I'll slow down near the edge.", "move slowly near the edge"}
	case 3:
		return interjection{"put it on the left side of the " + t.target, "Okay, the left side of the " + t.target + ".", "place it on the left side of the " + t.target}
	case 4:
		return interjection{"wait, hold on a second", "Pausing now.", "pause, then continue"}
	case 5:
		return interjection{"can you hurry up a bit?", "I'll move faster.", "speed up"}
	case 6:
		return interjection{"be careful with the " + o, "I'll be careful with the " + o + ".", "handle the " + o + " gently"}
	default:
		return interjection{"actually, do the " + t.target + " side first", "Sure, starting with the " + t.target + " side.", "start from the " + t.target + " side"}
	}
}

// vqaPair returns a question about a camera view of w×h pixels and its
// answer as JSON in one of the bbox / keypoint / count / attribute /
// spatial shapes; every coordinate is inside the frame (640×480 draws
// what this generator always drew).
func vqaPair(r *rand.Rand, t *taskSpec, w, h int) (q, a string) {
	o := pick(r, t.objects)
	switch r.IntN(5) {
	case 0:
		// A box of side at most `side` (80 px on 640×480; smaller frames
		// get smaller boxes, so that it stays inside the frame).
		side := min(80, w/2, h/2)
		x, y := r.IntN(w-side), r.IntN(h-side)
		return "What is the bounding box of the " + o + "?",
			fmt.Sprintf(`{"bbox": [%d, %d, %d, %d]}`, x, y, x+side/4+r.IntN(side*3/4), y+side/4+r.IntN(side*3/4))
	case 1:
		return "Point to the " + o + ".", fmt.Sprintf(`{"point": [%d, %d]}`, r.IntN(w), r.IntN(h))
	case 2:
		return "How many objects are on the " + t.target + "?", fmt.Sprintf(`{"count": %d}`, r.IntN(6))
	case 3:
		if r.IntN(2) == 0 {
			return "Is the gripper open or closed?", fmt.Sprintf(`{"attribute": "gripper", "value": %q}`, pick(r, []string{"open", "closed"}))
		}
		color, thing, _ := strings.Cut(t.distractor, " ")
		return "What color is the " + thing + "?", fmt.Sprintf(`{"attribute": "color", "value": %q}`, color)
	default:
		return "Where is the " + o + " relative to the " + t.distractor + "?",
			fmt.Sprintf(`{"spatial": %q}`, pick(r, []string{"left of", "right of", "in front of", "behind", "on top of", "next to"}))
	}
}

func motionText(r *rand.Rand) string {
	switch r.IntN(5) {
	case 0:
		return fmt.Sprintf("move the end effector %d cm %s", 2+r.IntN(12), pick(r, []string{"forward", "back", "left", "right", "up", "down"}))
	case 1:
		return fmt.Sprintf("rotate the wrist %d degrees %s", 10+5*r.IntN(12), pick(r, []string{"clockwise", "counterclockwise"}))
	case 2:
		return pick(r, []string{"close the gripper", "open the gripper", "half-close the gripper"})
	case 3:
		return fmt.Sprintf("raise the arm %d cm", 3+r.IntN(15))
	default:
		return fmt.Sprintf("tilt the wrist down %d degrees", 5+5*r.IntN(8))
	}
}

// traceText returns a trace of points inside a w×h frame: it starts away
// from the edges and moves by steps proportional to the frame (on 640×480
// what this generator always drew).
func traceText(r *rand.Rand, w, h int) string {
	var b strings.Builder
	b.WriteByte('[')
	mx, my := w*5/32, h*5/24 // 100 px on 640×480
	x, y := mx+r.IntN(w-2*mx), my+r.IntN(h-2*my)
	sx, sy := max(1, w*30/640), max(1, h*20/480)
	n := 4 + r.IntN(5)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "[%d, %d]", x, y)
		x = min(w-1, max(0, x+r.IntN(2*sx+1)-sx))
		y = min(h-1, max(0, y+r.IntN(2*sy+1)-sy-h*5/480))
	}
	b.WriteByte(']')
	return b.String()
}

func planText(steps []string, note string) string {
	var b strings.Builder
	for i, s := range steps {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%d. %s", i+1, s)
	}
	if note != "" {
		if len(steps) > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "Note: %s", note)
	}
	return b.String()
}

func memoryText(r *rand.Rand, done []string, remaining int) string {
	last := done[len(done)-1]
	switch {
	case remaining == 0:
		return last + "; task complete"
	case len(done) >= 2 && r.IntN(2) == 0:
		return done[len(done)-2] + ", then " + last + "; " + plural(remaining, "step") + " left"
	default:
		return last + "; " + plural(remaining, "step") + " left"
	}
}

func plural(n int, w string) string {
	if n == 1 {
		return "1 " + w
	}
	return fmt.Sprintf("%d %ss", n, w)
}
