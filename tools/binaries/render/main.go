// fleetwave-render renders Sveltos-style Go templates for fleetwave: Go's text/template with the
// Sprig functions and the helpers Sveltos documents (toYaml, getResource, copy, setField, ...).
//
// It reads one JSON request on stdin and writes one JSON answer on stdout, so the controller (Python)
// renders with Go's own template engine instead of an imitation. It never touches the network, the
// file system or its environment: Sprig's env, expandenv and getHostByName are removed. Output per
// template is capped (maxOutputBytes); the caller bounds time and memory with rlimits and a deadline.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/template"

	"github.com/BurntSushi/toml"
	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

const version = "fleetwave-render 1"

type request struct {
	TextTemplate   bool                      `json:"textTemplate"`
	Data           map[string]interface{}    `json:"data"`
	Resources      map[string]map[string]any `json:"mgmtResources"`
	Templates      []namedTemplate           `json:"templates"`
	MaxOutputBytes int                       `json:"maxOutputBytes"`
}

type namedTemplate struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

type result struct {
	Output *string `json:"output,omitempty"`
	Error  string  `json:"error,omitempty"`
}

var errTooLarge = errors.New("output too large")

// cappedBuffer fails the template's write once the output passes its limit: a template that loops
// stops there instead of filling memory.
type cappedBuffer struct {
	buf   bytes.Buffer
	limit int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.buf.Len()+len(p) > c.limit {
		return 0, errTooLarge
	}
	return c.buf.Write(p)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		fmt.Println(version)
		return
	}
	var req request
	dec := json.NewDecoder(io.LimitReader(os.Stdin, 64<<20))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		fmt.Fprintf(os.Stderr, "fleetwave-render: bad request: %v\n", err)
		os.Exit(2)
	}
	if req.MaxOutputBytes <= 0 {
		req.MaxOutputBytes = 1 << 20
	}
	data := map[string]interface{}{}
	for k, v := range req.Data {
		data[k] = normalise(v)
	}
	resources := map[string]map[string]interface{}{}
	for k, v := range req.Resources {
		resources[k] = normalise(v).(map[string]interface{})
	}
	data["MgmtResources"] = resources
	results := make([]result, 0, len(req.Templates))
	for _, t := range req.Templates {
		results = append(results, render(t, data, resources, req))
	}
	out, err := json.Marshal(map[string]interface{}{"results": results})
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetwave-render: %v\n", err)
		os.Exit(2)
	}
	_, _ = os.Stdout.Write(out)
}

func render(t namedTemplate, data map[string]interface{}, resources map[string]map[string]interface{}, req request) result {
	funcs := funcMap(req.TextTemplate, resources)
	tmpl, err := template.New(t.Name).Option("missingkey=error").Funcs(funcs).Parse(t.Text)
	if err != nil {
		return result{Error: err.Error()}
	}
	out := &cappedBuffer{limit: req.MaxOutputBytes}
	if err := tmpl.Execute(out, data); err != nil {
		if errors.Is(err, errTooLarge) {
			return result{Error: fmt.Sprintf("template %s: output larger than %d bytes", t.Name, req.MaxOutputBytes)}
		}
		return result{Error: err.Error()}
	}
	s := out.buf.String()
	return result{Output: &s}
}

