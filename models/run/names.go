package run

// "Did you mean": a new workspace's name close to an existing one is asked about before
// a second workspace is made by a typo (request.go).

import "strings"

// nearestName is the name among names closest to name when it is close enough to be
// a typo of it (one letter apart in a name of four or more, two in one of eight or
// more), or "". Names
// whose numbers differ are a series, not typos: app-1 beside app-2 is meant.
func nearestName(name string, names []string) string {
	best, bestDistance := "", 3
	for _, n := range names {
		d := editDistance(name, n)
		if d == 0 || d >= bestDistance || len(name) < 4 || (d == 2 && len(name) < 8) || digitsOf(n) != digitsOf(name) {
			continue
		}
		best, bestDistance = n, d
	}
	return best
}

func digitsOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

// editDistance is the Levenshtein distance of a and b (names are short ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
