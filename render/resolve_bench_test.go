package render

import (
	"path/filepath"
	"testing"
)

// BenchmarkResolve measures resolving every binding of every component of
// subtask_mem_vqa_speech.yaml (active_at, emitted_at, nth_prev, event
// resolvers) for one frame, on the conformance episodes; ns/op is per
// frame (all components, without building messages).
func BenchmarkResolve(b *testing.B) {
	rec, err := LoadFile(filepath.Join(sharedDir(b), "recipes", "subtask_mem_vqa_speech.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	eps := loadBenchEpisodes(b)
	compiled := make([]*Episode, len(eps))
	for i, ep := range eps {
		if compiled[i], err = rec.Episode(ep.persistent); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		for i, ep := range eps {
			e := compiled[i]
			for k := range ep.frames {
				if done == b.N {
					return
				}
				e.taskDone = false
				for ci := range rec.comps {
					_ = e.resolveComp(ci, &ep.frames[k])
				}
				done++
			}
		}
	}
}
