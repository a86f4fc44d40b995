package tdschema

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/zelenin/go-tdlib/tlparser"
)

// goTDLibModule is the module whose data/td_api.tl is the schema.
const goTDLibModule = "github.com/zelenin/go-tdlib"

// Schema is a parsed td_api.tl. It is read-only once built and safe for
// concurrent use.
type Schema struct {
	types     map[string]*constructor // object constructors by name
	functions map[string]*constructor // functions (requests) by name
	classes   map[string]bool         // abstract classes ("Update", "ChatType")
}

// constructor is one object type or function of the schema.
type constructor struct {
	name   string
	class  string // the class it belongs to; for a function, its result
	fields []field
	byName map[string]*field
}

// field is one parameter of a constructor.
type field struct {
	name     string
	typ      string // as td_api.tl writes it: int53, vector<message>, ChatType, ...
	nullable bool   // the schema says it may be null
}

// Load parses the td_api.tl of the go-tdlib module this build uses. It
// asks the go command where the module is, so it is for tests and tools
// run from the source tree.
func Load() (*Schema, error) {
	path, err := ModuleSchemaPath()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open TDLib schema: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// ModuleSchemaPath is the path of data/td_api.tl in the go-tdlib module
// the current module requires.
func ModuleSchemaPath() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", goTDLibModule).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return "", fmt.Errorf("locate module %s: %w", goTDLibModule, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("locate module %s: not downloaded", goTDLibModule)
	}
	return filepath.Join(dir, "data", "td_api.tl"), nil
}

// Parse reads a td_api.tl.
func Parse(r io.Reader) (s *Schema, err error) {
	// tlparser panics on a @param comment that names no field.
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("parse TDLib schema: %v", p)
		}
	}()
	tl, err := tlparser.Parse(r)
	if err != nil {
		return nil, fmt.Errorf("parse TDLib schema: %w", err)
	}
	s = &Schema{
		types:     make(map[string]*constructor),
		functions: make(map[string]*constructor),
		classes:   make(map[string]bool),
	}
	for _, c := range tl.Classes {
		s.classes[c.Name] = true
	}
	for _, t := range tl.Types {
		if isBuiltin(t.Name) {
			continue
		}
		s.types[t.Name] = newConstructor(t.Name, t.Class, t.Properties)
		// A type's result class may be declared by its constructors only
		// (Ok, Error): it is a class all the same.
		s.classes[t.Class] = true
	}
	for _, f := range tl.Functions {
		s.functions[f.Name] = newConstructor(f.Name, f.Class, f.Properties)
	}
	if len(s.types) == 0 || len(s.functions) == 0 {
		return nil, errors.New("parse TDLib schema: no types or no functions")
	}
	return s, nil
}

// isBuiltin names td_api.tl's first lines, which declare the JSON
// primitives rather than objects.
func isBuiltin(name string) bool {
	switch name {
	case "double", "string", "int32", "int53", "int64", "bytes", "boolFalse", "boolTrue", "vector<t>":
		return true
	}
	return false
}

func newConstructor(name, class string, props []*tlparser.Property) *constructor {
	c := &constructor{name: name, class: class, byName: make(map[string]*field, len(props))}
	for _, p := range props {
		c.fields = append(c.fields, field{name: p.Name, typ: p.Type, nullable: mayBeNull(p.Description)})
	}
	for i := range c.fields {
		c.byName[c.fields[i].name] = &c.fields[i]
	}
	return c
}

// mayBeNull reads a field's comment: td_api.tl says "may be null" of the
// fields TDLib may leave null in what it writes, and "pass null" (or "or
// null", "If null") of the parameters a request may leave null.
func mayBeNull(desc string) bool {
	d := strings.ToLower(desc)
	for _, s := range []string{"may be null", "pass null", "or null", "if null", "null if"} {
		if strings.Contains(d, s) {
			return true
		}
	}
	return false
}

