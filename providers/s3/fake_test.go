package s3

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeStore is a small S3 with STS on one endpoint, as SeaweedFS serves them: STS's
// AssumeRoleWithWebIdentity at POST / (it hands out fakeKey), and the bucket calls the
// provider makes, path-style, each refused unless signed with fakeKey and the session's
// token. It is the provider's unit test double; the live test uses SeaweedFS.
type fakeStore struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	buckets  map[string]*fakeBucket
	tokens   []string          // the web identity tokens STS was given, in order
	roles    []string          // the role ARNs asked for
	duration []string          // the DurationSeconds asked for
	refuse   string            // a token STS refuses (AccessDenied), echoing it as a bad store might
	deny     map[string]string // "<op> <bucket>" -> an S3 error code answered with 403
	calls    []string          // "<op> <bucket>", in order
}

type fakeBucket struct {
	versioning string // "", "Enabled" or "Suspended"
	tags       map[string]string
	objects    []string // keys; each is one version
}

const (
	fakeKey     = "ASIAFAKESESSIONKEY01"
	fakeSecret  = "fake-session-secret-9c1e"
	fakeSession = "fake-session-token-77aa"
)

func newFakeStore(t *testing.T) *fakeStore {
	f := &fakeStore{t: t, buckets: map[string]*fakeBucket{}, deny: map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeStore) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method == http.MethodPost && r.URL.Path == "/" {
		f.sts(w, r)
		return
	}
	auth := r.Header.Get("Authorization")
	if !strings.Contains(auth, "Credential="+fakeKey+"/") || r.Header.Get("X-Amz-Security-Token") != fakeSession {
		s3Error(w, http.StatusForbidden, "InvalidAccessKeyId", "unknown key")
		return
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	op := s3Op(r.Method, q)
	f.calls = append(f.calls, op+" "+name)
	if code := f.deny[op+" "+name]; code != "" {
		s3Error(w, http.StatusForbidden, code, "Access Denied.")
		return
	}
	b := f.buckets[name]
	if b == nil && op != "CreateBucket" {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		s3Error(w, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
		return
	}
	body, _ := io.ReadAll(r.Body)
	switch op {
	case "HeadBucket":
	case "CreateBucket":
		if b != nil {
			s3Error(w, http.StatusConflict, "BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded.")
			return
		}
		f.buckets[name] = &fakeBucket{}
	case "PutBucketVersioning":
		var v struct{ Status string }
		_ = xml.Unmarshal(body, &v)
		b.versioning = v.Status
	case "GetBucketVersioning":
		fmt.Fprintf(w, `<VersioningConfiguration><Status>%s</Status></VersioningConfiguration>`, b.versioning)
	case "PutBucketTagging":
		var v struct {
			TagSet struct{ Tag []struct{ Key, Value string } }
		}
		_ = xml.Unmarshal(body, &v)
		b.tags = map[string]string{}
		for _, t := range v.TagSet.Tag {
			b.tags[t.Key] = t.Value
		}
	case "GetBucketTagging":
		if len(b.tags) == 0 {
			s3Error(w, http.StatusNotFound, "NoSuchTagSet", "The TagSet does not exist")
			return
		}
		io.WriteString(w, "<Tagging><TagSet>")
		for k, v := range b.tags {
			fmt.Fprintf(w, "<Tag><Key>%s</Key><Value>%s</Value></Tag>", k, v)
		}
		io.WriteString(w, "</TagSet></Tagging>")
	case "DeleteBucketTagging":
		b.tags = nil
		w.WriteHeader(http.StatusNoContent)
	case "ListObjectVersions":
		io.WriteString(w, "<ListVersionsResult><IsTruncated>false</IsTruncated>")
		for i, k := range b.objects {
			fmt.Fprintf(w, "<Version><Key>%s</Key><VersionId>v%d</VersionId></Version>", k, i)
		}
		io.WriteString(w, "</ListVersionsResult>")
	case "DeleteObjects":
		var v struct{ Object []struct{ Key string } }
		_ = xml.Unmarshal(body, &v)
		for _, o := range v.Object {
			b.objects = slices.DeleteFunc(b.objects, func(k string) bool { return k == o.Key })
		}
		io.WriteString(w, "<DeleteResult></DeleteResult>")
	case "DeleteBucket":
		if len(b.objects) > 0 {
			s3Error(w, http.StatusConflict, "BucketNotEmpty", "The bucket you tried to delete is not empty")
			return
		}
		delete(f.buckets, name)
		w.WriteHeader(http.StatusNoContent)
	default:
		s3Error(w, http.StatusNotImplemented, "NotImplemented", op)
	}
}

// s3Op names the S3 operation of a path-style bucket request.
func s3Op(method string, q map[string][]string) string {
	has := func(k string) bool { _, ok := q[k]; return ok }
	switch {
	case has("versioning"):
		return map[string]string{"PUT": "PutBucketVersioning", "GET": "GetBucketVersioning"}[method]
	case has("tagging"):
		return map[string]string{"PUT": "PutBucketTagging", "GET": "GetBucketTagging", "DELETE": "DeleteBucketTagging"}[method]
	case has("versions"):
		return "ListObjectVersions"
	case has("delete"):
		return "DeleteObjects"
	}
	return map[string]string{"HEAD": "HeadBucket", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}[method] + ""
}

func (f *fakeStore) sts(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" {
		http.Error(w, "bad STS request", http.StatusBadRequest)
		return
	}
	token := r.Form.Get("WebIdentityToken")
	f.tokens = append(f.tokens, token)
	f.roles = append(f.roles, r.Form.Get("RoleArn"))
	f.duration = append(f.duration, r.Form.Get("DurationSeconds"))
	if token == f.refuse {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>trust policy denies web identity %s</Message></Error><RequestId>r1</RequestId></ErrorResponse>`, token)
		return
	}
	fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><SessionToken>%s</SessionToken><Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>arn:aws:sts::assumed-role/x</Arn><AssumedRoleId>x</AssumedRoleId></AssumedRoleUser>
</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>r2</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`,
		fakeKey, fakeSecret, fakeSession, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<Error><Code>%s</Code><Message>%s</Message><RequestId>r3</RequestId></Error>`, code, msg)
}

// bucket is a copy of the named bucket (nil when there is none).
func (f *fakeStore) bucket(name string) *fakeBucket {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.buckets[name]
	if b == nil {
		return nil
	}
	c := *b
	return &c
}

// edit changes the named bucket as someone outside OpenTofu would.
func (f *fakeStore) edit(name string, change func(b *fakeBucket)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.buckets[name] == nil {
		f.buckets[name] = &fakeBucket{}
	}
	change(f.buckets[name])
}

func (f *fakeStore) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}
