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
// legacy type, a field of layout 0's legacy codec and fields of later
// layouts, and checks the layout's parts and its refusals.
// (layouttest runs such a codec.)
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
	Mode  string            ` + "`json:\"mode\" codec:\"intern=A|B,since=3\"`" + `
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
	Y int64 ` + "`json:\"y\" codec:\"since=2\"`" + `
}
`
	if err := os.WriteFile(filepath.Join(types, "types.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(user, "user.go"), []byte("package user\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"-binary", "-schema", "../types", "-import", "example.com/types", "-type", "Job,Pod", "-o", "job_gen.go"}
	name, out, err := codecgen.Run(user, append(base, "-legacy", "Pod=2", "-legacy-fields", "Part.Hide"))
	if err != nil {
		t.Fatal(err)
	}
	if name != "job_gen.go" {
		t.Errorf("Run names the file %q, want job_gen.go", name)
	}
	gen := string(out)
	for _, want := range []string{
		"package user", `"example.com/types"`,
		"const specLayout = 3",
		"const minJobBytes = 6", // name, wait, tags, pol, parts, the pod's x; not mode

		"const minPodBytes = 1", // x; y is not in layout 0 or 1
		"e.varint(int64(v.Wait))", "v.Wait = types.Duration(d.varint())",
		"v.Tags = sd.strMap(d, &sd.tags)",
		"e.bool(v.Pol != nil)", "if decodeBool(d) {",
		"sd.parts.take(", "d.count(1)",
		"appendPod(e, &v.Pod)", "sd.decodePod(d, &v.Pod)",
		"e.str(y2.Hide)", "if sd.layout >= 1 {\n\t\t\t\ty4.Hide = d.str()\n\t\t\t}",
		"if sd.layout == 0 {\n\t\tsd.decodePodLegacy(d, v)\n\t\treturn\n\t}",
		"if sd.layout >= 2 {\n\t\tv.Y = d.varint()\n\t}",
		"if sd.layout >= 3 {\n\t\tv.Mode = intern(d.str(), types.A, types.B)\n\t}",
	} {
		if !strings.Contains(gen, want) {
			t.Errorf("generated code lacks %q:\n%s", want, gen)
		}
	}
	_, _, err = codecgen.Run(user, append(append([]string(nil), base...), "-skimmer", "Job", "-read", "Job.Name,Job.Pol.N"))
	if err == nil || !strings.Contains(err.Error(), "only fields of inline structs") {
		t.Errorf("Run reading a field behind a pointer: %v, want a refusal", err)
	}
	_, out, err = codecgen.Run(user, append(append([]string(nil), base...), "-skimmer", "Job,Pod,Pol", "-read", "Job.Name,Pol.N"))
	if err != nil {
		t.Fatal(err)
	}
	gen = string(out)
	for _, want := range []string{
		"func skimJob(s string, i int, k *skimmer) int {\n\ti = k.skimJobName(s, i)\n\t_, i = readVarint(s, i)\n\ti = skipStrMap(s, i)\n",
		"if set1, i = readBool(s, i); set1 {\n\t\ti = skimPol(s, i, k)\n\t}",
		"for range n2 {\n\t\ti = skipStr(s, i)\n\t\ti = skipStr(s, i)\n\t}", // Part at the current layout: Hide too
		"i = skimPod(s, i, k)\n\ti = skipStr(s, i)\n\treturn i\n}",
		"func skimPod(s string, i int, k *skimmer) int {\n\t_, i = readVarint(s, i)\n\t_, i = readVarint(s, i)\n\treturn i\n}",
		"func skimPol(s string, i int, k *skimmer) int {\n\t_, i = readBool(s, i)\n\ti = k.skimPolN(s, i)\n",
	} {
		if !strings.Contains(gen, want) {
			t.Errorf("generated skimmer lacks %q:\n%s", want, gen)
		}
	}
	for _, extra := range [][]string{
		{"-skimmer", "Job", "-read", "Job.Nope"}, // no such field
		{"-legacy-fields", "Part.Nope"},
		{"-legacy-fields", "Part"},
		{"-legacy", "Pod=0"},
		{"-legacy", "Pol=1"}, // not a -type
	} {
		if _, _, err := codecgen.Run(user, append(append([]string(nil), base...), extra...)); err == nil {
			t.Errorf("Run with %q: no error", extra)
		}
	}
	if _, _, err := codecgen.Run(user, []string{"-binary", "-o", "x_gen.go"}); err == nil {
		t.Error("Run -binary without -schema: no error")
	}
	for _, since := range []string{"0", "x", "-1"} {
		bad := strings.Replace(src, "since=2", "since="+since, 1)
		if err := os.WriteFile(filepath.Join(types, "types.go"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := codecgen.Run(user, base); err == nil || !strings.Contains(err.Error(), "Pod.Y: since="+since) {
			t.Errorf("Run with since=%s: %v, want an error naming the field", since, err)
		}
	}
}
