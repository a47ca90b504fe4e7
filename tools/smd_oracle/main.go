// Command smd_oracle runs Kubernetes' own server-side apply merge (structured-merge-diff v4)
// on a sequence of applies and updates, for tests/fake_kube's differential test
// (tests/unit/kube/test_ssa_oracle.py). Built by tests/fake_kube/smd_oracle.py into a cache
// folder, offline, from Debian's golang-k8s-sigs-structured-merge-diff-dev; never committed.
//
// Protocol: JSON lines on stdin. The first: {"schema": "<the library's schema YAML>", "type":
// "<root type name>"}. Then one per operation: {"op": "apply"|"update", "manager": "...",
// "force": bool, "object": {...}}. For each operation one line on stdout: {"object": {...},
// "managed": {"<manager>": {"operation": "Apply"|"Update", "fieldsV1": {...}}}, "conflicts":
// [{"manager": "...", "path": "..."}], "error": "..."}. Managers are kept per name and
// operation, as the API server keeps them; an update is always forced, as the API server's is.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v4/merge"
	"sigs.k8s.io/structured-merge-diff/v4/typed"
)

type header struct {
	Schema string `json:"schema"`
	Type   string `json:"type"`
}

type operation struct {
	Op      string                 `json:"op"`
	Manager string                 `json:"manager"`
	Force   bool                   `json:"force"`
	Object  map[string]interface{} `json:"object"`
}

type owner struct {
	Operation string          `json:"operation"`
	FieldsV1  json.RawMessage `json:"fieldsV1"`
}

type answer struct {
	Object    interface{}                `json:"object"`
	Managed   map[string]owner           `json:"managed"`
	Conflicts map[string]json.RawMessage `json:"conflicts"`
	Error     string                     `json:"error"`
}

// One API version: nothing to convert.
type sameVersion struct{}

func (sameVersion) Convert(v *typed.TypedValue, _ fieldpath.APIVersion) (*typed.TypedValue, error) {
	return v, nil
}
func (sameVersion) IsMissingVersionError(error) bool { return false }

const version = fieldpath.APIVersion("v1")

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<20), 64<<20)
	out := json.NewEncoder(os.Stdout)
	if !in.Scan() {
		fail("no schema line")
	}
	var h header
	if err := json.Unmarshal(in.Bytes(), &h); err != nil {
		fail("schema line: " + err.Error())
	}
	parser, err := typed.NewParser(typed.YAMLObject(h.Schema))
	if err != nil {
		fail("schema: " + err.Error())
	}
	root := parser.Type(h.Type)
	if !root.IsValid() {
		fail("no type " + h.Type)
	}
	updater := &merge.Updater{Converter: sameVersion{}}
	live, err := root.FromUnstructured(map[string]interface{}{})
	if err != nil {
		fail(err.Error())
	}
	managers := fieldpath.ManagedFields{}
	for in.Scan() {
		var op operation
		if err := json.Unmarshal(in.Bytes(), &op); err != nil {
			fail("operation: " + err.Error())
		}
		reply := answer{Managed: map[string]owner{}, Conflicts: map[string]json.RawMessage{}}
		object, err := root.FromUnstructured(integers(op.Object))
		if err == nil {
			key := op.Manager + "|" + op.Op
			var next *typed.TypedValue
			var nextManagers fieldpath.ManagedFields
			// Apply writes into the map it is given, even when it refuses: a copy.
			if op.Op == "apply" {
				next, nextManagers, err = updater.Apply(live, object, version, copied(managers), key, op.Force)
			} else {
				next, nextManagers, err = updater.Update(live, object, version, copied(managers), key)
			}
			if _, refused := err.(merge.Conflicts); refused {
				reply.Conflicts = conflicts(updater, live, object, managers, key)
			} else if err == nil {
				if next != nil {
					// The API server stores the merge's result after pruning it by the CRD's
					// schema, which drops a null no field allows (a list the merge emptied).
					live, err = root.FromUnstructured(withoutNulls(next.AsValue().Unstructured()))
				}
				managers = nextManagers
			}
		}
		if _, refused := err.(merge.Conflicts); err != nil && !refused {
			reply.Error = err.Error()
		}
		reply.Object = live.AsValue().Unstructured()
		for key, set := range managers {
			fields, err := set.Set().ToJSON()
			if err != nil {
				fail(err.Error())
			}
			operation := "Update"
			if set.Applied() {
				operation = "Apply"
			}
			reply.Managed[name(key)] = owner{Operation: operation, FieldsV1: fields}
		}
		if err := out.Encode(reply); err != nil {
			fail(err.Error())
		}
	}
}

func copied(managers fieldpath.ManagedFields) fieldpath.ManagedFields {
	out := fieldpath.ManagedFields{}
	for k, v := range managers {
		out[k] = v
	}
	return out
}

// The conflicts of a refused apply, per manager (FieldsV1), computed as the library's
// update() does: what the forced apply would modify or add, that another manager owns. The
// library's own Conflicts carry paths that alias one buffer (ConflictsFromManagers keeps the
// Path its Iterate reuses), so their printed paths cannot be trusted.
func conflicts(updater *merge.Updater, live, object *typed.TypedValue, managers fieldpath.ManagedFields, key string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	forced, _, err := updater.Apply(live, object, version, copied(managers), key, true)
	if err != nil {
		fail("forced apply: " + err.Error())
	}
	if forced == nil {
		forced = live
	}
	compare, err := live.Compare(forced)
	if err != nil {
		fail(err.Error())
	}
	changed := compare.Modified.Union(compare.Added)
	for manager, set := range managers {
		if manager == key {
			continue
		}
		found := set.Set().Intersection(changed)
		if found.Empty() {
			continue
		}
		fields, err := found.ToJSON()
		if err != nil {
			fail(err.Error())
		}
		out[name(manager)] = fields
	}
	return out
}

// The manager's own name (keys are "<name>|<op>").
func name(key string) string {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '|' {
			return key[:i]
		}
	}
	return key
}

func withoutNulls(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		out := map[string]interface{}{}
		for k, x := range t {
			if x != nil {
				out[k] = withoutNulls(x)
			}
		}
		return out
	case []interface{}:
		out := make([]interface{}, 0, len(t))
		for _, x := range t {
			out = append(out, withoutNulls(x))
		}
		return out
	}
	return v
}

// JSON numbers that are whole as int64, as the API server decodes them.
func integers(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		for k, x := range t {
			t[k] = integers(x)
		}
		return t
	case []interface{}:
		for i, x := range t {
			t[i] = integers(x)
		}
		return t
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
		return t
	}
	return v
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "smd_oracle: "+message)
	os.Exit(2)
}
