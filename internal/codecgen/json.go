package codecgen

import (
	"fmt"
	"strings"
)

// jsonGen writes a package's JSON decoders and encoders. What they call
// and the package must provide: the decoder type (*decoder) with
// openObject, nextMember, key, field, unknown, openArray, nextElem, peek,
// want, str, strs, strMap, boolean, int32, int64 and quantity; intern and
// grow; and appendJSONString, appendStrings, appendStringMap, appendArray,
// plus the leaf hooks' functions.
type jsonGen struct {
	s *schema
	e *emitter
	// appends are the struct types with an encoder function: a field of
	// one calls it, a field of another struct type is written inline.
	appends map[string]bool
}

// decoder writes decodeT(d *decoder, v *T) for struct type name: it reads
// one object strictly (a member not of T, or one given twice, is a
// problem at its path) into *v.
func (g *jsonGen) decoder(name string) error {
	fs, err := g.s.fields(name)
	if err != nil {
		return err
	}
	e := g.e
	e.line("// decode%s reads a %s object into *v.", name, name)
	e.line("func decode%s(d *decoder, v *%s) {", name, name)
	e.line("if !d.openObject() {\nreturn\n}")
	e.line("var seen uint64")
	e.line("for d.nextMember() {")
	e.line("switch string(d.key()) {")
	for i, f := range fs {
		e.line("case %q:", f.json)
		x := "v." + f.goName
		switch f.kind {
		case kStruct:
			e.line("if d.field(&seen, %d) {\ndecode%s(d, &%s)\n}", i, f.typeName, x)
		case kPtrStruct:
			e.line("if !d.field(&seen, %d) {\ncontinue\n}", i)
			e.line("if d.peek() == '{' {\n%s = new(%s)\ndecode%s(d, %s)\n} else {\nd.want('{', \"an object\")\n}", x, f.typeName, f.typeName, x)
		case kStructSlice:
			e.line("if d.field(&seen, %d) && d.openArray() {", i)
			e.line("for d.nextElem() {")
			if slab := f.opts["slab"]; slab != "" {
				e.line("%s = grow(%s, &d.%s)", x, x, slab)
			} else {
				e.line("%s = append(%s, %s{})", x, x, f.typeName)
			}
			e.line("decode%s(d, &%s[len(%s)-1])\n}\n}", f.typeName, x, x)
		default:
			v, err := g.scalarDecode(f)
			if err != nil {
				return fmt.Errorf("codecgen: %s.%s: %w", name, f.goName, err)
			}
			e.line("if d.field(&seen, %d) {\n%s = %s\n}", i, x, v)
		}
	}
	e.line("default:\nd.unknown()\n}\n}\n}\n")
	return nil
}

// scalarDecode returns the expression that reads a value of f's kind,
// other than a struct's.
func (g *jsonGen) scalarDecode(f field) (string, error) {
	var v string
	switch f.kind {
	case kString:
		v = "d.str()"
		if in := f.opts["intern"]; in != "" {
			args := strings.Split(in, "|")
			if f.typeName != "" {
				for i, a := range args {
					args[i] = "string(" + a + ")"
				}
			}
			v = "intern(d.str(), " + strings.Join(args, ", ") + ")"
		}
		if f.typeName != "" {
			v = f.typeName + "(" + v + ")"
		}
	case kBool:
		v = "d.boolean()"
	case kInt32:
		v = "d.int32()"
	case kInt64:
		v = "d.int64()"
		if q := f.opts["quantity"]; q != "" {
			v = "d.quantity(" + q + ")"
		}
	case kLeaf:
		v = leafHooks[f.typeName].jsonDecode
	case kStrings:
		v = "d.strs()"
	case kStrMap:
		v = "d.strMap()"
	default:
		return "", fmt.Errorf("kind %d has no scalar decoder", f.kind)
	}
	return v, nil
}

// encoder writes appendT(dst []byte, v *T) []byte for struct type name:
// it appends v's JSON byte for byte as encoding/json writes it (fields in
// order, omitempty and omitzero as encoding/json reads them, strings
// escaped as it escapes them).
func (g *jsonGen) encoder(name string) error {
	e := g.e
	e.fresh = 0
	e.line("// append%s appends the JSON of v to dst.", name)
	e.line("func append%s(dst []byte, v *%s) []byte {", name, name)
	if err := g.object(name, "v"); err != nil {
		return err
	}
	e.line("return dst\n}\n")
	return nil
}

// sepState is what an encoder knows, where it writes a member, of the
// members before it.
type sepState int

const (
	sepFirst sepState = iota // none was written
	sepMaybe                 // some may have been
	sepAfter                 // one was
)

