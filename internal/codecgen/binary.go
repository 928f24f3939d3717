package codecgen

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// binGen writes the binary codec of a struct type of another package
// (prefix qualifies its names), for a package that provides: enc (byte,
// varint, uvarint, str, bool), dec (byte, varint, str, count),
// appendStrs, appendStrMap, decodeBool, decodeInt32, and a specDecoder
// with decodeStrs, strMap, a mapCache per map field named after its
// member, and the slabs the fields' slab options name. Fields are written
// in the order the type declares them, with no tags:
//
//	string        uvarint length, bytes (typed strings too)
//	int32, int64  zig-zag varint
//	bool          byte 0 or 1
//	*T            bool (set), then T when set
//	[]T           uvarint count, then each T
//	map           uvarint count, then key, value pairs in increasing key order
//	struct        its fields, inline
//	leaf          as its hook says (Duration: int64 nanoseconds)
//
// A hooked type (-hook T=N) has a layout of its own, written by hand in
// the package as appendT(e, *T) and sd.decodeT(d, *T), at least N bytes.
type binGen struct {
	s      *schema
	e      *emitter
	prefix string
	hooks  map[string]int  // hooked type → the fewest bytes of its encoding
	skip   map[string]bool // "T.Field": written by a hook of an enclosing type
	funcs  map[string]bool // the types with functions of their own
	reads  map[string]bool // field paths skimmers hand to the package
	used   map[string]bool // the reads written
}

func (g *binGen) fields(name string) ([]field, error) {
	fs, err := g.s.fields(name)
	if err != nil {
		return nil, err
	}
	out := fs[:0:0]
	for _, f := range fs {
		if !g.skip[name+"."+f.goName] {
			out = append(out, f)
		}
	}
	return out, nil
}

// minBytes is the fewest bytes an encoding of type name takes: one a
// field, a struct's its fields', a hooked type's what its hook says.
func (g *binGen) minBytes(name string) (int, error) {
	if n, ok := g.hooks[name]; ok {
		return n, nil
	}
	fs, err := g.fields(name)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, f := range fs {
		n := 1
		if f.kind == kStruct {
			if n, err = g.minBytes(f.typeName); err != nil {
				return 0, err
			}
		}
		total += n
	}
	return total, nil
}

func (g *binGen) typ(name string) string { return g.prefix + name }

// root writes the constant min<T>Bytes, appendT and sd.decodeT of name.
func (g *binGen) root(name string) error {
	n, err := g.minBytes(name)
	if err != nil {
		return err
	}
	e := g.e
	e.line("// min%sBytes is the fewest bytes the encoding of a %s takes.", name, name)
	e.line("const min%sBytes = %d\n", name, n)
	e.fresh = 0
	e.line("// append%s appends the encoding of v.", name)
	e.line("func append%s(e *enc, v *%s) {", name, g.typ(name))
	if err := g.encFields(name, "v"); err != nil {
		return err
	}
	e.line("}\n")
	e.fresh = 0
	e.line("// decode%s decodes what append%s wrote into *v, which is zero.", name, name)
	e.line("// Errors stick in d.")
	e.line("func (sd *specDecoder) decode%s(d *dec, v *%s) {", name, g.typ(name))
	if err := g.decFields(name, "v"); err != nil {
		return err
	}
	e.line("}\n")
	return nil
}

// forFields calls do with each field of struct type name that the codec
// writes and the field's expression in x, in order; an error names the
// field.
func (g *binGen) forFields(name, x string, do func(f field, x string) error) error {
	fs, err := g.fields(name)
	if err != nil {
		return err
	}
	for _, f := range fs {
		if err := do(f, x+"."+f.goName); err != nil {
			return fmt.Errorf("codecgen: %s.%s: %w", name, f.goName, err)
		}
	}
	return nil
}

func (g *binGen) encFields(name, x string) error { return g.forFields(name, x, g.encValue) }

// called reports whether values of struct type name are written by a
// function (a hook's or a root's) rather than inline.
func (g *binGen) called(name string) bool {
	_, hooked := g.hooks[name]
	return hooked || g.funcs[name]
}

