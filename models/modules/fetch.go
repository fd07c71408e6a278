package modules

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"gantry/models/catalog"
)

// archiveURL parses an archive's https URL. OpenTofu's "archive" query argument (a
// hint at the format) is dropped: Gantry tells zip from tar.gz by the bytes. A
// "//subdir" in a registry's location would need combining with the source's own and
// is refused; the allowlisted source names the directory instead.
func archiveURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("the archive's location is not a URL: %w", err)
	case u.Scheme != "https":
		return nil, fmt.Errorf("the archive's location %s is not https: Gantry fetches modules over https only", redact(u))
	case u.Host == "":
		return nil, fmt.Errorf("the archive's location %s has no host", redact(u))
	case u.User != nil:
		return nil, errors.New("the archive's location carries a user name or password: Gantry keeps no credentials in module sources")
	case strings.Contains(strings.TrimPrefix(u.Path, "/"), "//"):
		return nil, fmt.Errorf("the archive's location %s names a //subdirectory: name it in the allowlisted source instead", redact(u))
	}
	q := u.Query()
	if q.Has("archive") {
		q.Del("archive")
		u.RawQuery = q.Encode()
	}
	return u, nil
}

// download GETs an archive, at most catalog.MaxArchiveBytes of it.
func (a *Archives) download(ctx context.Context, u *url.URL) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", redact(u), cause(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching %s: the answer is %s", redact(u), resp.Status)
	}
	if resp.ContentLength > catalog.MaxArchiveBytes {
		return nil, fmt.Errorf("fetching %s: the archive is %d bytes, more than %d", redact(u), resp.ContentLength, catalog.MaxArchiveBytes)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, catalog.MaxArchiveBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", redact(u), cause(err))
	}
	if len(data) > catalog.MaxArchiveBytes {
		return nil, fmt.Errorf("fetching %s: the archive is more than %d bytes", redact(u), catalog.MaxArchiveBytes)
	}
	return data, nil
}

// redact is u without its query and fragment: a signed URL's query is a credential,
// and it must not reach a message, a log or the store.
func redact(u *url.URL) string {
	c := *u
	c.RawQuery, c.Fragment, c.User = "", "", nil
	return c.String()
}

// cause is a client error without the URL net/http puts in it (it may carry a
// query): the caller names the redacted URL itself.
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
