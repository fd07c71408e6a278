package signin_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/signin"
)

func claims(t *testing.T, s string) signin.Claims {
	t.Helper()
	if s == "" {
		return nil
	}
	var c signin.Claims
	require.NoError(t, json.Unmarshal([]byte(s), &c))
	return c
}

// TestClaimShapes reads the sign-ins of the providers people run, in the shapes they
// send, and checks which addresses count as verified and which groups are kept.
func TestClaimShapes(t *testing.T) {
	const entra = "https://login.microsoftonline.com/tid/v2.0"
	rules := signin.Rules{TrustedDomains: map[string][]string{entra: {"acme.example"}, "https://idp.acme.example": {"acme.example"}}}
	for _, tc := range []struct {
		name, issuer, id, userInfo string
		rules                      *signin.Rules
		wantUserInfo               bool
		want                       signin.Asserted
		wantErr                    error
		wantIgnored                int
	}{{
		name: "Entra: no email_verified, a trusted domain", issuer: entra,
		id: `{"sub":"s","email":"Ana@Acme.example","name":"Ana","groups":["0b6d-11","9f2a-22"]}`, wantUserInfo: true,
		want: signin.Asserted{Email: "Ana@Acme.example", EmailFrom: "id_token", Name: "Ana", NameFrom: "id_token",
			Groups: []string{"0b6d-11", "9f2a-22"}, GroupsFrom: "id_token", Verified: true, VerifiedBy: signin.ByTrustedDomain},
	}, {
		name: "Entra: xms_edov true", issuer: entra,
		id: `{"sub":"s","oid":"5ab3e8d4-6f1c-4b7e-9d2a-0c4e1f8b7a63","email":"ana@contoso.example","xms_edov":true,"groups":["0b6d-11"]}`, wantUserInfo: true,
		want: signin.Asserted{Email: "ana@contoso.example", EmailFrom: "id_token", Groups: []string{"0b6d-11"}, GroupsFrom: "id_token",
			Verified: true, VerifiedBy: signin.ByXMSEdov, ObjectID: "5ab3e8d4-6f1c-4b7e-9d2a-0c4e1f8b7a63"},
	}, {
		name: "Entra: xms_edov as the string \"true\"", issuer: entra,
		id: `{"sub":"s","email":"ana@contoso.example","xms_edov":"true","name":"Ana","groups":[]}`, wantUserInfo: true,
		want: signin.Asserted{Email: "ana@contoso.example", EmailFrom: "id_token", Name: "Ana", NameFrom: "id_token",
			Groups: []string{}, GroupsFrom: "id_token", Verified: true, VerifiedBy: signin.ByXMSEdov},
	}, {
		name: "Entra: xms_edov false, untrusted domain", issuer: entra,
		id: `{"sub":"s","email":"ana@contoso.example","xms_edov":false}`, wantUserInfo: true,
		want: signin.Asserted{Email: "ana@contoso.example", EmailFrom: "id_token"},
	}, {
		name: "Entra: group overage in _claim_names", issuer: entra,
		id: `{"sub":"s","email":"ana@acme.example","name":"Ana","_claim_names":{"groups":"src1"},` +
			`"_claim_sources":{"src1":{"endpoint":"https://graph.microsoft.com/v1.0/users/s/getMemberObjects"}}}`,
		wantUserInfo: true,
		want: signin.Asserted{Email: "ana@acme.example", EmailFrom: "id_token", Name: "Ana", NameFrom: "id_token",
			GroupsOverage: true, GroupsFrom: "id_token", Verified: true, VerifiedBy: signin.ByTrustedDomain},
	}, {
		name: "Entra: hasgroups (implicit flow overage)", issuer: entra,
		id: `{"sub":"s","email":"ana@acme.example","name":"Ana","email_verified":true,"hasgroups":true}`,
		want: signin.Asserted{Email: "ana@acme.example", EmailFrom: "id_token", Name: "Ana", NameFrom: "id_token", EmailVerified: "true", EmailVerifiedFrom: "id_token",
			GroupsOverage: true, GroupsFrom: "id_token", Verified: true, VerifiedBy: signin.ByEmailVerified},
	}, {
		name: "Okta: groups claim filter", issuer: "https://acme.okta.com",
		id: `{"sub":"00u1","email":"ana@acme.example","email_verified":true,"name":"Ana","groups":["gantry-admins","Everyone"]}`,
		want: signin.Asserted{Email: "ana@acme.example", EmailFrom: "id_token", Name: "Ana", NameFrom: "id_token", EmailVerified: "true",
			EmailVerifiedFrom: "id_token", Groups: []string{"gantry-admins", "Everyone"}, GroupsFrom: "id_token", Verified: true, VerifiedBy: signin.ByEmailVerified},
	}, {
		name: "Google: no groups claim, name from UserInfo", issuer: "https://accounts.google.com",
		id:       `{"sub":"1098","email":"ana@acme.example","email_verified":true,"hd":"acme.example"}`,
		userInfo: `{"sub":"1098","name":"Ana Lima","email":"ana@acme.example","email_verified":true}`, wantUserInfo: true,
		want: signin.Asserted{Email: "ana@acme.example", EmailFrom: "id_token", Name: "Ana Lima", NameFrom: "userinfo", EmailVerified: "true",
			EmailVerifiedFrom: "id_token", Verified: true, VerifiedBy: signin.ByEmailVerified},
	}, {
		name: "Keycloak: full group paths", issuer: "https://kc.acme.example/realms/acme",
		id: `{"sub":"f3a1","email":"ana@acme.example","email_verified":true,"name":"Ana",` +
			`"groups":["/platform/approvers","/platform"]}`,
		want: signin.Asserted{Email: "ana@acme.example", EmailFrom: "id_token", Name: "Ana", NameFrom: "id_token", EmailVerified: "true",
			EmailVerifiedFrom: "id_token", Groups: []string{"/platform/approvers", "/platform"}, GroupsFrom: "id_token", Verified: true, VerifiedBy: signin.ByEmailVerified},
	}, {
		name: "Cognito: cognito:groups and a string email_verified", issuer: "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_x",
		rules: &signin.Rules{GroupsClaim: "cognito:groups"},
		id:    `{"sub":"c0","email":"ana@acme.example","email_verified":"true","name":"Ana","cognito:groups":["approvers"]}`,
		want: signin.Asserted{Email: "ana@acme.example", EmailFrom: "id_token", Name: "Ana", NameFrom: "id_token", EmailVerified: "true",
			EmailVerifiedFrom: "id_token", Groups: []string{"approvers"}, GroupsFrom: "id_token", Verified: true, VerifiedBy: signin.ByEmailVerified},
	}, {
		name: "string booleans in any case; one group as a string", issuer: "https://idp.example",
		id: `{"sub":"s","email":"ana@x.example","email_verified":"TRUE","name":"Ana","groups":"approvers"}`,
		want: signin.Asserted{Email: "ana@x.example", EmailFrom: "id_token", Name: "Ana", NameFrom: "id_token", EmailVerified: "true",
			EmailVerifiedFrom: "id_token", Groups: []string{"approvers"}, GroupsFrom: "id_token", Verified: true, VerifiedBy: signin.ByEmailVerified},
	}, {
		name: "email_verified false with a trusted domain: refused", issuer: "https://idp.acme.example",
		id: `{"sub":"s","email":"ana@acme.example","email_verified":false,"name":"Ana","groups":[]}`,
		want: signin.Asserted{Email: "ana@acme.example", EmailFrom: "id_token", Name: "Ana", NameFrom: "id_token", EmailVerified: "false",
			EmailVerifiedFrom: "id_token", Groups: []string{}, GroupsFrom: "id_token"},
	}, {
		name: "email_verified \"False\" and xms_edov true: refused", issuer: entra,
		id: `{"sub":"s","email":"ana@acme.example","email_verified":"False","xms_edov":true,"name":"A","groups":[]}`,
		want: signin.Asserted{Email: "ana@acme.example", EmailFrom: "id_token", Name: "A", NameFrom: "id_token", EmailVerified: "false",
			EmailVerifiedFrom: "id_token", Groups: []string{}, GroupsFrom: "id_token"},
	}, {
		name:   "unexpected shapes are ignored, never a failed sign-in; unreadable email_verified never trusts a domain",
		issuer: "https://idp.acme.example",
		id:     `{"sub":"s","email":"ana@acme.example","email_verified":1,"name":{"given":"Ana"},"groups":["a",7]}`,
		want: signin.Asserted{Email: "ana@acme.example", EmailFrom: "id_token", EmailVerified: "unreadable", EmailVerifiedFrom: "id_token",
			Groups: []string{"a"}, GroupsFrom: "id_token"},
		wantUserInfo: true, wantIgnored: 3,
	}, {
		name: "profile only from UserInfo", issuer: "https://idp.example",
		id:       `{"sub":"u-alice"}`,
		userInfo: `{"sub":"u-alice","email":"alice@acme.example","email_verified":true,"name":"Alice"}`, wantUserInfo: true,
		want: signin.Asserted{Email: "alice@acme.example", EmailFrom: "userinfo", Name: "Alice", NameFrom: "userinfo", EmailVerified: "true",
			EmailVerifiedFrom: "userinfo", Verified: true, VerifiedBy: signin.ByEmailVerified},
	}, {
		name: "the ID token wins; UserInfo's verification of another address is not borrowed", issuer: "https://idp.example",
		id:       `{"sub":"s","email":"ana@acme.example","name":"Ana"}`,
		userInfo: `{"sub":"s","email":"other@acme.example","email_verified":true,"name":"Other"}`, wantUserInfo: true,
		want: signin.Asserted{Email: "ana@acme.example", EmailFrom: "id_token", Name: "Ana", NameFrom: "id_token"},
	}, {
		name: "a UserInfo sub that differs: refused", issuer: "https://idp.example",
		id: `{"sub":"s"}`, userInfo: `{"sub":"someone-else","email":"ana@acme.example","email_verified":true}`, wantUserInfo: true,
		wantErr: signin.ErrUserInfoSubject,
	}, {
		name: "a UserInfo answer without sub: refused", issuer: "https://idp.example",
		id: `{"sub":"s"}`, userInfo: `{"email":"ana@acme.example","email_verified":true}`, wantUserInfo: true,
		wantErr: signin.ErrUserInfoSubject,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := rules
			if tc.rules != nil {
				r = *tc.rules
			}
			id := claims(t, tc.id)
			require.Equal(t, tc.wantUserInfo, r.NeedsUserInfo(id), "whether UserInfo is worth asking")
			var sub string
			require.NoError(t, json.Unmarshal(id["sub"], &sub))
			at := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
			got, err := r.Read(tc.issuer, sub, id, claims(t, tc.userInfo), "", at)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, got.Ignored, tc.wantIgnored, "%v", got.Ignored)
			got.Ignored = nil
			want := tc.want
			want.At, want.Issuer, want.GroupsClaim = at, tc.issuer, r.GroupsClaim
			if want.GroupsClaim == "" {
				want.GroupsClaim = signin.DefaultGroupsClaim
			}
			require.Equal(t, want, got)
		})
	}
}

func TestParseDomains(t *testing.T) {
	got, err := signin.ParseDomains(" Acme.example, acme.co.uk,,acme.example ")
	require.NoError(t, err)
	require.Equal(t, []string{"acme.example", "acme.co.uk"}, got)
	for _, bad := range []string{"*.acme.example", "@acme.example", "localhost", "https://acme.example", ".acme.example"} {
		_, err := signin.ParseDomains(bad)
		require.Error(t, err, bad)
	}
}
