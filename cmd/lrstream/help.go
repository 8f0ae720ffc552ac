package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/lrstream/lrstream/internal/textdist"
)

// hiddenFlag reports whether a flag is accepted but not listed in help:
// deprecated spellings kept so that old command lines still run.
func hiddenFlag(name string) bool {
	return name == "cache" // old spelling of --download
}

// printFlags lists fs's flags as flag.PrintDefaults does, but spelled as
// the docs and error messages spell them (--batch-size, not -batch-size)
// and without the hidden flags.
func printFlags(fs *flag.FlagSet) {
	w := fs.Output()
	fs.VisitAll(func(f *flag.Flag) {
		if hiddenFlag(f.Name) {
			return
		}
		fmt.Fprint(w, flagHelp(f))
	})
}

// flagHelp is one flag's help entry: "  --name TYPE\n    \tusage (default X)\n".
func flagHelp(f *flag.Flag) string {
	var b strings.Builder
	prefix := "--"
	if len(f.Name) == 1 {
		prefix = "-" // -q, as the docs write it; --q is accepted too
	}
	fmt.Fprintf(&b, "  %s%s", prefix, f.Name)
	name, usage := flag.UnquoteUsage(f)
	if name != "" {
		b.WriteString(" " + name)
	}
	if b.Len() <= 4 { // a one-letter bool flag: usage on the same line
		b.WriteString("\t")
	} else {
		b.WriteString("\n    \t")
	}
	b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
	if !zeroDefault(f) {
		if g, ok := f.Value.(flag.Getter); ok && isString(g.Get()) {
			fmt.Fprintf(&b, " (default %q)", f.DefValue)
		} else {
			fmt.Fprintf(&b, " (default %v)", f.DefValue)
		}
	}
	b.WriteString("\n")
	return b.String()
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

// zeroDefault reports whether a flag's default is its type's zero value
// (not shown, as flag.PrintDefaults does not show it).
func zeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return true
	}
	return false
}

// suggestCommand returns the command name closest to name ("strem" →
// "stream"), or "" when none is close.
func suggestCommand(name string) string {
	best, bestD := "", 3
	for _, c := range commands() {
		if d := textdist.EditDistance(strings.ToLower(name), c.name); d < bestD {
			best, bestD = c.name, d
		}
	}
	if bestD > 1 && len(name) < 4 {
		return ""
	}
	return best
}

// unknownCommand reports an unknown command with a suggestion when one is
// close, and the command list.
func unknownCommand(w io.Writer, name string) {
	msg := fmt.Sprintf("lrstream: unknown command %q", name)
	if s := suggestCommand(name); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	fmt.Fprintf(w, "%s\n\n", msg)
	usage(w)
}
