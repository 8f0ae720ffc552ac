package framecache

import "testing"

// TestMemo: a memo set by one Cache is read by another on the same
// directory, keys are kept apart, and memos are not listed as a dataset.
func TestMemo(t *testing.T) {
	dir := t.TempDir()
	c, _ := openTest(t, Options{Dir: dir, Budget: 1 << 20})
	if _, ok := c.Memo("k1"); ok {
		t.Fatal("a memo before any was set")
	}
	c.SetMemo("k1", []byte("v1"))
	c.SetMemo("k2", []byte("v2"))
	c2, _ := openTest(t, Options{Dir: dir, Budget: 1 << 20})
	for k, want := range map[string]string{"k1": "v1", "k2": "v2"} {
		if v, ok := c2.Memo(k); !ok || string(v) != want {
			t.Fatalf("Memo(%s) = %q, %v", k, v, ok)
		}
	}
	if groups, err := List(dir); err != nil || len(groups) != 0 {
		t.Fatalf("List = %+v, %v: memos listed as a dataset", groups, err)
	}
}
