package seaweed

// Audience is the aud Gantry's workload tokens carry for the AWS-style web identity
// integration when its target is this store (identity.Claims.Audience): the tests' STS
// provider accepts it, and nothing else.
const Audience = "sts.gantry"

// BucketPrefix is where a workspace's buckets live: gantry-<workspace id>-<name>. The roles of
// GantryRoles reach no other bucket (the policy variable ${jwt:gantry_ws} is the token's
// workspace claim).
const BucketPrefix = "gantry-${jwt:gantry_ws}-"

// Actions a read session may take: look, never change.
var readActions = []string{"s3:GetObject", "s3:HeadObject", "s3:ListBucket", "s3:GetBucketLocation",
	"s3:GetObjectVersion", "s3:ListBucketVersions", "s3:GetBucketVersioning", "s3:GetBucketTagging",
	"s3:GetObjectTagging", "s3:GetBucketPolicy", "s3:GetBucketAcl", "s3:GetObjectAcl"}

// ApprovedDelete is the condition under which a session may delete a bucket: the token's
// gantry_approved claim (the change classes the apply's approval covered) names "delete".
// SeaweedFS offers a list claim to a policy as its JSON text (["create","delete"]), hence the
// pattern; a token without the claim (a plan's, an apply's without changes) does not match.
// (AWS's aws:PrincipalTag/gantry_deletes does not work here: SeaweedFS reads session tags from
// another claim than the one AWS and Gantry's tokens use; see Provider.PrincipalTagKeys.)
var ApprovedDelete = Conditions{"StringLike": {"jwt:gantry_approved": {`*"delete"*`}}}

// GantryRoles returns the two roles of Gantry's phases on this store, trusting only tokens of
// the provider whose claims equal match (for example {"gantry_ws": ws} for one workspace's
// roles, {"gantry_env": env} for an environment's): name+"-write" for apply tokens (scope
// "write"), allowed every S3 action on the token's workspace's buckets except deleting a bucket
// when the approval covered no delete, and name+"-read" for plan and verification tokens
// (scope "read"), allowed only to read them. A read token cannot assume the write role, nor a
// write token the read role: each phase gets the role of its scope.
func GantryRoles(name, provider string, match map[string]string) (write, read Role) {
	trust := func(scope string) Conditions {
		eq := map[string][]string{"oidc:scope": {scope}}
		for claim, v := range match {
			eq["oidc:"+claim] = []string{v}
		}
		return Conditions{"StringEquals": eq}
	}
	buckets := []string{"arn:aws:s3:::" + BucketPrefix + "*", "arn:aws:s3:::" + BucketPrefix + "*/*"}
	write = Role{Name: name + "-write", Provider: provider, Trust: trust("write"),
		Policy: []Statement{{Effect: "Allow", Actions: []string{"s3:*"}, Resources: buckets},
			{Effect: "Deny", Actions: []string{"s3:DeleteBucket"}, Resources: buckets,
				Conditions: Conditions{"StringNotLike": ApprovedDelete["StringLike"]}}}}
	read = Role{Name: name + "-read", Provider: provider, Trust: trust("read"),
		Policy: []Statement{{Effect: "Allow", Actions: readActions, Resources: buckets}}}
	return write, read
}