func (g *binGen) encValue(f field, x string) error {
	e := g.e
	switch f.kind {
	case kString:
		if f.typeName != "" {
			x = "string(" + x + ")"
		}
		e.line("e.str(%s)", x)
	case kBool:
		e.line("e.bool(%s)", x)
	case kInt32:
		e.line("e.varint(int64(%s))", x)
	case kInt64:
		e.line("e.varint(%s)", x)
	case kLeaf:
		e.line(leafHooks[f.typeName].binAppend, x)
	case kStrings:
		e.line("appendStrs(e, %s)", x)
	case kStrMap:
		e.line("appendStrMap(e, %s)", x)
	case kStruct:
		if g.called(f.typeName) {
			e.line("append%s(e, &%s)", f.typeName, x)
			return nil
		}
		return g.encFields(f.typeName, x)
	case kPtrStruct:
		if _, hooked := g.hooks[f.typeName]; hooked {
			return fmt.Errorf("a pointer to hooked type %s is not supported", f.typeName)
		}
		e.line("e.bool(%s != nil)", x)
		e.line("if %s != nil {", x)
		if g.funcs[f.typeName] {
			e.line("append%s(e, %s)", f.typeName, x)
		} else if err := g.encFields(f.typeName, x); err != nil {
			return err
		}
		e.line("}")
	case kStructSlice:
		e.line("e.uvarint(uint64(len(%s)))", x)
		i, y := e.name("i"), e.name("y")
		e.line("for %s := range %s {", i, x)
		e.line("%s := &%s[%s]", y, x, i)
		if g.called(f.typeName) {
			e.line("append%s(e, %s)", f.typeName, y)
		} else if err := g.encFields(f.typeName, y); err != nil {
			return err
		}
		e.line("}")
	}
	return nil
}

func (g *binGen) decFields(name, x string) error { return g.forFields(name, x, g.decValue) }

func (g *binGen) decValue(f field, x string) error {
	e := g.e
	switch f.kind {
	case kString:
		if f.typeName != "" {
			e.line("%s = %s(d.str())", x, g.typ(f.typeName))
		} else {
			e.line("%s = d.str()", x)
		}
	case kBool:
		e.line("%s = decodeBool(d)", x)
	case kInt32:
		e.line("%s = decodeInt32(d)", x)
	case kInt64:
		e.line("%s = d.varint()", x)
	case kLeaf:
		e.line("%s = "+leafHooks[f.typeName].binDecode, x, g.prefix)
	case kStrings:
		e.line("%s = sd.decodeStrs(d)", x)
	case kStrMap:
		e.line("%s = sd.strMap(d, &sd.%s)", x, f.json)
	case kStruct:
		if g.called(f.typeName) {
			e.line("sd.decode%s(d, &%s)", f.typeName, x)
			return nil
		}
		return g.decFields(f.typeName, x)
	case kPtrStruct:
		p := e.name("p")
		e.line("if decodeBool(d) {")
		e.line("%s := &%s{}", p, g.typ(f.typeName))
		if g.funcs[f.typeName] {
			e.line("sd.decode%s(d, %s)", f.typeName, p)
		} else if err := g.decFields(f.typeName, p); err != nil {
			return err
		}
		e.line("%s = %s\n}", x, p)
	case kStructSlice:
		min := "min" + f.typeName + "Bytes"
		if !g.funcs[f.typeName] {
			n, err := g.minBytes(f.typeName)
			if err != nil {
				return err
			}
			min = strconv.Itoa(n)
		}
		n, i, y := e.name("n"), e.name("i"), e.name("y")
		e.line("if %s := d.count(%s); %s > 0 {", n, min, n)
		if slab := f.opts["slab"]; slab != "" {
			e.line("%s = sd.%s.take(%s)", x, slab, n)
		} else {
			e.line("%s = make([]%s, %s)", x, g.typ(f.typeName), n)
		}
		e.line("for %s := range %s {", i, x)
		e.line("%s := &%s[%s]", y, x, i)
		if g.called(f.typeName) {
			e.line("sd.decode%s(d, %s)", f.typeName, y)
		} else if err := g.decFields(f.typeName, y); err != nil {
			return err
		}
		e.line("}\n}")
	}
	return nil
}

// skipper writes skipT(s string, i int) int for name: it reads an
// encoding of name at s[i:] with the skim's primitives (readVarint,
// readInt32, readBool, readCount, skipStr, skipStrs, skipStrMap), accepting
// exactly what sd.decodeT accepts, and returns the index after it, or -1.
func (g *binGen) skipper(name string) error {
	e := g.e
	e.fresh = 0
	e.line("// skip%s reads past an encoding of a %s at s[i:], accepting", name, name)
	e.line("// what the decoder accepts, and returns the index after it (-1:")
	e.line("// malformed).")
	e.line("func skip%s(s string, i int) int {", name)
	if err := g.skipFields(name); err != nil {
		return err
	}
	e.line("return i\n}\n")
	return nil
}

func (g *binGen) skipFields(name string) error {
	return g.forFields(name, "", func(f field, _ string) error { return g.skipValue(f) })
}

