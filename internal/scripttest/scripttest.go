package scripttest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt scripts")

// Block is one command of a script with the comments before it and its
// expected output. A script's trailing comments are a last Block with no
// command.
type Block struct {
	Pre  []string // blank and comment lines before the command
	Line int      // the command's line number, from 1
	Cmd  string
	Want string
}

// Parse splits a script's text into blocks; it fails on a command not
// followed by "----".
func Parse(text string) ([]Block, error) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	var blocks []Block
	var cur Block
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			cur.Pre = append(cur.Pre, l)
			continue
		}
		cur.Line, cur.Cmd = i+1, l
		i++
		if i >= len(lines) || lines[i] != "----" {
			return nil, fmt.Errorf("line %d: command %q not followed by ----", cur.Line, l)
		}
		var out []string
		for i+1 < len(lines) && lines[i+1] != "" {
			i++
			out = append(out, lines[i])
		}
		cur.Want = strings.Join(out, "\n")
		blocks = append(blocks, cur)
		cur = Block{}
	}
	if len(cur.Pre) > 0 {
		blocks = append(blocks, cur)
	}
	return blocks, nil
}

// Format writes blocks back as a script, each command followed by its
// output in got (by block, "" for a block with no command).
func Format(blocks []Block, got []string) string {
	var buf strings.Builder
	for i, bl := range blocks {
		for _, p := range bl.Pre {
			buf.WriteString(p + "\n")
		}
		if bl.Cmd != "" {
			fmt.Fprintf(&buf, "%s\n----\n%s\n", bl.Cmd, got[i])
		}
	}
	return buf.String()
}

// Run runs every testdata/*.txt script of the package as a subtest named
// after its file: start gives the script's command runner, called with
// each command line in order.
func Run(t *testing.T, start func(t *testing.T) func(cmd string) string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) { File(t, file, start(t)) })
	}
}

// File runs the script in file, each command through run, and reports
// every output that differs from the expected one with its line; with
// -rewrite it writes the outputs into the file instead.
func File(t *testing.T, file string, run func(cmd string) string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := Parse(string(data))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	got := make([]string, len(blocks))
	for i, bl := range blocks {
		if bl.Cmd == "" {
			continue
		}
		got[i] = run(bl.Cmd)
		if !*rewrite && got[i] != bl.Want {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, bl.Line, bl.Cmd, got[i], bl.Want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(Format(blocks, got)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
