package main

import (
	"errors"
	"flag"
	"io"
	"regexp"
	"slices"
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

// TestParseInterspersed: positional arguments before, between and after
// the flags; "--" ends the flags.
func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		json bool
	}{
		{[]string{"ds"}, []string{"ds"}, false},
		{[]string{"ds", "--json"}, []string{"ds"}, true},
		{[]string{"--json", "ds"}, []string{"ds"}, true},
		{[]string{"a", "--json", "b"}, []string{"a", "b"}, true},
		{[]string{"--", "--json"}, []string{"--json"}, false},
		{[]string{"a", "--", "-b"}, []string{"a", "-b"}, false},
		{nil, nil, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		j := fs.Bool("json", false, "")
		pos, err := parseInterspersed(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || *j != tc.json {
			t.Errorf("%q: %q json %t (%v), want %q json %t", tc.args, pos, *j, err, tc.pos, tc.json)
		}
	}
}

// FuzzParseInterspersed: any command line parses, asks for help or fails
// with a usage error, never panics, and every positional argument is one of args.
func FuzzParseInterspersed(f *testing.F) {
	f.Add("ds\x00--json\x00--max-findings\x003")
	f.Add("--\x00-x")
	f.Add("--max-findings=\x00--json=false\x00a")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Bool("json", false, "")
		fs.Int("max-findings", 0, "")
		pos, err := parseInterspersed(fs, args)
		if err != nil {
			var ee exitError
			if errors.Is(err, flag.ErrHelp) {
				return // -h
			}
			if !errors.As(err, &ee) || ee.code != 2 {
				t.Fatalf("%q: %v", args, err)
			}
			return
		}
		for _, p := range pos {
			if !slices.Contains(args, p) {
				t.Fatalf("%q: positional %q is not an argument", args, p)
			}
		}
	})
}
