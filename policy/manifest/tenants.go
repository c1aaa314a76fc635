package manifest

import (
	"encoding/json"
	"errors"
)

// MarshalJSON writes "*" for every tenant, or the list.
func (t Tenants) MarshalJSON() ([]byte, error) {
	if t.All {
		return json.Marshal("*")
	}
	if t.List == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(t.List)
}

// UnmarshalJSON reads "*" or a list of tenant ids.
func (t *Tenants) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		if s != "*" {
			return errors.New(`tenants: want "*" or a list of tenant ids`)
		}
		*t = Tenants{All: true}
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return errors.New(`tenants: want "*" or a list of tenant ids`)
	}
	*t = Tenants{List: list}
	return nil
}
