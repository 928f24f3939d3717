package loadgen

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// maxDecodeProblems bounds the problems decodeStrict lists.
const maxDecodeProblems = 20

// decodeStrict decodes the JSON document b into v (a pointer) and returns
// every problem found, each naming its path: unknown and duplicate
// fields of structs (matched by their json tags, exactly), values
// encoding/json or a field's UnmarshalJSON refuses, trailing data. Types
// with their own UnmarshalJSON or UnmarshalText are leaves.
func decodeStrict(b []byte, v any) []error {
	d := json.NewDecoder(bytes.NewReader(b))
	var raw json.RawMessage
	if err := d.Decode(&raw); err != nil {
		return []error{fmt.Errorf("not a JSON document: %w", err)}
	}
	if _, err := d.Token(); err != io.EOF {
		return []error{errors.New("trailing data after the JSON document")}
	}
	var errs []error
	walk(raw, reflect.ValueOf(v).Elem(), "", &errs)
	if len(errs) > maxDecodeProblems {
		n := len(errs) - maxDecodeProblems
		errs = append(errs[:maxDecodeProblems], fmt.Errorf("and %d more problems", n))
	}
	return errs
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func where(path string) string {
	if path == "" {
		return "(document)"
	}
	return path
}

// walk decodes raw into the addressable value v at path.
func walk(raw json.RawMessage, v reflect.Value, path string, errs *[]error) {
	fail := func(err error) {
		*errs = append(*errs, fmt.Errorf("%s: %w", where(path), err))
	}
	pt := v.Addr().Type()
	if pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler) {
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			fail(cleanJSONError(err))
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		walkStruct(raw, v, path, errs)
	case reflect.Slice:
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			fail(fmt.Errorf("want an array, got %s", kindOf(raw)))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, it := range items {
			walk(it, s.Index(i), fmt.Sprintf("%s[%d]", path, i), errs)
		}
		v.Set(s)
	default:
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			fail(cleanJSONError(err))
		}
	}
}

func walkStruct(raw json.RawMessage, v reflect.Value, path string, errs *[]error) {
	fail := func(p string, err error) {
		*errs = append(*errs, fmt.Errorf("%s: %w", where(p), err))
	}
	t := v.Type()
	fields := map[string]int{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = i
		names = append(names, name)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		fail(path, fmt.Errorf("want an object, got %s", kindOf(raw)))
		return
	}
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			fail(path, err)
			return
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := d.Decode(&val); err != nil {
			fail(join(path, key), err)
			return
		}
		p := join(path, key)
		i, ok := fields[key]
		switch {
		case !ok:
			slices.Sort(names)
			fail(p, fmt.Errorf("unknown field (known: %s)", strings.Join(names, ", ")))
		case seen[key]:
			fail(p, errors.New("duplicate field"))
		default:
			seen[key] = true
			walk(val, v.Field(i), p, errs)
		}
	}
}

// kindOf names the JSON type of raw, for messages.
func kindOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// cleanJSONError drops encoding/json's Go type names from a type error.
func cleanJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("want %s, got a JSON %s", jsonKind(te.Type), te.Value)
	}
	return err
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
