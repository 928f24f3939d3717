package codecgen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/codecgen"
)

const directive = "//go:generate go run " + codecgen.Command + " -json -decode A -encode A -o a_gen.go\n"

// writePkg writes a package of the given source (after its package
// clause) and the directive into a fresh directory.
func writePkg(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package p\n\n"+directive+src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const schemaA = `
type A struct {
	Name  string            ` + "`json:\"name\"`" + `
	Opt   int32             ` + "`json:\"opt,omitempty\"`" + `
	Tags  map[string]string ` + "`json:\"tags,omitempty\"`" + `
	B     *B                ` + "`json:\"b,omitempty\"`" + `
	Bs    []B               ` + "`json:\"bs\"`" + `
}

type B struct {
	On bool ` + "`json:\"on,omitempty\"`" + `
}
`

// TestCheck generates a package's codec, then finds it stale once a field
// is added, and current again after generating anew.
func TestCheck(t *testing.T) {
	dir := writePkg(t, schemaA)
	if err := codecgen.Check(dir); err == nil || !strings.Contains(err.Error(), "a_gen.go") {
		t.Fatalf("Check before generating: %v, want an error naming a_gen.go", err)
	}
	generate := func() {
		args, err := codecgen.Directives(dir)
		if err != nil || len(args) != 1 {
			t.Fatalf("Directives: %q, %v", args, err)
		}
		name, src, err := codecgen.Run(dir, args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	generate()
	if err := codecgen.Check(dir); err != nil {
		t.Fatalf("Check after generating: %v", err)
	}
	src := strings.Replace(schemaA, "On bool", "Off bool `json:\"off,omitempty\"`\n\tOn bool", 1)
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package p\n\n"+directive+src), 0o644); err != nil {
		t.Fatal(err)
	}
	err := codecgen.Check(dir)
	if err == nil || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("Check after adding a field: %v, want stale", err)
	}
	generate()
	if err := codecgen.Check(dir); err != nil {
		t.Fatalf("Check after generating again: %v", err)
	}
	gen, err := os.ReadFile(filepath.Join(dir, "a_gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`case "off":`, `"off":true`, "func decodeB(", "func appendB("} {
		if !strings.Contains(string(gen), want) {
			t.Errorf("generated code lacks %q", want)
		}
	}
}

// TestRefusals checks that what the generator cannot write faithfully is
// an error naming the field, not a codec that drops it.
func TestRefusals(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"no json tag":      {"type A struct{ X string }", "A.X has no json tag"},
		"unsupported type": {"type A struct{ X float64 `json:\"x\"` }", "float64 is not supported"},
		"unknown option":   {"type A struct{ X string `json:\"x\" codec:\"zip=1\"` }", `codec option "zip=1" is not known`},
		"json option":      {"type A struct{ X string `json:\"x,string\"` }", `json option "string"`},
		"quantity misused": {"type A struct{ X string `json:\"x\" codec:\"quantity=F\"` }", "quantity is for int64"},
		"slab misused":     {"type A struct{ X []string `json:\"x\" codec:\"slab=s\"` }", "slab is for slice of structs"},
		"skipped member":   {"type A struct{ X string `json:\"-\"` }", "names no member"},
		"not a struct":     {"type A int", "A is not a struct type"},
		"omitzero, no ==":  {"type A struct{ B B `json:\"b,omitzero\"` }\ntype B struct{ S []string `json:\"s\"` }", "does not compare"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := writePkg(t, tc.src)
			args, err := codecgen.Directives(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = codecgen.Run(dir, args[0])
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	for _, args := range [][]string{
		{"-json", "-decode", "A", "-o", "a.go"},
		{"-json", "-decode", "A", "-o", "sub/a_gen.go"},
		{"-decode", "A", "-o", "a_gen.go"},
		{"-json", "-o", "a_gen.go", "extra"},
		{"-nope"},
	} {
		if _, _, err := codecgen.Run(writePkg(t, schemaA), args); err == nil {
			t.Errorf("Run %q: no error", args)
		}
	}
}

// TestBinary generates a binary codec of another package's types, with a
// hooked type and a field its hook writes, and checks the layout's parts
// and its refusals.
func TestBinary(t *testing.T) {
	root := t.TempDir()
	types := filepath.Join(root, "types")
	user := filepath.Join(root, "user")
	for _, d := range []string{types, user} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := `package types

type Duration int64

type Job struct {
	Name  string            ` + "`json:\"name\"`" + `
	Wait  Duration          ` + "`json:\"wait\"`" + `
	Tags  map[string]string ` + "`json:\"tags\"`" + `
	Pol   *Pol              ` + "`json:\"pol\"`" + `
	Parts []Part            ` + "`json:\"parts\" codec:\"slab=parts\"`" + `
	Pod   Pod               ` + "`json:\"pod\"`" + `
}

type Pol struct {
	On bool  ` + "`json:\"on\"`" + `
	N  int32 ` + "`json:\"n\"`" + `
}

type Part struct {
	K    string ` + "`json:\"k\"`" + `
	Hide string ` + "`json:\"hide\"`" + `
}

type Pod struct {
	X int64 ` + "`json:\"x\"`" + `
}
`
	if err := os.WriteFile(filepath.Join(types, "types.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(user, "user.go"), []byte("package user\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"-binary", "-schema", "../types", "-import", "example.com/types", "-type", "Job", "-o", "job_gen.go"}
	name, out, err := codecgen.Run(user, append(base, "-hook", "Pod=2", "-skip", "Part.Hide", "-skim", "Pol,Part"))
	if err != nil {
		t.Fatal(err)
	}
	if name != "job_gen.go" {
		t.Errorf("Run names the file %q, want job_gen.go", name)
	}
	gen := string(out)
	for _, want := range []string{
		"package user", `"example.com/types"`,
		"const minJobBytes = 7", // name, wait, tags, pol, parts, and the hook's 2
		"e.varint(int64(v.Wait))", "v.Wait = types.Duration(d.varint())",
		"v.Tags = sd.strMap(d, &sd.tags)",
		"e.bool(v.Pol != nil)", "if decodeBool(d) {",
		"sd.parts.take(", "d.count(1)",
		"appendPod(e, &v.Pod)", "sd.decodePod(d, &v.Pod)",
		"func skipPol(s string, i int) int {\n\t_, i = readBool(s, i)\n\t_, i = readInt32(s, i)\n\treturn i\n}",
		"func skipPart(s string, i int) int {\n\ti = skipStr(s, i)\n\treturn i\n}",
	} {
		if !strings.Contains(gen, want) {
			t.Errorf("generated code lacks %q:\n%s", want, gen)
		}
	}
	if strings.Contains(gen, "Hide") {
		t.Errorf("generated code writes the skipped field Part.Hide:\n%s", gen)
	}
	_, _, err = codecgen.Run(user, append(append([]string(nil), base...), "-hook", "Pod=2", "-skimmer", "Job", "-read", "Job.Name,Job.Pod,Job.Pol.N"))
	if err == nil || !strings.Contains(err.Error(), "only fields of inline structs") {
		t.Errorf("Run reading a field behind a pointer: %v, want a refusal", err)
	}
	_, out, err = codecgen.Run(user, append(append([]string(nil), base...), "-hook", "Pod=2", "-skimmer", "Job", "-read", "Job.Name,Job.Pod"))
	if err != nil {
		t.Fatal(err)
	}
	gen = string(out)
	for _, want := range []string{
		"func skimJob(s string, i int, k *skimmer) int {\n\ti = k.skimJobName(s, i)\n\t_, i = readVarint(s, i)\n\ti = skipStrMap(s, i)\n",
		"i = k.skimJobPod(s, i)\n\treturn i\n}",
	} {
		if !strings.Contains(gen, want) {
			t.Errorf("generated skimmer lacks %q:\n%s", want, gen)
		}
	}
	for _, extra := range [][]string{
		{"-hook", "Pod=2", "-skimmer", "Job", "-read", "Job.Name"},         // the hooked pod cannot be skipped
		{"-hook", "Pod=2", "-skimmer", "Job", "-read", "Job.Pod,Job.Nope"}, // no such field
		{"-skip", "Part.Nope"},
		{"-skip", "Part"},
		{"-hook", "Pod=0"},
		{"-hook", "Job=3"},
		{"-hook", "Pol=1"},
	} {
		if _, _, err := codecgen.Run(user, append(append([]string(nil), base...), extra...)); err == nil {
			t.Errorf("Run with %q: no error", extra)
		}
	}
	if _, _, err := codecgen.Run(user, []string{"-binary", "-o", "x_gen.go"}); err == nil {
		t.Error("Run -binary without -schema: no error")
	}
}
