package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/db"
)

// SQLSTATE codes the start-up explains in plain words.
const (
	sqlstateInsufficientPrivilege = "42501"
	sqlstateUndefinedObject       = "42704"
)

// leastPrivilegeAdvice ends the start-up warning: what to run serve as.
const leastPrivilegeAdvice = `serve as a login role that is only a member of holdpoint_app (see "Running with least privilege" in docs/security.md)`

// warnUnlessLeastPrivilege logs one warning when the role the server logged
// in as is not held back by row-level security: the tenant wall is then
// only as good as every query's WHERE clause. A failed check is a warning
// too; it never stops the server.
func warnUnlessLeastPrivilege(ctx context.Context, log *slog.Logger, pool *pgxpool.Pool) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	row, err := db.New(pool).GetLoginRolePrivileges(ctx)
	if err != nil {
		log.Warn("could not check whether row-level security confines the login role", "err", err)
		return
	}
	problems := privilegeProblems(row)
	if len(problems) == 0 {
		return
	}
	log.Warn(fmt.Sprintf("login role %s %s: %s", row.RoleName, strings.Join(problems, "; it "), leastPrivilegeAdvice),
		"role", row.RoleName,
		"superuser", row.Superuser,
		"bypassrls", row.BypassRls,
		"owns", strings.Join(row.OwnedTables, ","))
}

// privilegeProblems says, one phrase each, why row-level security does not
// confine a login role; none for a role fit to serve.
func privilegeProblems(row db.GetLoginRolePrivilegesRow) []string {
	var problems []string
	if row.Superuser {
		// A superuser is a member of every role, so ownership says nothing more.
		return append(problems, "is a superuser, which row-level security does not restrict")
	}
	if row.BypassRls {
		problems = append(problems, "has BYPASSRLS, so row-level security does not restrict it")
	}
	if len(row.OwnedTables) > 0 {
		problems = append(problems, fmt.Sprintf("owns the tables under row-level security (%s) and can turn their policies off",
			strings.Join(row.OwnedTables, ", ")))
	}
	return problems
}

// appRoleHint turns the failure of the pool's SET ROLE holdpoint_app into
// what to do about it, or returns nil for any other error.
func appRoleHint(err error, user string) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	switch pgErr.Code {
	case sqlstateUndefinedObject:
		return fmt.Errorf("%s: the first migration creates that role, so run `platform migrate up` as the schema owner first", pgErr.Message)
	case sqlstateInsufficientPrivilege:
		return fmt.Errorf("login role %s cannot act as the application role (%s): as a superuser, run GRANT holdpoint_app TO %s",
			user, pgErr.Message, pgx.Identifier{user}.Sanitize())
	}
	return nil
}

// migrationHint adds what to do to a migration that failed for want of
// rights: the role is not the schema's owner. Other errors pass unchanged.
func migrationHint(err error, user string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateInsufficientPrivilege {
		return fmt.Errorf("role %s may not change the schema (%w): apply the migrations as the schema owner "+
			"(`platform migrate up` with DATABASE_URL naming the owner), and serve as this role with --migrate=false", user, err)
	}
	return err
}
