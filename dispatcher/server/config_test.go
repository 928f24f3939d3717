package server_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/server"
)

func TestOpenValidates(t *testing.T) {
	_, err := server.Open(server.Config{
		ID: 2, Peers: map[uint64]string{1: "nohost", 3: "127.0.0.1:1"}, PeerHTTP: map[uint64]string{1: "ftp://x"},
		HTTPAddr: "8000", Dispatcher: dispatcher.Config{MaxTasks: -1},
	})
	if !errors.Is(err, server.ErrConfig) {
		t.Fatalf("Open = %v, want ErrConfig", err)
	}
	for _, want := range []string{"Peers has no entry for ID 2", `Peers[1] "nohost"`, "PeerHTTP[1]", "Dir is required", "HTTPAddr", "MaxTasks"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := server.NewHandler(server.HandlerConfig{}); !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), "Dispatcher is required") {
		t.Errorf("NewHandler(zero) = %v", err)
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	s := openOne(t, nil)
	w := startWatch(t, s.Addr()+"/v1/watch", "")
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	<-w.done // the stream ended with the server
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}
