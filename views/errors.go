package views

import (
	"fmt"
	"net/http"
	"sort"
)

func statusText(code int) string {
	return fmt.Sprintf("%d · %s", code, http.StatusText(code))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