// object writes the code that appends the object of struct type name
// whose value is the expression x.
func (g *jsonGen) object(name, x string) error {
	fs, err := g.s.fields(name)
	if err != nil {
		return err
	}
	e := g.e
	conds := make([]string, len(fs))
	needMark := false
	state := sepFirst
	for i, f := range fs {
		if conds[i], err = g.writeIf(f, x+"."+f.goName); err != nil {
			return fmt.Errorf("codecgen: %s.%s: %w", name, f.goName, err)
		}
		needMark = needMark || state == sepMaybe
		state = nextSep(state, conds[i] == "")
	}
	e.literal("{")
	mark := ""
	if needMark {
		mark = e.name("n")
		e.line("%s := len(dst)", mark)
	}
	state = sepFirst
	for i, f := range fs {
		fx := x + "." + f.goName
		if conds[i] != "" {
			e.line("if %s {", conds[i])
		}
		key := fmt.Sprintf("%q:", f.json)
		switch state {
		case sepFirst:
			e.literal(key)
		case sepAfter:
			e.literal("," + key)
		case sepMaybe:
			e.line("if len(dst) != %s {\ndst = append(dst, ',')\n}", mark)
			e.literal(key)
		}
		if err := g.value(f, fx, conds[i] != ""); err != nil {
			return fmt.Errorf("codecgen: %s.%s: %w", name, f.goName, err)
		}
		if conds[i] != "" {
			e.line("}")
		}
		state = nextSep(state, conds[i] == "")
	}
	e.literal("}")
	return nil
}

func nextSep(s sepState, always bool) sepState {
	switch {
	case always:
		return sepAfter
	case s == sepFirst:
		return sepMaybe
	}
	return s
}

// writeIf returns the condition under which encoding/json writes field f
// of value x, or "" when it always does. omitempty and omitzero agree but
// on collections (omitempty leaves out empty ones, omitzero nil ones) and
// structs (omitempty never leaves one out).
func (g *jsonGen) writeIf(f field, x string) (string, error) {
	if !f.omitEmpty && !f.omitZero {
		return "", nil
	}
	switch f.kind {
	case kString:
		return x + ` != ""`, nil
	case kBool:
		return x, nil
	case kInt32, kInt64:
		return x + " != 0", nil
	case kLeaf:
		return fmt.Sprintf(leafHooks[f.typeName].nonZero, x), nil
	case kPtrStruct:
		return x + " != nil", nil
	case kStrings, kStructSlice, kStrMap:
		if f.omitEmpty {
			return "len(" + x + ") > 0", nil
		}
		return x + " != nil", nil
	case kStruct:
		if !f.omitZero {
			return "", nil
		}
		if !g.s.comparable(f.typeName) {
			return "", fmt.Errorf("omitzero on %s, which does not compare with ==", f.typeName)
		}
		return x + " != (" + f.typeName + "{})", nil
	}
	return "", fmt.Errorf("kind %d has no zero test", f.kind)
}

// value writes the code that appends the value of field f, the
// expression x; nonZero says the caller checked that it is not the
// zero value (a bool true, a pointer not nil).
func (g *jsonGen) value(f field, x string, nonZero bool) error {
	e := g.e
	switch f.kind {
	case kString:
		if f.typeName != "" {
			x = "string(" + x + ")"
		}
		e.line("dst = appendJSONString(dst, %s)", x)
	case kBool:
		if nonZero {
			e.literal("true")
		} else {
			e.imports["strconv"] = true
			e.line("dst = strconv.AppendBool(dst, %s)", x)
		}
	case kInt32:
		e.imports["strconv"] = true
		e.line("dst = strconv.AppendInt(dst, int64(%s), 10)", x)
	case kInt64:
		e.imports["strconv"] = true
		e.line("dst = strconv.AppendInt(dst, %s, 10)", x)
	case kLeaf:
		e.line("dst = "+leafHooks[f.typeName].jsonAppend, x)
	case kStrings:
		e.line("dst = appendStrings(dst, %s)", x)
	case kStrMap:
		if nonZero {
			e.line("dst = appendStringMap(dst, %s)", x)
		} else {
			e.line("if %s == nil {\ndst = append(dst, \"null\"...)\n} else {\ndst = appendStringMap(dst, %s)\n}", x, x)
		}
	case kStruct:
		if g.appends[f.typeName] {
			e.line("dst = append%s(dst, &%s)", f.typeName, x)
			return nil
		}
		return g.object(f.typeName, x)
	case kPtrStruct:
		if !nonZero {
			e.line("if %s == nil {", x)
			e.literal("null")
			e.line("} else {")
		}
		if g.appends[f.typeName] {
			e.line("dst = append%s(dst, %s)", f.typeName, x)
		} else if err := g.object(f.typeName, x); err != nil {
			return err
		}
		if !nonZero {
			e.line("}")
		}
	case kStructSlice:
		e.line("dst = appendArray(dst, %s, append%s)", x, f.typeName)
	}
	return nil
}
