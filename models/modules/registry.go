package modules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// The module registry protocol, as much of it as a pinned version needs (OpenTofu's
// internal/registry does the same): service discovery at
// https://<host>/.well-known/terraform.json names the modules.v1 base URL; GET
// <base>/<namespace>/<name>/<system>/<version>/download answers where the package is,
// in a JSON body's "location" (200) or the X-Terraform-Get header (204); a location
// starting with /, ./ or ../ is relative to the download URL. Gantry then fetches
// that location over https itself. Locations OpenTofu would hand to another getter
// (git::, s3::, a git host's shorthand) are refused: the allowlisted sha256 pins an
// archive, and only an https archive is one.

// defaultRegistry is the host of a registry source without one ("acme/labels/sandbox").
const defaultRegistry = "registry.opentofu.org"

// maxAnswer bounds a discovery or download answer's body: a small JSON document.
const maxAnswer = 64 << 10

// locate is the URL of pkg's archive: the https URL itself, or where the registry
// says the version is.
func (a *Archives) locate(ctx context.Context, pkg, version string) (*url.URL, error) {
	if strings.HasPrefix(pkg, "https://") {
		return archiveURL(pkg)
	}
	host, module, err := registryAddress(pkg)
	if err != nil {
		return nil, err
	}
	base, err := a.discover(ctx, host)
	if err != nil {
		return nil, err
	}
	download := base.ResolveReference(&url.URL{Path: module + "/" + url.PathEscape(version) + "/download"})
	location, err := a.downloadLocation(ctx, download)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(location, "/") || strings.HasPrefix(location, "./") || strings.HasPrefix(location, "../") {
		rel, err := url.Parse(location)
		if err != nil {
			return nil, fmt.Errorf("the registry's location is not a URL: %w", err)
		}
		return archiveURL(download.ResolveReference(rel).String())
	}
	if i := strings.Index(location, "::"); i >= 0 && !strings.Contains(location[:i], "/") {
		return nil, fmt.Errorf("the registry hands out a %q location, which Gantry does not fetch: only https archives (zip or tar.gz)", location[:i+2])
	}
	return archiveURL(location)
}

// registryAddress splits [host/]namespace/name/system into the registry's host and
// the module's path at it.
func registryAddress(pkg string) (host, module string, err error) {
	parts := strings.Split(pkg, "/")
	switch len(parts) {
	case 3:
		return defaultRegistry, pkg, nil
	case 4:
		return strings.ToLower(parts[0]), strings.Join(parts[1:], "/"), nil
	}
	return "", "", fmt.Errorf("%q is not a registry module address ([host/]namespace/name/system)", pkg)
}

// discover reads the registry's service discovery document and returns its modules.v1
// base URL (with a trailing slash, so module paths resolve under it).
func (a *Archives) discover(ctx context.Context, host string) (*url.URL, error) {
	at := &url.URL{Scheme: "https", Host: host, Path: "/.well-known/terraform.json"}
	body, _, err := a.answer(ctx, at, http.StatusOK)
	if err != nil {
		return nil, fmt.Errorf("service discovery at %s: %w", at, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("service discovery at %s: not a JSON object: %w", at, err)
	}
	raw, ok := doc["modules.v1"].(string)
	if !ok {
		return nil, fmt.Errorf("service discovery at %s: %s offers no module registry (modules.v1)", at, host)
	}
	ref, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("service discovery at %s: modules.v1 is not a URL: %w", at, err)
	}
	base := at.ResolveReference(ref)
	if base.Scheme != "https" {
		return nil, fmt.Errorf("service discovery at %s: modules.v1 is %s, not https", at, redact(base))
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	return base, nil
}

// downloadLocation asks the registry where a version's package is.
func (a *Archives) downloadLocation(ctx context.Context, download *url.URL) (string, error) {
	body, resp, err := a.answer(ctx, download, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return "", fmt.Errorf("asking %s: %w", redact(download), err)
	}
	location := resp.Header.Get("X-Terraform-Get")
	if resp.StatusCode == http.StatusOK {
		var v struct {
			Location string `json:"location"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return "", fmt.Errorf("asking %s: the answer is not JSON: %w", redact(download), err)
		}
		if v.Location != "" {
			location = v.Location
		}
	}
	if location == "" {
		return "", fmt.Errorf("asking %s: the registry gave no location", redact(download))
	}
	return location, nil
}

// answer GETs a small document from u and returns its body, refusing any status but
// want.
func (a *Archives) answer(ctx context.Context, u *url.URL, want ...int) ([]byte, *http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, nil, cause(err)
	}
	defer resp.Body.Close()
	ok := false
	for _, w := range want {
		ok = ok || resp.StatusCode == w
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, nil, errors.New("the registry has no such module or version (404)")
	case !ok:
		return nil, nil, fmt.Errorf("the answer is %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, nil, err
	}
	if len(body) > maxAnswer {
		return nil, nil, fmt.Errorf("the answer is longer than %d bytes", maxAnswer)
	}
	return body, resp, nil
}
