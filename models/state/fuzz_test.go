package state

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

// The body checks of the http backend are pure (parseState, parseLockInfo); the
// handlers and the lineage/serial rules around them need PostgreSQL and are covered by
// state_test.go and web/state_test.go. These targets need no database.

// FuzzParseState reads any bytes as a state body POSTed by tofu: parseState never
// panics, refuses only with ErrMalformed, and accepts exactly the documents with a
// version, a serial from 1 to MaxInt32 (it becomes an int64 column and a run's int
// serial) and a lineage; an accepted header reads back the same. A state built from
// the fuzzed serial and lineage is accepted exactly when those are valid.
func FuzzParseState(f *testing.F) {
	for _, seed := range []string{
		`{"version":4,"terraform_version":"1.10.10","serial":1,"lineage":"3f1c2a6e-8c7b-4d2f-9a1e-0b5c6d7e8f90","outputs":{},"resources":[],"check_results":null}`,
		`{"version":4,"serial":2147483647,"lineage":"l"}`,
		`{"version":4,"serial":2147483648,"lineage":"l"}`,
		`{"version":4,"serial":0,"lineage":"l"}`,
		`{"version":4,"serial":-1,"lineage":"l"}`,
		`{"version":4,"serial":1.5,"lineage":"l"}`,
		`{"version":null,"serial":1,"lineage":"l"}`,
		`{"serial":1,"lineage":"l"}`,
		`{"version":4,"serial":1,"lineage":""}`,
		`{"Version":4,"SERIAL":1,"Lineage":"l","serial":3}`,
		`[]`, `null`, ``, `{`,
	} {
		f.Add([]byte(seed), uint64(1), "lineage-1")
	}
	f.Add([]byte(`{}`), uint64(0), "")
	f.Add([]byte(`{}`), uint64(math.MaxInt32)+1, "x")
	f.Add([]byte(`{}`), uint64(math.MaxUint64), "\xff")
	f.Fuzz(func(t *testing.T, data []byte, serial uint64, lineage string) {
		checkState(t, data)

		// A state document as tofu writes one, from the fuzzed values.
		if !utf8.ValidString(lineage) {
			lineage = strings.ToValidUTF8(lineage, "\uFFFD")
		}
		body, err := json.Marshal(map[string]any{"version": 4, "terraform_version": "1.10.10", "serial": serial,
			"lineage": lineage, "outputs": map[string]any{}, "resources": []any{}})
		if err != nil {
			t.Fatal(err)
		}
		h, err := parseState(body)
		valid := serial >= 1 && serial <= math.MaxInt32 && lineage != "" && !strings.ContainsRune(lineage, 0)
		if (err == nil) != valid {
			t.Fatalf("serial %d, lineage %q: %v, want valid %v", serial, lineage, err, valid)
		}
		if err == nil && (*h.Serial != serial || h.Lineage != lineage || *h.Version != 4) {
			t.Fatalf("read %d %q %d, wrote %d %q 4", *h.Serial, h.Lineage, *h.Version, serial, lineage)
		}
		checkState(t, body)
	})
}

func checkState(t *testing.T, data []byte) {
	t.Helper()
	h, err := parseState(data)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("parseState: %v, want ErrMalformed", err)
		}
		return
	}
	switch {
	case h.Version == nil:
		t.Fatal("accepted without a version")
	case h.Serial == nil || *h.Serial < 1 || *h.Serial > math.MaxInt32:
		t.Fatalf("accepted serial %v", h.Serial)
	case h.Lineage == "":
		t.Fatal("accepted without a lineage")
	}
	// The header reads back the same from its own encoding.
	again, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := parseState(again)
	if err != nil || *h2.Serial != *h.Serial || *h2.Version != *h.Version || h2.Lineage != h.Lineage {
		t.Fatalf("header %s reads back as %+v, %v", again, h2, err)
	}
}

// FuzzParseLockInfo reads any bytes as the LockInfo body of a LOCK or UNLOCK: it never
// panics, refuses only with ErrMalformed, accepts only a document with an ID, and reads
// the ID, operation and holder a contender is shown. A LockInfo built from the fuzzed
// fields is accepted exactly when it has an ID, and reads back unchanged.
func FuzzParseLockInfo(f *testing.F) {
	for _, seed := range []string{
		`{"ID":"8c1b3f7e-2d4a-4b6c-9e8f-0a1b2c3d4e5f","Operation":"OperationTypeApply","Info":"","Who":"runner@job-1","Version":"1.10.10","Created":"2026-11-01T10:00:00.123456Z","Path":""}`,
		`{"ID":"only-the-id"}`,
		`{"ID":""}`,
		`{"id":"lower-case-key"}`,
		`{"ID":7}`,
		`{"ID":"a","ID":""}`,
		`{"ID":"\u0000"}`,
		`"ID"`, `null`, ``, `[`,
	} {
		f.Add([]byte(seed), "lock-1", "OperationTypePlan", "who")
	}
	f.Fuzz(func(t *testing.T, data []byte, id, op, who string) {
		li, err := parseLockInfo(data)
		switch {
		case err != nil && !errors.Is(err, ErrMalformed):
			t.Fatalf("parseLockInfo: %v, want ErrMalformed", err)
		case err == nil && li.ID == "":
			t.Fatal("accepted without an ID")
		case err == nil:
			var raw map[string]any
			if json.Unmarshal(data, &raw) != nil {
				t.Fatalf("accepted %q, which is no JSON object", data)
			}
		}

		for _, s := range []*string{&id, &op, &who} {
			*s = strings.ToValidUTF8(*s, "\uFFFD")
		}
		body, err := json.Marshal(map[string]any{"ID": id, "Operation": op, "Info": "", "Who": who,
			"Version": "1.10.10", "Created": "2026-11-01T10:00:00Z", "Path": ""})
		if err != nil {
			t.Fatal(err)
		}
		li, err = parseLockInfo(body)
		nul := strings.ContainsRune(id+op+who, 0)
		if (err == nil) != (id != "" && !nul) {
			t.Fatalf("ID %q: %v", id, err)
		}
		if err == nil && li != (LockInfo{ID: id, Operation: op, Who: who}) {
			t.Fatalf("read %+v, wrote %q %q %q", li, id, op, who)
		}
	})
}
