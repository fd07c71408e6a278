package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"gantry/models/attest"
	"gantry/models/audit/exportfile"
)

// errVerdict is a verification that failed: its one-line verdict is already printed,
// so the command exits 1 without a log line.
var errVerdict = errors.New("verification failed")

const auditUsage = `Usage:
  gantry audit verify FILE [--key SHA256:FINGERPRINT ...] [--keys-url URL|FILE]
  gantry audit verify --attestation FILE [--key SHA256:FINGERPRINT ...] [--keys-url URL|FILE]
  gantry audit export [--format ndjson|csv] [--from TIME] [--to TIME] [-o FILE]`

// runAudit is "gantry audit verify" and "gantry audit export".
func runAudit(ctx context.Context, args []string, stdout io.Writer, _ *slog.Logger) error {
	if len(args) > 0 && args[0] == "export" {
		return runAuditExport(ctx, args[1:], stdout)
	}
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stdout, auditUsage)
		if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
			return nil
		}
		return errUsage
	}
	var keysURL string
	var attestation bool
	var pinned multiFlag
	f := newFlags("audit verify FILE", "Verify a signed audit export offline: the manifest's signature and key, every line's hash, the chain\n"+
		"from its anchor (unfiltered exports) and the file's sha256. Prints one line, OK or FAIL with the first bad\nline, and exits 0 or 1.", stdout)
	f.Var(&pinned, "key", "the organization's key fingerprint (SHA256:...), checked out of band; may be repeated")
	f.StringVar(&keysURL, "keys-url", "", "the organization's published keys (/api/v1/audit/keys, saved to a file or at a URL; the portal\n"+
		"answers members only, so a URL is asked with GANTRY_TOKEN as a bearer token when it is set)")
	f.BoolVar(&attestation, "attestation", false, "FILE is a run's attestation bundle (in-toto Statement in a DSSE envelope), not an export")
	file, err := parseWithFile(f, args[1:])
	if err != nil {
		return err
	}
	trust := exportfile.Trust{Fingerprints: pinned}
	if keysURL != "" {
		set, err := fetchKeys(ctx, keysURL)
		if err != nil {
			return fmt.Errorf("--keys-url: %w", err)
		}
		trust.Keys = &set
	}
	if attestation {
		raw, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		result := attest.VerifyFile(raw, trust)
		fmt.Fprintln(stdout, result.Verdict)
		if !result.OK {
			return errVerdict
		}
		return nil
	}
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close()
	result := exportfile.Verify(fh, trust)
	fmt.Fprintln(stdout, result.Verdict)
	if !result.OK {
		return errVerdict
	}
	return nil
}

// parseWithFile parses flags given before or after the one positional FILE.
func parseWithFile(f flags, args []string) (string, error) {
	return f.parseOne(args, "which file? (name one)")
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, strings.TrimSpace(v)); return nil }

// fetchKeys reads a published key set from an http(s) URL or a file. The portal serves
// the keys to members only (they name the organization's keys, and a member is who asks
// for them), so a URL is asked with the API token in GANTRY_TOKEN when one is set: any
// scope reads them. Go's client drops the token on a redirect to another host.
func fetchKeys(ctx context.Context, where string) (exportfile.KeySet, error) {
	var set exportfile.KeySet
	var body io.Reader
	if strings.HasPrefix(where, "http://") || strings.HasPrefix(where, "https://") {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
		if err != nil {
			return set, err
		}
		token := os.Getenv("GANTRY_TOKEN")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return set, err
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusUnauthorized && token == "":
			// Set up like the API commands without a token: a usage error (exit 2).
			return set, usageError(fmt.Sprintf("%s answered %s: the portal shows its keys to members only; set GANTRY_TOKEN to an API token "+
				"(any scope, from Settings, API tokens), or save the keys from the export's page to a file and pass that", where, resp.Status))
		case resp.StatusCode == http.StatusUnauthorized:
			return set, fmt.Errorf("%s answered %s: the portal refused GANTRY_TOKEN (expired, revoked or another portal's?)", where, resp.Status)
		case resp.StatusCode != http.StatusOK:
			return set, fmt.Errorf("%s answered %s", where, resp.Status)
		}
		body = io.LimitReader(resp.Body, 1<<20)
	} else {
		fh, err := os.Open(strings.TrimPrefix(where, "file://"))
		if err != nil {
			return set, err
		}
		defer fh.Close()
		body = io.LimitReader(fh, 1<<20)
	}
	if err := json.NewDecoder(body).Decode(&set); err != nil {
		return set, fmt.Errorf("not a key set: %w", err)
	}
	return set, nil
}