// Class returns the class of a constructor ("Update" for
// "updateNewMessage") and whether the schema has it.
func (s *Schema) Class(constructor string) (string, bool) {
	c, ok := s.types[constructor]
	if !ok {
		return "", false
	}
	return c.class, true
}

// Result returns the class of what function answers ("Chat" for
// "getChat") and whether the schema has the function.
func (s *Schema) Result(function string) (string, bool) {
	f, ok := s.functions[function]
	if !ok {
		return "", false
	}
	return f.class, true
}

// topLevel are the members TDLib's JSON interface adds to an object at
// the top level: the request's tag echoed in its answer and the client.
var topLevel = map[string]bool{"@extra": true, "@client_id": true}

// CheckObject checks one object as TDLib writes it (an update or an
// answer): every field of its constructor present, except those that may
// be null, which TDLib leaves out when null (it never writes a null
// member).
func (s *Schema) CheckObject(line []byte) error {
	return s.checkTop(line, false)
}

// CheckRequest checks one request as a client sends it to TDLib: a
// function of the schema, every member one of its parameters with a value
// of the parameter's type. Missing parameters are allowed, TDLib takes
// them as their zero or null value.
func (s *Schema) CheckRequest(line []byte) error {
	return s.checkTop(line, true)
}

// CheckAnswer checks obj as TDLib's answer to function: an object of the
// function's result class, or an error.
func (s *Schema) CheckAnswer(function string, line []byte) error {
	if err := s.CheckObject(line); err != nil {
		return err
	}
	want, ok := s.Result(function)
	if !ok {
		return fmt.Errorf("answer to %s: no such function", function)
	}
	var head struct {
		Type string `json:"@type"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return fmt.Errorf("answer to %s: %w", function, err)
	}
	if head.Type == "error" || head.Type == want {
		return nil
	}
	if class, _ := s.Class(head.Type); class != want {
		return fmt.Errorf("answer to %s: %s is a %s, the function returns %s", function, head.Type, class, want)
	}
	return nil
}

func (s *Schema) checkTop(line []byte, request bool) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("decode TDLib JSON: %w", err)
	}
	if d.More() {
		return errors.New("decode TDLib JSON: more than one value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("TDLib JSON: %s, want an object", kind(v))
	}
	typ, _ := obj["@type"].(string)
	c := &checker{s: s, request: request}
	var ctor *constructor
	if request {
		ctor = s.functions[typ]
		if ctor == nil {
			return fmt.Errorf("request %q: no such function in the schema", typ)
		}
	} else {
		ctor = s.types[typ]
		if ctor == nil {
			return fmt.Errorf("object %q: no such constructor in the schema", typ)
		}
	}
	if e, ok := obj["@client_id"]; ok {
		if n, ok := e.(json.Number); !ok || !isInt(n, math.MinInt32, math.MaxInt32) {
			c.fail(typ+".@client_id", "%s, want an int32", show(e))
		}
	}
	c.members(typ, ctor, obj, topLevel)
	return c.err()
}

// checker walks one value and collects what is wrong with it.
type checker struct {
	s       *Schema
	request bool // values of a request: missing members are allowed
	errs    []string
}

func (c *checker) fail(path, format string, args ...any) {
	c.errs = append(c.errs, path+": "+fmt.Sprintf(format, args...))
}

func (c *checker) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(c.errs, "; "))
}

// members checks the members of obj against ctor. extra names members
// allowed beyond the fields.
func (c *checker) members(path string, ctor *constructor, obj map[string]any, extra map[string]bool) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "@type" || extra[k] {
			continue
		}
		f := ctor.byName[k]
		if f == nil {
			c.fail(path+"."+k, "not a field of %s", ctor.name)
			continue
		}
		c.value(path+"."+k, f.typ, f.nullable, obj[k])
	}
	if c.request {
		return
	}
	for _, f := range ctor.fields {
		if _, ok := obj[f.name]; !ok && !f.nullable {
			c.fail(path+"."+f.name, "missing (%s %s may not be null)", ctor.name, f.typ)
		}
	}
}

// value checks v as a value of the schema type typ.
func (c *checker) value(path, typ string, nullable bool, v any) {
	if v == nil {
		switch {
		case !nullable:
			c.fail(path, "null, but the schema does not say it may be null (%s)", typ)
		case !c.request:
			// TDLib's JSON writer skips a null object member
			// (td_api_json.cpp: if (object.x_) { jo("x", ...); }).
			c.fail(path, "null: TDLib leaves out a member that is null")
		}
		return
	}
	switch typ {
	case "int32":
		c.integer(path, typ, v, math.MinInt32, math.MaxInt32)
	case "int53":
		c.integer(path, typ, v, -(1<<53 - 1), 1<<53-1)
	case "int64":
		// TDLib writes int64 as a string: JSON numbers lose precision.
		str, ok := v.(string)
		if !ok {
			c.fail(path, "%s, want int64 as a string", show(v))
			return
		}
		if _, err := strconv.ParseInt(str, 10, 64); err != nil {
			c.fail(path, "%q is not an int64", str)
		}
	case "double":
		if _, ok := v.(json.Number); !ok {
			c.fail(path, "%s, want a number", show(v))
		}
	case "string":
		if _, ok := v.(string); !ok {
			c.fail(path, "%s, want a string", show(v))
		}
	case "bytes":
		str, ok := v.(string)
		if !ok {
			c.fail(path, "%s, want bytes as base64", show(v))
			return
		}
		if _, err := base64.StdEncoding.DecodeString(str); err != nil {
			c.fail(path, "%q is not base64", str)
		}
	case "Bool":
		if _, ok := v.(bool); !ok {
			c.fail(path, "%s, want true or false", show(v))
		}
	default:
		if elem, ok := strings.CutPrefix(typ, "vector<"); ok {
			elem = strings.TrimSuffix(elem, ">")
			list, ok := v.([]any)
			if !ok {
				c.fail(path, "%s, want an array of %s", show(v), elem)
				return
			}
			for i, e := range list {
				c.value(fmt.Sprintf("%s[%d]", path, i), elem, false, e)
			}
			return
		}
		c.object(path, typ, v)
	}
}

// object checks v as an object of typ: a class (any of its constructors)
// or a constructor itself.
func (c *checker) object(path, typ string, v any) {
	obj, ok := v.(map[string]any)
	if !ok {
		c.fail(path, "%s, want an object of %s", show(v), typ)
		return
	}
	name, _ := obj["@type"].(string)
	if name == "" {
		c.fail(path, "object without @type, want %s", typ)
		return
	}
	ctor := c.s.types[name]
	switch {
	case ctor == nil:
		c.fail(path, "%q is not a constructor of the schema", name)
		return
	case isClass(typ) && ctor.class != typ:
		c.fail(path, "%s is a %s, want a %s", name, ctor.class, typ)
		return
	case !isClass(typ) && name != typ:
		c.fail(path, "%s, want %s", name, typ)
		return
	}
	c.members(path+"("+name+")", ctor, obj, nil)
}

// isClass tells a class ("ChatType") from a constructor ("chatTypePrivate")
// by its initial, as td_api.tl spells them.
func isClass(typ string) bool {
	for _, r := range typ {
		return unicode.IsUpper(r)
	}
	return false
}

func (c *checker) integer(path, typ string, v any, lo, hi int64) {
	n, ok := v.(json.Number)
	if !ok {
		c.fail(path, "%s, want %s as a number", show(v), typ)
		return
	}
	if !isInt(n, lo, hi) {
		c.fail(path, "%s is not an %s", n, typ)
	}
}

func isInt(n json.Number, lo, hi int64) bool {
	i, err := strconv.ParseInt(string(n), 10, 64)
	return err == nil && i >= lo && i <= hi
}

// kind names the JSON kind of v.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// show is v for a message: short values as they are, others by kind.
func show(v any) string {
	switch v := v.(type) {
	case json.Number:
		return "number " + string(v)
	case string:
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return strconv.Quote(v)
	case bool:
		return strconv.FormatBool(v)
	}
	return kind(v)
}
