package procenv

import (
	"slices"
	"testing"
)

func TestChild(t *testing.T) {
	in := []string{"PATH=/bin", "HF_TOKEN=x", "aws_secret_access_key=y", "AWS_ACCESS_KEY_ID=z", "LANG=C", "MY_PASSWD=p", "=odd", "XAUTHORITY=/x"}
	if got, want := Child(in), []string{"PATH=/bin", "LANG=C"}; !slices.Equal(got, want) {
		t.Fatalf("Child = %q, want %q", got, want)
	}
}
