package codecgen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// A schema is the type declarations of one package, read from its source.
type schema struct {
	pkg   string              // the package's name
	types map[string]ast.Expr // type name → its declared type
}

// loadSchema parses the Go files of dir, leaving out tests and the files
// the generator writes (generated ones), so that a stale or broken output
// never stands in the way of generating it again.
func loadSchema(dir string) (*schema, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("codecgen: %w", err)
	}
	fset := token.NewFileSet()
	s := &schema{types: map[string]ast.Expr{}}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, genSuffix) {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("codecgen: %w", err)
		}
		if s.pkg == "" {
			s.pkg = f.Name.Name
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				if ts.Assign == 0 && ts.TypeParams == nil {
					s.types[ts.Name.Name] = ts.Type
				}
			}
		}
	}
	if s.pkg == "" {
		return nil, fmt.Errorf("codecgen: no Go files in %s", dir)
	}
	return s, nil
}

// kind is how the generator writes a value of a field's type.
type kind int

const (
	kString      kind = iota // string, or a named type whose underlying type is string
	kBool                    // bool
	kInt32                   // int32
	kInt64                   // int64
	kLeaf                    // a named type with hooks (leafHooks)
	kStruct                  // a struct of the package
	kPtrStruct               // a pointer to one
	kStrings                 // []string
	kStructSlice             // a slice of structs of the package
	kStrMap                  // map[string]string
)

// A field is one field of a struct, as its tags and type describe it.
type field struct {
	goName    string
	json      string // the member's name
	omitEmpty bool
	omitZero  bool
	kind      kind
	typeName  string // the named type, for kString (when named), kLeaf and the struct kinds
	opts      map[string]string
	// since is the first layout of the binary codec whose encodings hold
	// the field (codec:"since=N"); 0: every layout's do.
	since int
}

// A leaf is a named value type the generator does not look into: what it
// writes for one is these snippets, with %s the value's expression.
type leaf struct {
	jsonDecode string // an expression of the value read by d, a *decoder
	jsonAppend string // an expression appending %s to dst
	nonZero    string // a condition: %s is not its zero value
	binAppend  string // a statement appending %s to e, an *enc
	binDecode  string // an expression of the value read from d, a *dec
}

// leafHooks are the named types that have their own codecs, by name.
var leafHooks = map[string]leaf{
	"Duration": {
		jsonDecode: "d.duration()",
		jsonAppend: "appendDuration(dst, %s)",
		nonZero:    "%s != 0",
		binAppend:  "e.varint(int64(%s))",
		binDecode:  "%sDuration(d.varint())",
	},
}

// Field tag options (`codec:"opt=value,..."`) and what they change:
//
//	intern=A|B   the decoder returns the constant among A, B... equal to the
//	             string read, so a value most items share keeps no
//	             reference to the request body
//	quantity=F   an integer read as JSON may also be a string parsed by F
//	             (ParseCPU, ParseBytes)
//	slab=NAME    the elements of a slice of structs are carved from the
//	             decoder's slab NAME (groups, containers) rather than
//	             appended one allocation at a time
//	since=N      the binary codec's encodings of layouts before N do not
//	             hold the field: their decoder leaves it zero (N ≥ 1)
//
// Each is for fields of one kind, which knownOpts gives with its name
// (anyKind: every kind).
var knownOpts = map[string]struct {
	kind kind
	what string
}{
	"intern":   {kString, "string"},
	"quantity": {kInt64, "int64"},
	"slab":     {kStructSlice, "slice of structs"},
	"since":    {anyKind, "any"},
}

// anyKind marks an option of knownOpts that fits fields of every kind.
const anyKind kind = -1

// fields returns the fields of struct type name.
func (s *schema) fields(name string) ([]field, error) {
	st, ok := s.types[name].(*ast.StructType)
	if !ok {
		return nil, fmt.Errorf("codecgen: %s is not a struct type of package %s", name, s.pkg)
	}
	var out []field
	for _, f := range st.Fields.List {
		if len(f.Names) != 1 {
			return nil, fmt.Errorf("codecgen: %s: embedded or grouped fields are not supported", name)
		}
		fl := field{goName: f.Names[0].Name, opts: map[string]string{}}
		if !ast.IsExported(fl.goName) {
			continue
		}
		var tag reflect.StructTag
		if f.Tag != nil {
			t, err := strconv.Unquote(f.Tag.Value)
			if err != nil {
				return nil, fmt.Errorf("codecgen: %s.%s: tag: %w", name, fl.goName, err)
			}
			tag = reflect.StructTag(t)
		}
		js, ok := tag.Lookup("json")
		if !ok {
			return nil, fmt.Errorf("codecgen: %s.%s has no json tag", name, fl.goName)
		}
		parts := strings.Split(js, ",")
		if parts[0] == "-" || parts[0] == "" {
			return nil, fmt.Errorf("codecgen: %s.%s: json tag %q names no member", name, fl.goName, js)
		}
		fl.json = parts[0]
		for _, p := range parts[1:] {
			switch p {
			case "omitempty":
				fl.omitEmpty = true
			case "omitzero":
				fl.omitZero = true
			default:
				return nil, fmt.Errorf("codecgen: %s.%s: json option %q is not supported", name, fl.goName, p)
			}
		}
		if c := tag.Get("codec"); c != "" {
			for _, o := range strings.Split(c, ",") {
				k, v, _ := strings.Cut(o, "=")
				if _, ok := knownOpts[k]; !ok || v == "" {
					return nil, fmt.Errorf("codecgen: %s.%s: codec option %q is not known", name, fl.goName, o)
				}
				fl.opts[k] = v
			}
		}
		if err := s.classify(&fl, f.Type); err != nil {
			return nil, fmt.Errorf("codecgen: %s.%s: %w", name, fl.goName, err)
		}
		if v, ok := fl.opts["since"]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("codecgen: %s.%s: since=%s: want a layout number, at least 1", name, fl.goName, v)
			}
			fl.since = n
		}
		for k := range fl.opts {
			if o := knownOpts[k]; o.kind != anyKind && fl.kind != o.kind {
				return nil, fmt.Errorf("codecgen: %s.%s: %s is for %s fields", name, fl.goName, k, o.what)
			}
		}
		out = append(out, fl)
	}
	if len(out) > 64 {
		return nil, fmt.Errorf("codecgen: %s has %d fields, more than a decoder's 64 seen bits", name, len(out))
	}
	return out, nil
}

