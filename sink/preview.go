package sink

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/schema"
)

// Preview writes a short human-readable account of a stream, for a
// terminal: the header, then for the first PreviewBatches batches their
// size and first few samples with their rendered messages (targets marked
// with '*'), then the counts.
type Preview struct {
	w          *bufio.Writer
	maxSamples int
	state      state
	batches    int64 // batches seen
	noRecipe   bool  // the header's mode is ModeNoRecipe
}

// PreviewBatches is how many batches a Preview shows; later ones are only
// counted.
const PreviewBatches = 3

// NewPreview returns a Sink printing a readable preview to w, showing at
// most maxSamples samples per batch (2 when maxSamples <= 0).
func NewPreview(w io.Writer, maxSamples int) *Preview {
	if maxSamples <= 0 {
		maxSamples = 2
	}
	return &Preview{w: bufio.NewWriter(w), maxSamples: maxSamples}
}

func (p *Preview) flush() error {
	if err := p.w.Flush(); err != nil {
		return fmt.Errorf("sink: write: %w", err)
	}
	return nil
}

// Header prints the stream's description and column schema.
func (p *Preview) Header(h Header) error {
	if p.state != stateStart {
		return errOrder
	}
	p.state = stateOpen
	rev := h.Revision
	if rev == "" {
		rev = "local"
	}
	sha := h.RecipeSHA256
	if len(sha) > 12 {
		sha = sha[:12]
	}
	p.noRecipe = h.Mode == ModeNoRecipe
	if p.noRecipe {
		fmt.Fprintf(p.w, "%s stream: dataset %s @ %s, %d fps, no recipe (nothing rendered, no messages), batch size %d\n",
			FormatVersion, h.Dataset, rev, h.FPS, h.BatchSize)
	} else {
		fmt.Fprintf(p.w, "%s stream: dataset %s @ %s, %d fps, recipe %s (sha256 %s), mode %s, batch size %d\n",
			FormatVersion, h.Dataset, rev, h.FPS, h.Recipe, sha, h.Mode, h.BatchSize)
	}
	cols := make([]string, 0, len(h.Features))
	for _, f := range h.Features {
		dims := make([]string, len(f.Shape))
		for i, d := range f.Shape {
			dims[i] = fmt.Sprint(d)
		}
		cols = append(cols, fmt.Sprintf("%s %s[%s]", f.Name, f.DType, strings.Join(dims, ",")))
	}
	fmt.Fprintf(p.w, "columns: %s\n", strings.Join(cols, ", "))
	if len(h.Cameras) > 0 {
		cams := make([]string, 0, len(h.Cameras))
		for _, c := range h.Cameras {
			if c.Decoded {
				cams = append(cams, c.Key+" (decoded)")
			} else {
				cams = append(cams, fmt.Sprintf("%s (not decoded: %s)", c.Key, c.Reason))
			}
		}
		fmt.Fprintf(p.w, "cameras: %s\n", strings.Join(cams, ", "))
	}
	for _, d := range h.Pins {
		fmt.Fprintf(p.w, "pins: %s: %d files read (of %d objects listed), pinned by %s\n", d.Dataset, len(d.Files), d.Objects, d.Hash)
	}
	return p.flush()
}

// Batch prints a batch summary and its first samples.
func (p *Preview) Batch(b *collate.Batch, meta BatchMeta) error {
	if p.state != stateOpen {
		return errOrder
	}
	p.batches++
	if p.batches > PreviewBatches {
		return nil
	}
	kind := " rendered"
	switch {
	case p.noRecipe:
		kind = ""
	case b.Samples == nil:
		kind = " passthrough"
	}
	fmt.Fprintf(p.w, "\nbatch %d (epoch %d): %d%s samples", meta.Seq, meta.Epoch, b.N, kind)
	if b.N > 0 {
		fmt.Fprintf(p.w, ", index %d..%d", b.Index(0), b.Index(b.N-1))
	}
	fmt.Fprintln(p.w)
	for i := 0; i < b.N && i < p.maxSamples; i++ {
		fmt.Fprintf(p.w, "  [%d] index %d, episode %d, frame %d, t=%.3fs, task %q\n",
			i, b.Index(i), b.EpisodeIndex(i), b.FrameIndex(i), b.Timestamp(i), b.Task[i])
		if b.Samples != nil {
			p.sample(b.Samples[i])
		}
	}
	if b.N > p.maxSamples {
		fmt.Fprintf(p.w, "  … %d more\n", b.N-p.maxSamples)
	}
	return p.flush()
}

// sample prints one sample's messages.
func (p *Preview) sample(s *schema.Sample) {
	for j, m := range s.Messages {
		mark := " "
		if slices.Contains(s.Targets, j) {
			mark = "*"
		}
		stream := ""
		if j < len(s.Streams) {
			stream = " [" + s.Streams[j] + "]"
		}
		var content string
		switch m.Kind {
		case schema.TextContent:
			content = m.Text
		case schema.BlockContent:
			parts := make([]string, 0, len(m.Blocks))
			for _, blk := range m.Blocks {
				b, err := appendJSONValue(nil, blk)
				if err != nil {
					b = []byte("?")
				}
				parts = append(parts, string(b))
			}
			content = strings.Join(parts, " ")
		}
		if m.ToolCalls != nil {
			tc, err := appendCompactJSON(nil, m.ToolCalls)
			if err != nil {
				tc = m.ToolCalls
			}
			content = strings.TrimSpace(content + " tool_calls=" + string(tc))
		}
		fmt.Fprintf(p.w, "      %s%s%s: %s\n", mark, m.Role, stream, oneLine(content, 160))
	}
}

// oneLine escapes newlines and shortens s to at most n runes.
func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// End prints the counts.
func (p *Preview) End(e End) error {
	if p.state != stateOpen {
		return errOrder
	}
	p.state = stateDone
	if hidden := p.batches - PreviewBatches; hidden > 0 {
		fmt.Fprintf(p.w, "\n… %d more batches not shown (pipe or redirect the output for the msgpack stream, or use --format jsonl)\n", hidden)
	}
	fmt.Fprintf(p.w, "\nend: %d frames read, %d rendered, %d dropped, %d passthrough, %d skipped, %d errors; %d batches, %d samples\n",
		e.Frames, e.Rendered, e.Dropped, e.Passthrough, e.Skipped, e.Errors, e.Batches, e.Samples)
	for _, c := range e.Components {
		fmt.Fprintf(p.w, "  component %s: %d\n", c.Name, c.Count)
	}
	return p.flush()
}

// Fail prints the error.
func (p *Preview) Fail(err error) error {
	if p.state == stateDone {
		return errOrder
	}
	p.state = stateDone
	fmt.Fprintf(p.w, "\nerror: %v\n", err)
	return p.flush()
}

var _ Sink = (*Preview)(nil)
