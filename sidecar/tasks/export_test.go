package tasks

import (
	"strconv"
	"time"
)

// What the conformance runs (package tasks_test: they import storetest,
// which imports tasks) read of this package's internals.

var (
	OpenTestRedis       = openTestRedis
	WithPatientReplicas = withPatientReplicas
	Slot                = slot
)

// NextPrefix is a key prefix no other test of this run uses.
func NextPrefix() string { return "test-" + strconv.FormatInt(prefixes.Add(1), 10) + ":" }

// Tagged reports whether r puts Cluster hash tags in its keys.
func Tagged(r *Redis) bool { return r.keys.tagged }

// MinReplicas is how many replicas r's ownership writes wait for.
func MinReplicas(r *Redis) int { return r.minReplicas }

// SlotProbeKeys are keys of each kind, as a Cluster store names them, and
// two keys with braces, for checking Slot against CLUSTER KEYSLOT.
func SlotProbeKeys() []string {
	k := keys{prefix: "capgate:", tagged: true}
	return []string{k.task("t-1"), k.owner(Owner{Issuer: "https://idp", Subject: "s", Tenant: "t"}), k.day("c", 20000), "plain", "a{}b{c}"}
}

// ClockOffsets are this package's copy of the suite's skews, by name.
func ClockOffsets() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, c := range clockOffsets {
		out[c.name] = c.offset
	}
	return out
}
