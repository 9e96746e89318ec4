-- name: GetLoginRolePrivileges :one
-- The start-up check of `platform serve`: what row-level security cannot
-- hold back about the login role (session_user stays the role that logged
-- in after SET ROLE). Membership in a table's owner counts as owning it,
-- since a member may SET ROLE to the owner and turn the policies off.
SELECT r.rolname::text AS role_name,
       coalesce(r.rolsuper, false) AS superuser,
       coalesce(r.rolbypassrls, false) AS bypass_rls,
       ARRAY(
           SELECT c.relname::text
           FROM pg_catalog.pg_class c
           WHERE c.relrowsecurity
             AND c.relnamespace = current_schema()::regnamespace
             AND pg_catalog.pg_has_role(session_user, c.relowner, 'MEMBER')
           ORDER BY c.relname
       )::text[] AS owned_tables
FROM pg_catalog.pg_roles r
WHERE r.rolname = session_user;