// classify sets f's kind and type name from its type expression.
func (s *schema) classify(f *field, t ast.Expr) error {
	switch t := t.(type) {
	case *ast.Ident:
		switch t.Name {
		case "string":
			f.kind = kString
			return nil
		case "bool":
			f.kind = kBool
			return nil
		case "int32":
			f.kind = kInt32
			return nil
		case "int64":
			f.kind = kInt64
			return nil
		}
		f.typeName = t.Name
		if _, ok := leafHooks[t.Name]; ok {
			f.kind = kLeaf
			return nil
		}
		switch u := s.types[t.Name].(type) {
		case *ast.StructType:
			f.kind = kStruct
			return nil
		case *ast.Ident:
			if u.Name == "string" {
				f.kind = kString
				return nil
			}
		}
	case *ast.StarExpr:
		if id, ok := t.X.(*ast.Ident); ok {
			if _, ok := s.types[id.Name].(*ast.StructType); ok {
				f.kind, f.typeName = kPtrStruct, id.Name
				return nil
			}
		}
	case *ast.ArrayType:
		if id, ok := t.Elt.(*ast.Ident); ok && t.Len == nil {
			if id.Name == "string" {
				f.kind = kStrings
				return nil
			}
			if _, ok := s.types[id.Name].(*ast.StructType); ok {
				f.kind, f.typeName = kStructSlice, id.Name
				return nil
			}
		}
	case *ast.MapType:
		k, kok := t.Key.(*ast.Ident)
		v, vok := t.Value.(*ast.Ident)
		if kok && vok && k.Name == "string" && v.Name == "string" {
			f.kind = kStrMap
			return nil
		}
	}
	return fmt.Errorf("type %s is not supported (add a leaf hook for it)", exprString(t))
}

// comparable reports whether struct name's values compare with ==.
func (s *schema) comparable(name string) bool {
	fs, err := s.fields(name)
	if err != nil {
		return false
	}
	for _, f := range fs {
		switch f.kind {
		case kStrings, kStructSlice, kStrMap:
			return false
		case kStruct:
			if !s.comparable(f.typeName) {
				return false
			}
		}
	}
	return true
}

// closure returns roots and every struct type their fields reach, sorted,
// roots first in the order given: the types a decoder has a function for.
func (s *schema) closure(roots []string) ([]string, error) {
	return s.reach(roots, func(kind) bool { return true })
}

// encoded returns the struct types an encoder of roots has a function
// for: the roots, then the element types of the slices of structs they
// reach, sorted. Struct and pointer fields are written inline.
func (s *schema) encoded(roots []string) ([]string, error) {
	return s.reach(roots, func(k kind) bool { return k == kStructSlice })
}

// reach walks the struct types the fields of roots reach and returns the
// roots, then, sorted, the types reached through a field of a kind own
// accepts.
func (s *schema) reach(roots []string, own func(kind) bool) ([]string, error) {
	walked := map[string]bool{}
	owned := map[string]bool{}
	var walk func(string) error
	walk = func(name string) error {
		if walked[name] {
			return nil
		}
		walked[name] = true
		fs, err := s.fields(name)
		if err != nil {
			return err
		}
		for _, f := range fs {
			switch f.kind {
			case kStruct, kPtrStruct, kStructSlice:
				if own(f.kind) && !slices.Contains(roots, f.typeName) {
					owned[f.typeName] = true
				}
				if err := walk(f.typeName); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, r := range roots {
		if err := walk(r); err != nil {
			return nil, err
		}
	}
	return append(slices.Clone(roots), slices.Sorted(maps.Keys(owned))...), nil
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.ArrayType:
		return "[]" + exprString(e.Elt)
	case *ast.MapType:
		return "map[" + exprString(e.Key) + "]" + exprString(e.Value)
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return fmt.Sprintf("%T", e)
}
