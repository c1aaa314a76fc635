package ratelimit

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"
)

// Limit is one quota as the rate-limit service counts it.
type Limit struct {
	// Quota is the quota's id (the value of the capgate_quota entry).
	Quota string
	// Parts are the counter key's parts (a subset of Parts()).
	Parts []string
	// Window is the counting window: one second, minute, hour or day, the
	// windows the service has.
	Window time.Duration
	// Limit is the calls (or cost units) admitted per window.
	Limit uint64
}

// unitOf maps a window to the service's unit; the service counts in fixed
// windows of these lengths only.
func unitOf(w time.Duration) (rlsconfv3.RateLimitUnit, bool) {
	switch w {
	case time.Second:
		return rlsconfv3.RateLimitUnit_SECOND, true
	case time.Minute:
		return rlsconfv3.RateLimitUnit_MINUTE, true
	case time.Hour:
		return rlsconfv3.RateLimitUnit_HOUR, true
	case 24 * time.Hour:
		return rlsconfv3.RateLimitUnit_DAY, true
	}
	return rlsconfv3.RateLimitUnit_UNKNOWN, false
}

// maxRequestsPerUnit is the service's requests_per_unit range (uint32).
const maxRequestsPerUnit = 1<<32 - 1

// Config builds the service's configuration for the domain from the quotas:
// one descriptor tree per quota, sorted by id. Every quota that cannot be
// expressed (a window the service has no unit for, a limit out of range, an
// unknown or repeated key part, a repeated id) is an error; all are joined.
func Config(limits []Limit) (*rlsconfv3.RateLimitConfig, error) {
	var errs []error
	seen := map[string]bool{}
	cfg := &rlsconfv3.RateLimitConfig{Domain: Domain}
	sorted := slices.Clone(limits)
	slices.SortFunc(sorted, func(a, b Limit) int { return cmp.Compare(a.Quota, b.Quota) })
	for _, l := range sorted {
		where := fmt.Sprintf("quota %q", l.Quota)
		if l.Quota == "" {
			errs = append(errs, errors.New("a quota has no id"))
			continue
		}
		if seen[l.Quota] {
			errs = append(errs, fmt.Errorf("%s: defined twice", where))
			continue
		}
		seen[l.Quota] = true
		unit, ok := unitOf(l.Window)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: window %s: the rate-limit service counts per second, minute, hour or day only; use one of those or in-process quotas", where, l.Window))
		}
		if l.Limit == 0 || l.Limit > maxRequestsPerUnit {
			errs = append(errs, fmt.Errorf("%s: limit %d: the rate-limit service takes 1 to %d per window", where, l.Limit, uint64(maxRequestsPerUnit)))
		}
		parts, err := ordered(l.Parts)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		root := &rlsconfv3.RateLimitDescriptor{Key: KeyQuota, Value: l.Quota}
		node := root
		for _, p := range parts {
			child := &rlsconfv3.RateLimitDescriptor{Key: p}
			node.Descriptors = []*rlsconfv3.RateLimitDescriptor{child}
			node = child
		}
		node.RateLimit = &rlsconfv3.RateLimitPolicy{Unit: unit, RequestsPerUnit: uint32(min(l.Limit, maxRequestsPerUnit)), Name: l.Quota}
		cfg.Descriptors = append(cfg.Descriptors, root)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ordered returns parts in descriptor order (Parts()), refusing unknown and
// repeated ones.
func ordered(parts []string) ([]string, error) {
	known := Parts()
	for i, p := range parts {
		if !slices.Contains(known, p) {
			return nil, fmt.Errorf("key part %q: the rate-limit descriptors carry %s only", p, strings.Join(known, ", "))
		}
		if slices.Contains(parts[:i], p) {
			return nil, fmt.Errorf("key part %q: named twice", p)
		}
	}
	out := make([]string, 0, len(parts))
	for _, p := range known {
		if slices.Contains(parts, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// fileDescriptor and fileLimit are the service's file format, in the order
// its documentation writes the fields.
type fileDescriptor struct {
	Key            string           `yaml:"key"`
	Value          string           `yaml:"value,omitempty"`
	RateLimit      *fileLimit       `yaml:"rate_limit,omitempty"`
	ShadowMode     bool             `yaml:"shadow_mode,omitempty"`
	DetailedMetric bool             `yaml:"detailed_metric,omitempty"`
	Descriptors    []fileDescriptor `yaml:"descriptors,omitempty"`
}

type fileLimit struct {
	Name            string        `yaml:"name,omitempty"`
	Unit            string        `yaml:"unit,omitempty"`
	RequestsPerUnit uint32        `yaml:"requests_per_unit,omitempty"`
	Unlimited       bool          `yaml:"unlimited,omitempty"`
	Replaces        []fileReplace `yaml:"replaces,omitempty"`
}

type fileReplace struct {
	Name string `yaml:"name"`
}

func toFile(ds []*rlsconfv3.RateLimitDescriptor) []fileDescriptor {
	out := make([]fileDescriptor, 0, len(ds))
	for _, d := range ds {
		f := fileDescriptor{Key: d.GetKey(), Value: d.GetValue(), ShadowMode: d.GetShadowMode(), DetailedMetric: d.GetDetailedMetric(), Descriptors: toFile(d.GetDescriptors())}
		if rl := d.GetRateLimit(); rl != nil {
			f.RateLimit = &fileLimit{Name: rl.GetName(), RequestsPerUnit: rl.GetRequestsPerUnit(), Unlimited: rl.GetUnlimited()}
			if rl.GetUnit() != rlsconfv3.RateLimitUnit_UNKNOWN {
				f.RateLimit.Unit = strings.ToLower(rl.GetUnit().String())
			}
			for _, r := range rl.GetReplaces() {
				f.RateLimit.Replaces = append(f.RateLimit.Replaces, fileReplace{Name: r.GetName()})
			}
		}
		out = append(out, f)
	}
	return out
}

// Render writes cfg in the service's YAML file format (a file of the
// directory its RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config names).
func Render(cfg *rlsconfv3.RateLimitConfig) ([]byte, error) {
	doc := struct {
		Domain      string           `yaml:"domain"`
		Descriptors []fileDescriptor `yaml:"descriptors"`
	}{cfg.GetDomain(), toFile(cfg.GetDescriptors())}
	var b strings.Builder
	b.WriteString("# Generated by `capgate ratelimit-config` from the deployment's quotas: do not edit.\n")
	b.WriteString("# The configuration of Envoy's global rate-limit service (envoyproxy/ratelimit); see docs/deploy.md.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode rate-limit config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode rate-limit config: %w", err)
	}
	return []byte(b.String()), nil
}

// Parse reads a service configuration file as the service loads it, against
// its types (RateLimitConfig, strictly: an unknown field or unit is an
// error) and its loader's rules: a domain, a key on every descriptor, a unit
// on every limit that is not unlimited (and none on one that is), no
// composite key twice, no empty or self replaces.
func Parse(data []byte) (*rlsconfv3.RateLimitConfig, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse rate-limit config yaml: %w", err)
	}
	js, err := json.Marshal(upperUnits(doc))
	if err != nil {
		return nil, fmt.Errorf("parse rate-limit config: %w", err)
	}
	cfg := &rlsconfv3.RateLimitConfig{}
	if err := protojson.Unmarshal(js, cfg); err != nil {
		return nil, fmt.Errorf("decode rate-limit config: %w", err)
	}
	var errs []error
	if cfg.GetDomain() == "" {
		errs = append(errs, errors.New("domain: empty (the service refuses the file)"))
	}
	errs = append(errs, checkDescriptors(cfg.GetDomain(), cfg.GetDescriptors())...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// upperUnits uppercases every rate_limit.unit, as the service does before
// looking the unit up (it accepts "minute" and "MINUTE").
func upperUnits(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "rate_limit" {
				if rl, ok := e.(map[string]any); ok {
					if u, ok := rl["unit"].(string); ok {
						rl["unit"] = strings.ToUpper(u)
					}
				}
			}
			v[k] = upperUnits(e)
		}
	case []any:
		for i, e := range v {
			v[i] = upperUnits(e)
		}
	}
	return v
}

func checkDescriptors(parent string, ds []*rlsconfv3.RateLimitDescriptor) []error {
	var errs []error
	seen := map[string]bool{}
	for _, d := range ds {
		if d.GetKey() == "" {
			errs = append(errs, fmt.Errorf("%s: a descriptor has an empty key", parent))
			continue
		}
		k := d.GetKey()
		if d.GetValue() != "" {
			k += "_" + d.GetValue()
		}
		full := parent + "." + k
		if seen[k] {
			errs = append(errs, fmt.Errorf("%s: duplicate descriptor composite key", full))
		}
		seen[k] = true
		if rl := d.GetRateLimit(); rl != nil {
			unit := rl.GetUnit() != rlsconfv3.RateLimitUnit_UNKNOWN
			switch {
			case rl.GetUnlimited() && unit:
				errs = append(errs, fmt.Errorf("%s: a unit on an unlimited limit", full))
			case !rl.GetUnlimited() && !unit:
				errs = append(errs, fmt.Errorf("%s: no rate limit unit", full))
			}
			for _, r := range rl.GetReplaces() {
				if r.GetName() == "" || r.GetName() == rl.GetName() {
					errs = append(errs, fmt.Errorf("%s: replaces is empty or names its own limit", full))
				}
			}
		}
		errs = append(errs, checkDescriptors(full, d.GetDescriptors())...)
	}
	return errs
}
