package codecgen

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// genSuffix ends the name of every file the generator writes; the schema
// is read from the package's other files.
const genSuffix = "_gen.go"

// Command is how the generated files name their generator, and the
// import path a go:generate directive runs.
const Command = "github.com/sluicehq/sluice/internal/codecgen/cmd/codecgen"

// Run generates what args ask for from the package whose source is in dir,
// and returns the name of the file to write in dir (-o) and its text.
// Args are those of the command:
//
//	-json -decode T1,T2 -encode T3 -o name_gen.go
//	    decoders (decodeT) for T1, T2 and every struct type they reach;
//	    encoders (appendT) for T3 and the element types of the slices
//	    of structs it reaches; struct and pointer fields are written
//	    inline
//	-binary -schema ../../api -import github.com/x/api -type T1,T2
//	        -legacy T2=N -legacy-fields T1.F -o name_gen.go
//	    the binary codec of T1 and T2, types of the package in the
//	    directory -schema names: specLayout, and min<T>Bytes, appendT and
//	    sd.decodeT for each (see binGen); at layout 0, T2 is decoded by
//	    the package's hand-written sd.decodeT2Legacy, whose encodings
//	    take at least N bytes, and field F is not in T1's encoding
//	    -skimmer T3 -read T3.F
//	    adds skimT3(s string, i int, k *skimmer) int, which reads past an
//	    encoding of T3 accepting exactly what sd.decodeT3 accepts, with
//	    the primitives of the package's skim, and hands field F (a path:
//	    T3.F, T3.Inline.G) to the package's method k.skimT3F(s, i) int
func Run(dir string, args []string) (name string, src []byte, err error) {
	fl := flag.NewFlagSet("codecgen", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	var (
		jsonMode   = fl.Bool("json", false, "write JSON decoders and encoders")
		decode     = fl.String("decode", "", "JSON: root types to decode, comma-separated")
		encode     = fl.String("encode", "", "JSON: root types to encode, comma-separated")
		binaryMode = fl.Bool("binary", false, "write a binary codec")
		schemaDir  = fl.String("schema", "", "binary: the directory of the types' package, relative")
		importPath = fl.String("import", "", "binary: the types' package's import path")
		types      = fl.String("type", "", "binary: the root types, comma-separated")
		legacyList = fl.String("legacy", "", "binary: types of hand-written layout-0 decoders, with their fewest bytes, T=N,...")
		lfields    = fl.String("legacy-fields", "", "binary: fields not in their types' layout-0 encodings, T.Field,...")
		skimmers   = fl.String("skimmer", "", "binary: types to write skim functions for, comma-separated")
		readList   = fl.String("read", "", "binary: field paths the skimmers hand to the package, T.F,...")
		out        = fl.String("o", "", "the file to write, ending in "+genSuffix)
	)
	if err := fl.Parse(args); err != nil {
		return "", nil, fmt.Errorf("codecgen: %w", err)
	}
	if fl.NArg() != 0 {
		return "", nil, fmt.Errorf("codecgen: unexpected arguments %q", fl.Args())
	}
	if !strings.HasSuffix(*out, genSuffix) || strings.ContainsRune(*out, filepath.Separator) {
		return "", nil, fmt.Errorf("codecgen: -o %q: want a file name in the package ending in %s", *out, genSuffix)
	}
	switch {
	case *jsonMode == *binaryMode:
		return "", nil, fmt.Errorf("codecgen: give one of -json and -binary")
	case *jsonMode:
		src, err = generateJSON(dir, split(*decode), split(*encode))
	default:
		if *schemaDir == "" || *importPath == "" || *types == "" {
			return "", nil, fmt.Errorf("codecgen: -binary needs -schema, -import and -type")
		}
		legacy := map[string]int{}
		for _, h := range split(*legacyList) {
			t, n, _ := strings.Cut(h, "=")
			v, err := strconv.Atoi(n)
			if err != nil || v < 1 {
				return "", nil, fmt.Errorf("codecgen: -legacy %q: want Type=N, N the fewest bytes of its layout-0 encoding", h)
			}
			legacy[t] = v
		}
		src, err = generateBinary(dir, binArgs{schemaDir: filepath.Join(dir, *schemaDir), importPath: *importPath,
			roots: split(*types), skimmers: split(*skimmers), reads: split(*readList), legacy: legacy, legacyFields: split(*lfields)})
	}
	if err != nil {
		return "", nil, err
	}
	return *out, src, nil
}

func split(list string) []string {
	if list == "" {
		return nil
	}
	return strings.Split(list, ",")
}

func generateJSON(dir string, decode, encode []string) ([]byte, error) {
	s, err := loadSchema(dir)
	if err != nil {
		return nil, err
	}
	g := &jsonGen{s: s, e: newEmitter()}
	types, err := s.closure(decode)
	if err != nil {
		return nil, err
	}
	for _, t := range types {
		if err := g.decoder(t); err != nil {
			return nil, err
		}
	}
	if types, err = s.encoded(encode); err != nil {
		return nil, err
	}
	g.appends = map[string]bool{}
	for _, t := range types {
		g.appends[t] = true
	}
	for _, t := range types {
		if err := g.encoder(t); err != nil {
			return nil, err
		}
	}
	return g.e.file(s.pkg, Command)
}

// Directives returns the argument lists of the go:generate directives of
// the Go files in dir that run the generator (Command), in file order.
func Directives(dir string) ([][]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("codecgen: %w", err)
	}
	var out [][]string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("codecgen: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			rest, ok := strings.CutPrefix(sc.Text(), "//go:generate go run "+Command+" ")
			if ok {
				out = append(out, strings.Fields(rest))
			}
		}
	}
	return out, nil
}

// Check runs every directive of the package in dir (Directives) and
// returns an error naming each file whose generated text differs from the
// one in dir, with its first differing line. It writes nothing.
func Check(dir string) error {
	dirs, err := Directives(dir)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		return fmt.Errorf("codecgen: no go:generate directive runs %s in %s", Command, dir)
	}
	var problems []string
	for _, args := range dirs {
		name, want, err := Run(dir, args)
		if err != nil {
			return err
		}
		have, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
		case !bytes.Equal(have, want):
			problems = append(problems, fmt.Sprintf("%s is stale (run go generate): %s", name, firstDiff(have, want)))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("codecgen: %s", strings.Join(problems, "; "))
	}
	return nil
}

// firstDiff describes the first line where have and want differ.
func firstDiff(have, want []byte) string {
	h, w := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(h) || i < len(w); i++ {
		var a, b string
		if i < len(h) {
			a = h[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b || i >= len(h) || i >= len(w) {
			return fmt.Sprintf("line %d is %q, generated %q", i+1, a, b)
		}
	}
	return "same lines"
}
