package sink

import (
	"errors"
	"testing"

	"github.com/walkstage/walkstage/store"
)

func TestIsRequestError(t *testing.T) {
	if IsRequestError(store.ErrConfig) || IsRequestError(errors.New("x")) || !IsRequestError(conflictError("b", "1", "2")) {
		t.Error("IsRequestError: only ErrBatchConflict is a request error")
	}
}
