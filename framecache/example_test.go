package framecache_test

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/lrstream/lrstream/framecache"
)

// A decoder stores the frames of a segment it decoded, and a later lookup reads them back.
func Example() {
	dir, _ := os.MkdirTemp("", "frames")
	defer os.RemoveAll(dir)
	c, err := framecache.Open(framecache.Options{Dir: dir, Budget: 1 << 30})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	const group, file = "lerobot/pusht@main", "videos/cam/file-000.mp4 size=1234 480x640 yuv420p"
	if r, _ := c.Lookup(group, file, 2.0); r == nil { // a miss: decode, and store
		w := c.Create(group, file, 2.0, []byte("yuv420p 480x640"))
		for i := range 3 {
			w.Add(2.0+float64(i)/10, []byte{byte(i), 1, 2, 3}) // the decoded frame
		}
		if err := w.Commit(2.2); err != nil {
			panic(err)
		}
	}

	c.Flush()                          // entries are published in the background
	r, _ := c.Lookup(group, file, 2.1) // a hit
	defer r.Close()
	fmt.Printf("[%v, %v] %s, %d frames\n", r.Start(), r.Covered(), r.Meta(), r.Len())
	r.SkipTo(2.1)
	for {
		pts, frame, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil { // framecache.ErrCorrupt: decode instead
			panic(err)
		}
		fmt.Printf("%.1f %v\n", pts, frame)
	}
	st := c.Stats()
	fmt.Println("hits", st.Hits, "misses", st.Misses)
	// Output:
	// [2, 2.2] yuv420p 480x640, 3 frames
	// 2.1 [1 1 2 3]
	// 2.2 [2 1 2 3]
	// hits 1 misses 1
}