// normalise turns json.Number into int64 or float64, as a Kubernetes unstructured object holds them.
func normalise(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, e := range x {
			x[k] = normalise(e)
		}
		return x
	case []interface{}:
		for i, e := range x {
			x[i] = normalise(e)
		}
		return x
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

func funcMap(textTemplate bool, resources map[string]map[string]interface{}) template.FuncMap {
	funcs := sprig.FuncMap() // Sveltos' default; the text-template annotation picks TxtFuncMap
	if textTemplate {
		funcs = sprig.TxtFuncMap()
	}
	// The controller's environment holds its credentials and DNS reaches the network: never a template's.
	for _, name := range []string{"env", "expandenv", "getHostByName"} {
		delete(funcs, name)
	}
	extra := template.FuncMap{
		"toToml":        toTOML,
		"fromToml":      fromTOML,
		"toYaml":        toYAML,
		"fromYaml":      fromYAML,
		"fromYamlArray": fromYAMLArray,
		"toJson":        toJSON,
		"fromJson":      fromJSON,
		"fromJsonArray": fromJSONArray,
		"getResource": func(id string) map[string]interface{} {
			u, ok := resources[id]
			if !ok {
				return nil
			}
			return cleaned(u)
		},
		"copy": func(id string) string {
			u, ok := resources[id]
			if !ok {
				return ""
			}
			return toYAML(cleaned(u))
		},
		"getField": func(id, fields string) interface{} {
			u, ok := resources[id]
			if !ok {
				return ""
			}
			v, found := nested(u, strings.Split(fields, "."))
			if !found {
				return ""
			}
			return deepCopy(v)
		},
		"removeField": func(id, fields string) string {
			u, ok := resources[id]
			if !ok {
				return ""
			}
			c := cleaned(u)
			removeNested(c, strings.Split(fields, "."))
			return toYAML(c)
		},
		"setField": func(id, fields string, value interface{}) string {
			u, ok := resources[id]
			if !ok {
				return ""
			}
			c := cleaned(u)
			if !setNested(c, strings.Split(fields, "."), value) {
				return ""
			}
			return toYAML(c)
		},
		"chainRemoveField": func(u map[string]interface{}, fields string) map[string]interface{} {
			removeNested(u, strings.Split(fields, "."))
			return u
		},
		"chainSetField": func(u map[string]interface{}, fields string, value interface{}) map[string]interface{} {
			if !setNested(u, strings.Split(fields, "."), value) {
				return nil
			}
			return u
		},
	}
	for k, v := range extra {
		funcs[k] = v
	}
	return funcs
}

// cleaned is a copy of a management-cluster object without what the API server filled in, so
// copying it into a member cluster creates a new object there.
func cleaned(u map[string]interface{}) map[string]interface{} {
	c := deepCopy(u).(map[string]interface{})
	if meta, ok := c["metadata"].(map[string]interface{}); ok {
		for _, k := range []string{"managedFields", "resourceVersion", "uid"} {
			delete(meta, k)
		}
	}
	return c
}

func deepCopy(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		c := make(map[string]interface{}, len(x))
		for k, e := range x {
			c[k] = deepCopy(e)
		}
		return c
	case []interface{}:
		c := make([]interface{}, len(x))
		for i, e := range x {
			c[i] = deepCopy(e)
		}
		return c
	}
	return v
}

func nested(u map[string]interface{}, path []string) (interface{}, bool) {
	var cur interface{} = u
	for _, p := range path {
		m, ok := cur.(map[string]interface{})
		if !ok {
			return nil, false
		}
		cur, ok = m[p]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func setNested(u map[string]interface{}, path []string, value interface{}) bool {
	m := u
	for _, p := range path[:len(path)-1] {
		next, ok := m[p]
		if !ok {
			n := map[string]interface{}{}
			m[p] = n
			m = n
			continue
		}
		if m, ok = next.(map[string]interface{}); !ok {
			return false
		}
	}
	m[path[len(path)-1]] = deepCopy(value)
	return true
}

func removeNested(u map[string]interface{}, path []string) {
	m := u
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]interface{})
		if !ok {
			return
		}
		m = next
	}
	delete(m, path[len(path)-1])
}

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromYAMLArray(s string) []interface{} {
	a := []interface{}{}
	if err := yaml.Unmarshal([]byte(s), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

func toTOML(v interface{}) string {
	b := bytes.NewBuffer(nil)
	if err := toml.NewEncoder(b).Encode(v); err != nil {
		return err.Error()
	}
	return b.String()
}

func fromTOML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if _, err := toml.Decode(s, &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromJSONArray(s string) []interface{} {
	a := []interface{}{}
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}
