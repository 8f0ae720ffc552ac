package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/lrstream/lrstream/render"
)

// recipeCommand is `lrstream recipe check FILE...`: validate recipes and
// describe how they render.
func recipeCommand() command {
	return command{
		name:    "recipe",
		summary: "check a training recipe: components, weights, bindings and resolvers",
		run:     runRecipe,
	}
}

func recipeUsage(w io.Writer) {
	fmt.Fprintln(w, `usage: lrstream recipe check FILE [FILE...]

Loads each recipe (YAML or JSON) with LeRobot's validation rules and prints
its components in selection order, their weights as draw probabilities,
and every binding a render resolves with the resolver it uses. Exits 1 if
any recipe is invalid or has a binding that can never resolve (errors name
the YAML line of the component). Warns about weights that do not sum to 1,
numbers PyYAML (LeRobot's loader) reads as strings (1e-3), and, with
--dataset, cameras the recipe selects that the dataset lacks.

flags:
  --dataset DIR|ORG/NAME[@REV]   check cameras against this dataset`)
}

func runRecipe(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		recipeUsage(e.stderr)
		if len(args) == 0 {
			return exitError{2}
		}
		return flag.ErrHelp
	}
	if args[0] != "check" {
		fmt.Fprintf(e.stderr, "lrstream recipe: unknown subcommand %q\n\n", args[0])
		recipeUsage(e.stderr)
		return exitError{2}
	}
	fs := flag.NewFlagSet("lrstream recipe check", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { recipeUsage(e.stderr) }
	dataset := fs.String("dataset", "", "also check the recipe against this dataset (directory or ORG/NAME[@REV]): cameras its bindings select")
	if err := parseFlagsArgs(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(e.stderr, "lrstream recipe check: no recipe FILE given")
		fmt.Fprintln(e.stderr)
		recipeUsage(e.stderr)
		return exitError{2}
	}
	bad := 0
	for i, path := range fs.Args() {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		if err := checkRecipe(ctx, e, path, *dataset); err != nil {
			fmt.Fprintf(e.stderr, "lrstream recipe check: %s: invalid recipe:\n  %s\n", path, strings.ReplaceAll(err.Error(), "\n", "\n  "))
			bad++
		}
	}
	if bad > 0 {
		return exitError{1}
	}
	return nil
}

// checkRecipe loads one recipe and prints its description and warnings:
// weights not summing to 1, numbers PyYAML reads differently, cameras the
// dataset (when given) lacks. Errors carry the YAML line of the component
// they name.
func checkRecipe(ctx context.Context, e *env, path, dataset string) error {
	w := e.stdout
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	r, err := render.Load(data, filepath.Base(path))
	if err != nil {
		return withLine(data, err)
	}
	infos := r.Describe()
	warnings := yamlNumberWarnings(data)
	if r.IsBlend() {
		if ww := weightWarning(infos); ww != "" {
			warnings = append(warnings, ww)
		}
	}
	if dataset != "" {
		if path == noRecipe {
			path = "./" + path // the file, not --recipe none
		}
		rf := runFlags{recipe: path, mode: "fallback", onError: "fail", onInconsistent: "fail", hub: hubFlags{download: "full"}, noBatchCheck: true}
		rf.datasets.Set(dataset)
		cfg, err := rf.open(ctx, e)
		if err != nil {
			return err
		}
		warnings = append(warnings, cameraWarnings(infos, &cfg.Dataset.Info, cfg.Dataset.ID)...)
	}
	defer func() {
		for _, ww := range warnings {
			fmt.Fprintf(w, "  warning: %s\n", ww)
		}
	}()
	kind := "message recipe"
	if r.IsBlend() {
		kind = fmt.Sprintf("blend of %d components", len(infos))
	}
	fmt.Fprintf(w, "%s: %s (sha256 %s)\n", path, kind, r.SHA256()[:16])
	printRecipeComponents(w, r.IsBlend(), infos)
	printRecipeBindings(w, r.IsBlend(), infos)
	if err := r.Check(); err != nil {
		return withLine(data, err)
	}
	fmt.Fprintln(w, "  ok")
	return nil
}

// printRecipeComponents prints a blend's components (weight, probability
// of being drawn, route, turns), or a message recipe's number of turns.
func printRecipeComponents(w io.Writer, blend bool, infos []render.ComponentInfo) {
	if blend {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tcomponent\tweight\tp(draw)\troute\tturns")
		for i, c := range infos {
			route := "-"
			if c.Route != "" {
				route = c.Route + " (wins whenever it renders)"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%.2f%%\t%s\t%d\n", i, c.Name,
				strconv.FormatFloat(c.Weight, 'g', -1, 64), 100*c.Probability, route, c.Turns)
		}
		tw.Flush()
	} else {
		fmt.Fprintf(w, "  %d turns\n", infos[0].Turns)
	}
}

// printRecipeBindings prints each component's bindings: name, resolver,
// expression and where it comes from (or why it is invalid).
func printRecipeBindings(w io.Writer, blend bool, infos []render.ComponentInfo) {
	for _, c := range infos {
		if blend {
			fmt.Fprintf(w, "  bindings of %s:\n", c.Name)
		} else {
			fmt.Fprintln(w, "  bindings:")
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, b := range c.Bindings {
			switch {
			case b.Resolver == "task":
				fmt.Fprintf(tw, "    task\ttask\t(explicit task, else task_aug rotation, else dataset task)\timplicit\n")
			case b.Err != nil:
				fmt.Fprintf(tw, "    %s\tINVALID\t%s\t%v\n", b.Name, b.Expr, b.Err)
			default:
				src := "declared"
				if b.Default {
					src = "default"
				}
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s, reads %s\n", b.Name, b.Resolver, b.Expr, src, b.Column)
			}
		}
		tw.Flush()
	}
}
