package idempotency

import (
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"gantry/models/errs"
)

// FuzzCheckKey checks any key, from a form or the API header: checkKey never panics,
// accepts exactly the keys of 1 to MaxKeyLength visible ASCII characters, and refuses
// with a validation error (422 INVALID_INPUT) on the one field the key came in.
func FuzzCheckKey(f *testing.F) {
	f.Add(NewKey(), false)
	f.Add(NewKey(), true)
	f.Add("", false)
	f.Add("", true)
	f.Add(strings.Repeat("k", MaxKeyLength), false)
	f.Add(strings.Repeat("k", MaxKeyLength+1), true)
	f.Add("key with space", false)
	f.Add("ключ", true)
	f.Add("tab\tkey", false)
	f.Add("\x7f", false)
	f.Add("~!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}", true)
	f.Add("\xff\xfe", false)
	f.Fuzz(func(t *testing.T, key string, api bool) {
		err := checkKey(Request{Key: key, API: api, Hash: "sha256:00"})
		valid := len(key) >= 1 && len(key) <= MaxKeyLength
		for i := 0; i < len(key); i++ {
			if key[i] < 0x21 || key[i] > 0x7e {
				valid = false
			}
		}
		if (err == nil) != valid {
			t.Fatalf("key %q (api %v): %v, want valid %v", key, api, err, valid)
		}
		if err == nil {
			return
		}
		v, ok := errs.AsValidation(err)
		if !ok || errs.CodeOf(err) != errs.CodeInvalidInput {
			t.Fatalf("refused with %v, want a validation error", err)
		}
		field := Field
		if api {
			field = Header
		}
		if len(v.Fields) != 1 || v.Fields[field] == "" {
			t.Fatalf("refused on %v, want the field %s", v.Fields, field)
		}
	})
}

// FuzzFingerprint hashes any form (given as a query string) and API call: the
// fingerprints never panic, are "sha256:" and 64 hex digits, do not depend on the CSRF
// token or the key, survive the form's own encoding (read back, the same fingerprint),
// and change when a field, the path or the method changes; an API call's fingerprint
// changes with its body and content type.
func FuzzFingerprint(f *testing.F) {
	f.Add("POST", "/runs/run-1/approve", "plan_digest=sha256%3Aab&run_id=run-1&_csrf=tok&idempotency_key=k1&reason=ok", "reason", "changed", "application/json", []byte(`{"reason":"ok"}`))
	f.Add("POST", "/requests", "inputs.name=core&inputs.name=second&template=network", "inputs.cidr", "", "application/x-www-form-urlencoded", []byte("a=1"))
	f.Add("DELETE", "/api/v1/workspaces/ws-1", "", "", "", "", []byte(nil))
	f.Add("POST", "/a b\n", "=x&%00=%FF&k=%zz", "k", "v", "text/plain; charset=utf-8", []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, method, path, query, key, value, contentType string, body []byte) {
		form, _ := url.ParseQuery(query) // what a malformed pair leaves out, the form never had
		fp := Fingerprint(method, path, form)
		checkDigest(t, fp)
		if Fingerprint(method, path, form) != fp {
			t.Fatal("not deterministic")
		}

		// The token and the key do not count.
		noise := url.Values{}
		for k, vs := range form {
			noise[k] = append([]string(nil), vs...)
		}
		noise.Set("_csrf", value+"-token")
		noise.Set(Field, key+"-key")
		if got := Fingerprint(method, path, noise); got != fp {
			t.Fatalf("the CSRF token or the key changed the fingerprint")
		}

		// The encoding is the form's own: reading it back gives the same fingerprint.
		reread, err := url.ParseQuery(form.Encode())
		if err != nil {
			t.Fatalf("the form's encoding does not parse: %v", err)
		}
		if Fingerprint(method, path, reread) != fp {
			t.Fatal("the form read back from its encoding fingerprints differently")
		}

		// Another value, field, path or method is another request.
		if key != "_csrf" && key != Field {
			more := url.Values{}
			for k, vs := range form {
				more[k] = append([]string(nil), vs...)
			}
			more.Add(key, value)
			if Fingerprint(method, path, more) == fp {
				t.Fatalf("adding %s=%q did not change the fingerprint", key, value)
			}
		}
		if Fingerprint(method, path+"/x", form) == fp {
			t.Fatal("another path, the same fingerprint")
		}
		if !strings.Contains(method, " ") && Fingerprint(method+"X", path, form) == fp {
			t.Fatal("another method, the same fingerprint")
		}

		bfp := FingerprintBody(method, path, contentType, body)
		checkDigest(t, bfp)
		if FingerprintBody(method, path, contentType, body) != bfp {
			t.Fatal("not deterministic")
		}
		if FingerprintBody(method, path, contentType, append(append([]byte(nil), body...), '!')) == bfp {
			t.Fatal("another body, the same fingerprint")
		}
		if !strings.Contains(contentType, "\n") && FingerprintBody(method, path, contentType+";x", body) == bfp {
			t.Fatal("another content type, the same fingerprint")
		}
	})
}

func checkDigest(t *testing.T, fp string) {
	t.Helper()
	h, ok := strings.CutPrefix(fp, "sha256:")
	if b, err := hex.DecodeString(h); !ok || err != nil || len(b) != 32 || strings.ToLower(h) != h {
		t.Fatalf("fingerprint %q is not sha256 and 64 lower-case hex digits", fp)
	}
}
