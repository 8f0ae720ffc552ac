package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestHelp checks every command's help (issue 24 item 6): `lrstream help
// CMD` prints CMD's usage (not the command list), flags are spelled as the
// docs spell them (--batch-size; -q keeps one dash), and the deprecated
// --cache is not listed.
func TestHelp(t *testing.T) {
	oneDash := regexp.MustCompile(`(?m)^  -[A-Za-z0-9]{2,}`)
	for _, c := range commands() {
		for _, args := range [][]string{{"help", c.name}, {c.name, "--help"}, {c.name, "-h"}} {
			_, errb, code := runCmd(t, args...)
			if code != 0 {
				t.Errorf("%v: exit %d", args, code)
			}
			if !strings.Contains(errb, "usage: lrstream "+c.name) || strings.Contains(errb, "commands:") {
				t.Errorf("%v: not %s's usage:\n%s", args, c.name, errb)
			}
			if m := oneDash.FindString(errb); m != "" {
				t.Errorf("%v: flag listed as %q (one dash)", args, m)
			}
			if regexp.MustCompile(`(?m)^  --cache\b[^-]`).MatchString(errb) {
				t.Errorf("%v: lists the deprecated --cache", args)
			}
		}
	}
	// Listed where a command has the Hub flags.
	for _, name := range []string{"stream", "validate"} {
		_, errb, _ := runCmd(t, "help", name)
		for _, f := range []string{"  --download string", "  --cache-dir DIR", "  --revision REV", "  --batch-size int"} {
			if name == "validate" && f == "  --batch-size int" {
				continue
			}
			if !strings.Contains(errb, f+"\n") {
				t.Errorf("help %s lacks %q", name, f)
			}
		}
	}
}

// TestUnknownCommand: a misspelt command gets a suggestion when one is
// close, and the command list.
func TestUnknownCommand(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		suggest string
	}{
		{[]string{"strem"}, `did you mean "stream"?`},
		{[]string{"valdate", "x"}, `did you mean "validate"?`},
		{[]string{"Serve"}, `did you mean "serve"?`},
		{[]string{"prerendr"}, `did you mean "prerender"?`},
		{[]string{"help", "strem"}, `did you mean "stream"?`},
		{[]string{"xyzzy"}, ""},
		{[]string{"ab"}, ""},
	} {
		_, errb, code := runCmd(t, tc.args...)
		if code != 2 || !strings.Contains(errb, "unknown command") || !strings.Contains(errb, "commands:") {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errb)
		}
		if tc.suggest == "" && strings.Contains(errb, "did you mean") || !strings.Contains(errb, tc.suggest) {
			t.Errorf("%v: stderr %q, want suggestion %q", tc.args, errb, tc.suggest)
		}
	}
}

// TestFlagValueErrors: the flag package's own errors name flags as the
// docs do.
func TestFlagValueErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stream", "--batch-size", "x"}, `invalid value "x" for flag --batch-size`},
		{[]string{"stream", "--batch-size"}, "flag needs an argument: --batch-size"},
		{[]string{"verify", "-q=x", "d"}, `invalid boolean value "x" for -q`},
		{[]string{"verify"}, "lrstream verify: DIR is required"},
		{[]string{"verify", "d", "--qq"}, "unknown flag --qq"},
		{[]string{"verify", "d", "e"}, `unexpected argument "e"`},
	} {
		_, errb, code := runCmd(t, tc.args...)
		if code != 2 || !strings.Contains(errb, tc.want) || !strings.Contains(errb, "--help' for usage") {
			t.Errorf("%v: exit %d, stderr %q lacks %q", tc.args, code, errb, tc.want)
		}
	}
}