func (g *binGen) skipValue(f field) error {
	e := g.e
	switch f.kind {
	case kString:
		e.line("i = skipStr(s, i)")
	case kBool:
		e.line("_, i = readBool(s, i)")
	case kInt32:
		e.line("_, i = readInt32(s, i)")
	case kInt64, kLeaf:
		e.line("_, i = readVarint(s, i)")
	case kStrings:
		e.line("i = skipStrs(s, i)")
	case kStrMap:
		e.line("i = skipStrMap(s, i)")
	case kStruct:
		if _, hooked := g.hooks[f.typeName]; hooked {
			return fmt.Errorf("skipping hooked type %s is not supported", f.typeName)
		}
		return g.skipFields(f.typeName)
	case kPtrStruct:
		set := e.name("set")
		e.line("var %s bool", set)
		e.line("if %s, i = readBool(s, i); %s {", set, set)
		if err := g.skipFields(f.typeName); err != nil {
			return err
		}
		e.line("}")
	case kStructSlice:
		min, err := g.minBytes(f.typeName)
		if err != nil {
			return err
		}
		n := e.name("n")
		e.line("var %s int", n)
		e.line("%s, i = readCount(s, i, %d)", n, min)
		e.line("for range %s {", n)
		if err := g.skipFields(f.typeName); err != nil {
			return err
		}
		e.line("}")
	}
	return nil
}

// skimmer writes skimT(s string, i int, k *skimmer) int for name: it
// reads an encoding of name at s[i:] as skipT does, except that each field
// whose path (T.Field, T.Inline.Field) is among reads is read by the
// package's method k.skimTField(s, i) int, which takes what it needs of
// it. Fields added to the type are skipped without the package's help.
func (g *binGen) skimmer(name string) error {
	e := g.e
	e.fresh = 0
	e.line("// skim%s reads past an encoding of a %s at s[i:], handing the", name, name)
	e.line("// fields the skim takes to k's methods and skipping the rest, and")
	e.line("// returns the index after it (-1: malformed).")
	e.line("func skim%s(s string, i int, k *skimmer) int {", name)
	if err := g.skimFields(name, name); err != nil {
		return err
	}
	e.line("return i\n}\n")
	return nil
}

func (g *binGen) skimFields(typeName, path string) error {
	fs, err := g.fields(typeName)
	if err != nil {
		return err
	}
	for _, f := range fs {
		p := path + "." + f.goName
		switch {
		case g.reads[p]:
			g.used[p] = true
			g.e.line("i = k.skim%s(s, i)", strings.ReplaceAll(p, ".", ""))
		case f.kind == kStruct && g.readsBelow(p):
			if err := g.skimFields(f.typeName, p); err != nil {
				return err
			}
		default:
			if g.readsBelow(p) {
				return fmt.Errorf("codecgen: -read below %s: only fields of inline structs are read", p)
			}
			if err := g.skipValue(f); err != nil {
				return fmt.Errorf("codecgen: %s: %w", p, err)
			}
		}
	}
	return nil
}

// readsBelow reports whether a read names a field below path.
func (g *binGen) readsBelow(path string) bool {
	for r := range g.reads {
		if strings.HasPrefix(r, path+".") {
			return true
		}
	}
	return false
}

func generateBinary(dir, schemaDir, importPath string, roots, skims, skimmers, reads []string, hooks map[string]int, skip map[string]bool) ([]byte, error) {
	pkg, err := loadSchema(dir)
	if err != nil {
		return nil, err
	}
	s, err := loadSchema(schemaDir)
	if err != nil {
		return nil, err
	}
	g := &binGen{s: s, e: newEmitter(), prefix: path.Base(importPath) + ".", hooks: hooks, skip: skip, funcs: map[string]bool{}}
	for _, r := range roots {
		if _, hooked := hooks[r]; hooked {
			return nil, fmt.Errorf("codecgen: %s is both a root and hooked", r)
		}
		g.funcs[r] = true
	}
	for k := range skip {
		t, f, ok := strings.Cut(k, ".")
		fs, err := s.fields(t)
		if !ok || err != nil || !slices.ContainsFunc(fs, func(x field) bool { return x.goName == f }) {
			return nil, fmt.Errorf("codecgen: -skip %q: want Type.Field, a field of a struct type", k)
		}
	}
	for _, r := range roots {
		if err := g.root(r); err != nil {
			return nil, err
		}
	}
	for _, t := range skims {
		if err := g.skipper(t); err != nil {
			return nil, err
		}
	}
	g.reads, g.used = map[string]bool{}, map[string]bool{}
	for _, r := range reads {
		g.reads[r] = true
	}
	for _, t := range skimmers {
		if err := g.skimmer(t); err != nil {
			return nil, err
		}
	}
	for r := range g.reads {
		if !g.used[r] {
			return nil, fmt.Errorf("codecgen: -read %s names no field a skimmer reaches", r)
		}
	}
	g.e.imports[importPath] = true
	return g.e.file(pkg.pkg, Command)
}
