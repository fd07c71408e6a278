// Package words holds the small grammar the product's sentences share, so that a
// count reads right wherever it is said ("1 event", "2 events").
package words

import "strconv"

// Count is n followed by the noun in its singular (one) or plural (many) form.
func Count[N int | int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(int64(n), 10) + " " + many
}
