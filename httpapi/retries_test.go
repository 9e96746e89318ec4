package httpapi_test

import (
	"reflect"
	"testing"

	"github.com/holdpoint/holdpoint/service"
)

// TestResumeRetryAfterLostAnswer checks a client whose resume committed
// but whose answer was lost (it never read it) gets the same answer by
// sending the same resume again: the same snapshot, message and artifacts,
// and the transfer made once.
func TestResumeRetryAfterLostAnswer(t *testing.T) {
	t.Parallel()
	s := newObservedServer(t)
	s.tenant(t, "acme")
	client, _ := s.key(t, "acme", service.RoleClient)
	paused := pausedTransfer(t, s, client)
	first := approve(t, s, client, paused) // the answer the client lost
	again := approve(t, s, client, paused)
	if first["snapshotId"] == nil || again["snapshotId"] != first["snapshotId"] {
		t.Fatalf("retry answered snapshot %v, want %v", again["snapshotId"], first["snapshotId"])
	}
	if !reflect.DeepEqual(again["message"], first["message"]) || !reflect.DeepEqual(again["artifacts"], first["artifacts"]) {
		t.Fatalf("retry answered %v, want %v", again, first)
	}
}
