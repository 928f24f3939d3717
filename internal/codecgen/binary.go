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
// appendStrs, appendStrMap, decodeBool, decodeInt32, intern, and a
// specDecoder with a layout, decodeStrs, strMap, a mapCache per map field
// named after its member, and the slabs the fields' slab options name.
// Fields are written in the order the type declares them, with no tags:
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
// Layouts. The encoders write the current layout, specLayout: the highest
// since= of the fields, at least 1. The decoders read the layout
// sd.layout names: a field of since=N only when it is N or more, so that
// what an earlier release wrote decodes as it did, with the field zero.
// Layout 0 is the package's hand-written codec of before (-legacy T=N): at
// layout 0 the generated decodeT hands a legacy type T to the package's
// sd.decodeTLegacy(d, *T), whose encodings take at least N bytes, and the
// fields -legacy-fields names are not part of their own types' encodings
// (the legacy decoder of a type enclosing them reads them). Skippers and
// skimmers read the current layout only.
type binGen struct {
	s      *schema
	e      *emitter
	prefix string
	legacy map[string]int  // legacy type → the fewest bytes of its layout-0 encoding
	lfield map[string]bool // "T.Field": not in T's own encoding at layout 0
	funcs  map[string]bool // the types with functions of their own
	skims  map[string]bool // the types with skimmers
	reads  map[string]bool // field paths skimmers hand to the package
	used   map[string]bool // the reads written
}

func (g *binGen) fields(name string) ([]field, error) {
	fs, err := g.s.fields(name)
	if err != nil {
		return nil, err
	}
	for i := range fs {
		if g.lfield[name+"."+fs[i].goName] && fs[i].since == 0 {
			fs[i].since = 1
		}
	}
	return fs, nil
}

// minBytes is the fewest bytes an encoding of type name takes in any
// layout: one a field (none for a field some layout leaves out), a
// struct's its fields', a legacy type's the fewer of its own and its
// layout-0 encoding's.
func (g *binGen) minBytes(name string) (int, error) {
	fs, err := g.fields(name)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, f := range fs {
		if f.since > 0 {
			continue
		}
		n := 1
		if f.kind == kStruct {
			if n, err = g.minBytes(f.typeName); err != nil {
				return 0, err
			}
		}
		total += n
	}
	if n, ok := g.legacy[name]; ok {
		total = min(total, n)
	}
	return total, nil
}

