-- Why: the group rules find people and directories by a link alone, across organizations (issue 40): a sign-in asks which directories hold its subject or oid as externalId and which rules name a group it claimed; a directory change asks which people its externalId names, by subject or by the oid of their last sign-in. Without these each is a scan of the whole table.

-- +goose Up
CREATE INDEX users_subject_idx ON users (subject);
CREATE INDEX users_last_sign_in_oid_idx ON users ((last_sign_in->>'oid'));
CREATE INDEX scim_users_link_idx ON scim_users (external_id);
CREATE INDEX group_rules_group_name_idx ON group_rules (group_name);

-- +goose Down
DROP INDEX group_rules_group_name_idx;
DROP INDEX scim_users_link_idx;
DROP INDEX users_last_sign_in_oid_idx;
DROP INDEX users_subject_idx;
