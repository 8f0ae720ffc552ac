// Package render loads LeRobot training recipes and renders one frame's
// language rows into HF-style chat messages with the exact semantics of
// LeRobot's Python render_sample (upstream 7427f318) and
// RenderMessagesStep.
//
// Usage:
//
//	rec, err := render.LoadFile("recipe.yaml") // validated, immutable, shareable
//	ep, err := rec.Episode(persistentRows)       // once per episode
//	for each frame:
//		f := render.Frame{Events: events, T: t, SampleIdx: index}
//		f.SetCanonicalTask(task, noTaskAug)
//		res := ep.Apply(render.ModeFallback, f, hasLanguage)
//
// Recipe is safe for concurrent use; an Episode is not (one per worker).
// See docs/recipes.md for recipes, resolvers and the selection rules.
package render
