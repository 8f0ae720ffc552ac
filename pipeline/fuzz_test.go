package pipeline

import "testing"

func FuzzParseDeltaTimestamps(f *testing.F) {
	for _, s := range []string{"action=0:50/30,observation.state=-1/30,0", "a=1;b=-2:2:1/10", "a=", "a=1/0", "x=1e308/1e-308"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ds, err := ParseDeltaTimestamps(s)
		if err != nil {
			return
		}
		for _, d := range ds {
			if d.Key == "" || len(d.Seconds) == 0 {
				t.Fatalf("%q parsed to %+v", s, d)
			}
		}
	})
}