// layout returns the highest since= of the fields the roots reach, at
// least 1.
func (g *binGen) layout(roots []string) (int, error) {
	types, err := g.s.closure(roots)
	if err != nil {
		return 0, err
	}
	l := 1
	for _, t := range types {
		fs, err := g.fields(t)
		if err != nil {
			return 0, err
		}
		for _, f := range fs {
			l = max(l, f.since)
		}
	}
	return l, nil
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
	e.line("// decode%s decodes what append%s wrote, in layout sd.layout, into", name, name)
	e.line("// *v, which is zero. Errors stick in d.")
	e.line("func (sd *specDecoder) decode%s(d *dec, v *%s) {", name, g.typ(name))
	if _, ok := g.legacy[name]; ok {
		e.line("if sd.layout == 0 {\nsd.decode%sLegacy(d, v)\nreturn\n}", name)
	}
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
// function of their own rather than inline.
func (g *binGen) called(name string) bool { return g.funcs[name] }

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

// decFields writes the decoding of struct type name's fields into x, each
// run of fields of one since=N read only in the layouts that hold them.
func (g *binGen) decFields(name, x string) error {
	open := 0 // the since of the block the fields are written in
	err := g.forFields(name, x, func(f field, x string) error {
		if f.since != open {
			if open > 0 {
				g.e.line("}")
			}
			if f.since > 0 {
				g.e.line("if sd.layout >= %d {", f.since)
			}
			open = f.since
		}
		return g.decValue(f, x)
	})
	if err == nil && open > 0 {
		g.e.line("}")
	}
	return err
}

func (g *binGen) decValue(f field, x string) error {
	e := g.e
	switch f.kind {
	case kString:
		v := "d.str()"
		if in := f.opts["intern"]; in != "" {
			args := strings.Split(in, "|")
			for i, a := range args {
				args[i] = g.prefix + a
				if f.typeName != "" {
					args[i] = "string(" + args[i] + ")"
				}
			}
			v = "intern(" + v + ", " + strings.Join(args, ", ") + ")"
		}
		if f.typeName != "" {
			v = g.typ(f.typeName) + "(" + v + ")"
		}
		e.line("%s = %s", x, v)
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

// skipFields writes the reading past an encoding of struct type name at
// s[i:] with the skim's primitives (readVarint, readInt32, readBool,
// readCount, skipStr, skipStrs, skipStrMap), accepting exactly what
// sd.decodeT accepts at the current layout.
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
		return g.skipFields(f.typeName)
	case kPtrStruct:
		return g.ifSet(func() error { return g.skipFields(f.typeName) })
	case kStructSlice:
		return g.each(f.typeName, func() error { return g.skipFields(f.typeName) })
	}
	return nil
}

// ifSet writes the reading of a pointer's set bool, and body when set.
func (g *binGen) ifSet(body func() error) error {
	set := g.e.name("set")
	g.e.line("var %s bool", set)
	g.e.line("if %s, i = readBool(s, i); %s {", set, set)
	if err := body(); err != nil {
		return err
	}
	g.e.line("}")
	return nil
}

// each writes the reading of a count of struct type name's encodings, and
// body for each.
func (g *binGen) each(name string, body func() error) error {
	min, err := g.minBytes(name)
	if err != nil {
		return err
	}
	n := g.e.name("n")
	g.e.line("var %s int", n)
	g.e.line("%s, i = readCount(s, i, %d)", n, min)
	g.e.line("for range %s {", n)
	if err := body(); err != nil {
		return err
	}
	g.e.line("}")
	return nil
}

// skimmer writes skimT(s string, i int, k *skimmer) int for name: it
// reads an encoding of name at s[i:] of the current layout, accepting
// exactly what sd.decodeT accepts, and returns the index after it, or -1.
// Each field whose path (T.Field, T.Inline.Field) is among reads is read
// by the package's method k.skimTField(s, i) int, which takes what it
// needs of it; a field of a type with a skimmer of its own (a struct, a
// pointer to one, a slice of them) by that skimmer; the rest is skipped.
// Fields added to the types are skipped without the package's help.
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
		call := "i = skim" + f.typeName + "(s, i, k)"
		switch {
		case g.reads[p]:
			g.used[p] = true
			g.e.line("i = k.skim%s(s, i)", strings.ReplaceAll(p, ".", ""))
		case g.skims[f.typeName] && f.kind == kStruct:
			g.e.line("%s", call)
		case g.skims[f.typeName] && f.kind == kPtrStruct:
			err = g.ifSet(func() error { g.e.line("%s", call); return nil })
		case g.skims[f.typeName] && f.kind == kStructSlice:
			err = g.each(f.typeName, func() error { g.e.line("%s", call); return nil })
		case f.kind == kStruct && g.readsBelow(p):
			err = g.skimFields(f.typeName, p)
		default:
			if g.readsBelow(p) {
				return fmt.Errorf("codecgen: -read below %s: only fields of inline structs are read (give the type a skimmer)", p)
			}
			if err = g.skipValue(f); err != nil {
				err = fmt.Errorf("codecgen: %s: %w", p, err)
			}
		}
		if err != nil {
			return err
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

// binArgs are the binary codec's arguments (Run describes them).
type binArgs struct {
	schemaDir, importPath string
	roots, skimmers       []string
	reads                 []string
	legacy                map[string]int
	legacyFields          []string
}

func generateBinary(dir string, a binArgs) ([]byte, error) {
	pkg, err := loadSchema(dir)
	if err != nil {
		return nil, err
	}
	s, err := loadSchema(a.schemaDir)
	if err != nil {
		return nil, err
	}
	g := &binGen{s: s, e: newEmitter(), prefix: path.Base(a.importPath) + ".", legacy: a.legacy,
		lfield: map[string]bool{}, funcs: map[string]bool{}, skims: map[string]bool{}}
	for _, r := range a.roots {
		g.funcs[r] = true
	}
	for t := range a.legacy {
		if !g.funcs[t] {
			return nil, fmt.Errorf("codecgen: -legacy %s: not a -type, so it has no decoder to hand it over", t)
		}
	}
	for _, k := range a.legacyFields {
		t, f, ok := strings.Cut(k, ".")
		fs, err := s.fields(t)
		if !ok || err != nil || !slices.ContainsFunc(fs, func(x field) bool { return x.goName == f }) {
			return nil, fmt.Errorf("codecgen: -legacy-fields %q: want Type.Field, a field of a struct type", k)
		}
		g.lfield[k] = true
	}
	layout, err := g.layout(a.roots)
	if err != nil {
		return nil, err
	}
	g.e.line("// specLayout is the layout of the encodings the append functions write;")
	g.e.line("// the decoders read it and every earlier one (sd.layout).")
	g.e.line("const specLayout = %d\n", layout)
	for _, r := range a.roots {
		if err := g.root(r); err != nil {
			return nil, err
		}
	}
	g.reads, g.used = map[string]bool{}, map[string]bool{}
	for _, r := range a.reads {
		g.reads[r] = true
	}
	for _, t := range a.skimmers {
		g.skims[t] = true
	}
	for _, t := range a.skimmers {
		if err := g.skimmer(t); err != nil {
			return nil, err
		}
	}
	for r := range g.reads {
		if !g.used[r] {
			return nil, fmt.Errorf("codecgen: -read %s names no field a skimmer reaches", r)
		}
	}
	g.e.imports[a.importPath] = true
	return g.e.file(pkg.pkg, Command)
}
