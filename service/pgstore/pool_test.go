package pgstore

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestCheckQueryExecMode: the modes that send parameters without their
// types are refused; the others pass.
func TestCheckQueryExecMode(t *testing.T) {
	for mode, ok := range map[string]bool{"cache_statement": true, "cache_describe": true, "describe_exec": true, "exec": false, "simple_protocol": false} {
		cc, err := pgx.ParseConfig("postgres://u@db/x?default_query_exec_mode=" + mode)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckQueryExecMode(cc); (err == nil) != ok {
			t.Errorf("%s: %v", mode, err)
		}
	}
}
