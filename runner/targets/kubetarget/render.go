package kubetarget

import (
	"bytes"
	"crypto/x509"
	"embed"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"text/template"
)

//go:embed manifests/*.tmpl
var manifestFS embed.FS

var manifests = template.Must(template.New("").Funcs(template.FuncMap{
	// q quotes a string for YAML (a JSON string is a YAML double-quoted scalar).
	"q":    strconv.Quote,
	"join": strings.Join,
	// celList writes ids (checked by idRe: no quotes in them) as a CEL list of strings.
	"celList": func(ids []string) string { return "'" + strings.Join(ids, "', '") + "'" },
	"indent": func(n int, text []byte) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(strings.TrimRight(string(text), "\n"), "\n", "\n"+pad)
	},
}).ParseFS(manifestFS, "manifests/*.tmpl"))

// names are the constants every template may write.
type names struct {
	UserPrefix, WorkspaceLabel                                                     string
	ExtraOrganization, ExtraEnvironment, ExtraWorkspace, ExtraScope, ExtraApproved string
	ReadRole, WriteRole, PolicyName                                                string
}

var theNames = names{UserPrefix: UserPrefix, WorkspaceLabel: WorkspaceLabel,
	ExtraOrganization: ExtraOrganization, ExtraEnvironment: ExtraEnvironment, ExtraWorkspace: ExtraWorkspace,
	ExtraScope: ExtraScope, ExtraApproved: ExtraApproved,
	ReadRole: ReadRole, WriteRole: WriteRole, PolicyName: PolicyName}

func render(name string, data any) ([]byte, error) {
	var b bytes.Buffer
	if err := manifests.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	// One newline at the end and none at the start, whatever the templates' trimming left.
	return append(bytes.Trim(b.Bytes(), "\n"), '\n'), nil
}

type trustData struct {
	names
	Trust
}

// AuthenticationConfig renders the API server's AuthenticationConfiguration trusting t (the
// file kube-apiserver --authentication-config reads).
func AuthenticationConfig(t Trust) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return render("authentication-config.yaml.tmpl", trustData{theNames, t})
}

// JWTAuthenticator renders only the entry of the configuration's jwt list, for an API server
// that already has an AuthenticationConfiguration.
func JWTAuthenticator(t Trust) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return render("jwt", trustData{theNames, t})
}

// binding is one ClusterRoleBinding of a grant.
type binding struct{ Name, Role, Group, Why string }

func (g Grant) bindings() []binding {
	var out []binding
	add := func(kind, id string, group func(id, scope string) string) {
		out = append(out,
			binding{Name: ReadRole + "-" + id, Role: ReadRole, Group: group(id, "read"),
				Why: "The plans and verifications of " + kind + " " + id + " read."},
			binding{Name: WriteRole + "-" + id, Role: WriteRole, Group: group(id, "write"),
				Why: "The applies of " + kind + " " + id + " write (where the admission policy lets them)."})
	}
	if g.Organization != "" {
		add("organization", g.Organization, OrganizationGroup)
	}
	for _, ws := range g.Workspaces {
		add("workspace", ws, WorkspaceGroup)
	}
	return out
}

// Roles renders the read and write ClusterRoles.
func Roles(g Grant) ([]byte, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return render("roles.yaml.tmpl", struct {
		names
		Bindable []string
	}{theNames, g.bindable()})
}

// Bindings renders the ClusterRoleBindings of the grant's organization (or workspaces).
func Bindings(g Grant) ([]byte, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return render("bindings.yaml.tmpl", struct{ Bindings []binding }{g.bindings()})
}

// AdmissionPolicy renders the ValidatingAdmissionPolicy and its binding.
func AdmissionPolicy() ([]byte, error) {
	return render("admission-policy.yaml.tmpl", theNames)
}

// Manifests renders every object a cluster applies to trust Gantry under g, one YAML
// stream: the roles, the bindings and the admission policy (`kubectl apply -f`).
func Manifests(g Grant) ([]byte, error) {
	var parts [][]byte
	for _, r := range []func() ([]byte, error){
		func() ([]byte, error) { return Roles(g) },
		func() ([]byte, error) { return Bindings(g) },
		AdmissionPolicy,
	} {
		b, err := r()
		if err != nil {
			return nil, err
		}
		parts = append(parts, bytes.TrimSpace(b))
	}
	return append(bytes.Join(parts, []byte("\n---\n")), '\n'), nil
}

// isPEMCertificates reports whether data is one or more PEM certificates and nothing else.
func isPEMCertificates(data []byte) bool {
	rest, n := bytes.TrimSpace(data), 0
	for len(rest) > 0 {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil || block.Type != "CERTIFICATE" {
			return false
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return false
		}
		rest, n = bytes.TrimSpace(rest), n+1
	}
	return n > 0
}
