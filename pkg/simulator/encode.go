package simulator

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// Encode writes the scenario as a scenario file that Parse reads back: fields in declaration
// order, unset and zero fields left out (every default is a zero value).
func (s *Scenario) Encode() ([]byte, error) {
	n, err := encodeValue(reflect.ValueOf(s).Elem())
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

// FormatDuration writes a duration as time.ParseDuration reads it, without zero tails: 1h, 1h30m, 90s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// encodeValue returns nil for a value that is unset or zero.
func encodeValue(v reflect.Value) (*yaml.Node, error) {
	switch x := v.Interface().(type) {
	case Duration:
		// A field that is not a pointer defaults to zero; a pointer is written whenever set.
		if x.Duration == 0 {
			return nil, nil
		}
		return scalar(FormatDuration(x.Duration)), nil
	case Quantity:
		return scalar(x.String()), nil
	case Time:
		return scalar(x.UTC().Format(time.RFC3339)), nil
	case ResourceQuota:
		if x.BorrowingLimit == nil && x.LendingLimit == nil {
			return scalar(x.Nominal.String()), nil
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil, nil
		}
		if d, ok := v.Interface().(*Duration); ok {
			return scalar(FormatDuration(d.Duration)), nil
		}
		n, err := encodeValue(v.Elem())
		if n == nil && err == nil && v.Elem().Kind() == reflect.Struct {
			// A present but empty section (fairSharing: {}) means something.
			return &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}, nil
		}
		return n, err
	case reflect.Struct:
		out := &yaml.Node{Kind: yaml.MappingNode}
		t := v.Type()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" || !t.Field(i).IsExported() {
				continue
			}
			n, err := encodeValue(v.Field(i))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if n != nil {
				out.Content = append(out.Content, scalar(name), n)
			}
		}
		if len(out.Content) == 0 {
			return nil, nil
		}
		return out, nil
	case reflect.Map:
		if v.Len() == 0 {
			return nil, nil
		}
		out := &yaml.Node{Kind: yaml.MappingNode}
		keys := v.MapKeys()
		names := make([]string, 0, len(keys))
		for _, k := range keys {
			names = append(names, k.String())
		}
		for _, k := range sortedKeys(setOf(names)) {
			elem := v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key()))
			n, err := encodeValue(elem)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if n == nil {
				// A map entry is written even when zero: featureGates {X: false}.
				n = zeroNode(elem)
			}
			out.Content = append(out.Content, scalar(k), n)
		}
		return out, nil
	case reflect.Slice:
		if v.Len() == 0 {
			return nil, nil
		}
		out := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range v.Len() {
			n, err := encodeValue(v.Index(i))
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if n == nil {
				n = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			}
			out.Content = append(out.Content, n)
		}
		return out, nil
	case reflect.String:
		if v.String() == "" {
			return nil, nil
		}
		n := scalar(v.String())
		// Keep strings strings: "1", "true", "null" would read back as other kinds.
		var probe any
		if err := yaml.Unmarshal([]byte(v.String()), &probe); err != nil || fmt.Sprint(probe) != v.String() || reflect.TypeOf(probe) != reflect.TypeFor[string]() {
			n.Style = yaml.DoubleQuotedStyle
		}
		return n, nil
	case reflect.Bool:
		if !v.Bool() {
			return nil, nil
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}, nil
	case reflect.Int, reflect.Int32, reflect.Int64:
		if v.Int() == 0 {
			return nil, nil
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: fmt.Sprint(v.Int())}, nil
	case reflect.Float64:
		if v.Float() == 0 {
			return nil, nil
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: fmt.Sprint(v.Float())}, nil
	}
	return nil, fmt.Errorf("cannot encode %s", v.Type())
}

func setOf(names []string) map[string]struct{} {
	out := make(map[string]struct{}, len(names))
	for _, n := range names {
		out[n] = struct{}{}
	}
	return out
}

// zeroNode is the YAML of a zero value, for where leaving it out would change the meaning.
func zeroNode(v reflect.Value) *yaml.Node {
	switch v.Kind() {
	case reflect.Bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "false"}
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Float64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: "0"}
	case reflect.String:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: "", Style: yaml.DoubleQuotedStyle}
	}
	return &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
}
